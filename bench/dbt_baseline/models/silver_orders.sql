-- The latest valid event per order; orders whose latest event is a delete are gone.
select order_id, customer_id, product_id, quantity, status, op, updated_at
from (
    select *, row_number() over (partition by order_id order by updated_at desc) as _r
    from {{ ref('bronze_orders') }}
    where coalesce(order_id is not null and (op = 'D' or quantity > 0), false)
)
where _r = 1 and op <> 'D'
