{{ config(unique_key='order_id', sequence_by='updated_at', delete_when="op = 'D'") }}
-- Current state of each order: the latest event per order wins (late events never overwrite
-- newer ones), and delete events remove the order. Rows that break the expectations in
-- models/properties.yml go to silver_orders_quarantine instead.
select
    order_id,
    customer_id,
    product_id,
    quantity,
    status,
    op,
    updated_at
from {{ ref('bronze_orders') }}
