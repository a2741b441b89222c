{{ config(unique_key='event_id', sequence_by='event_at',
          expectations={'has_event_id': {'expect': 'event_id is not null', 'on_violation': 'drop'}}) }}
-- Each clickstream event once: delivery is at-least-once, so duplicates merge on event_id.
select
    event_id,
    session_id,
    customer_id,
    event_type,
    product_id,
    event_at,
    cast(event_at as date) as event_date
from {{ ref('bronze_events') }}
