-- The rows medallion's drop expectations keep apart.
select order_id, customer_id, product_id, quantity, status, op, updated_at
from {{ ref('bronze_orders') }}
where not coalesce(order_id is not null and (op = 'D' or quantity > 0), false)
