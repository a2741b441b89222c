{{ config(unique_key='order_id', sequence_by='updated_at', delete_when="op = 'D'",
          trigger='1 second') }}
-- Current state of each order: the latest event per order wins, deletes remove it.
select order_id, customer_id, product_id, quantity, status, op, updated_at
from {{ ref('bronze_orders') }}
where _corrupt_record is null
