-- Customer history (SCD type 2) recomputed from every snapshot.
select customer_id, name, lower(email) as email, country, updated_at,
       updated_at as valid_from,
       lead(updated_at) over (partition by customer_id order by updated_at) as valid_to,
       lead(updated_at) over (partition by customer_id order by updated_at) is null as is_current
from {{ ref('bronze_customers') }}
where _corrupt_record is null
