{{ config(unique_key='customer_id', sequence_by='updated_at') }}
-- Current customer record, latest snapshot wins.
select
    customer_id,
    name,
    lower(email) as email,
    country,
    updated_at
from {{ ref('bronze_customers') }}
where customer_id is not null
