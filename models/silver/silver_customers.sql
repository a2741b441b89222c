{{ config(unique_key='customer_id', sequence_by='updated_at', scd_type=2) }}
-- Customer history (SCD type 2): every change is a new version with valid_from / valid_to,
-- and is_current marks the latest.
select
    customer_id,
    name,
    lower(email) as email,
    country,
    updated_at
from {{ ref('bronze_customers') }}
where _corrupt_record is null
