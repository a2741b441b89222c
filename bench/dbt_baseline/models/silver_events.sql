-- Each clickstream event once.
select event_id, session_id, customer_id, event_type, product_id, event_at, event_date
from (
    select *, cast(event_at as date) as event_date,
           row_number() over (partition by event_id order by event_at desc) as _r
    from {{ ref('bronze_events') }}
    where event_id is not null
)
where _r = 1
