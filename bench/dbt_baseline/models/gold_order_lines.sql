select o.order_id, o.customer_id, o.status, cast(o.updated_at as date) as order_date,
       p.category, {{ money('o.quantity * p.price') }} as amount
from {{ ref('silver_orders') }} as o
join {{ ref('products') }} as p on p.product_id = o.product_id
