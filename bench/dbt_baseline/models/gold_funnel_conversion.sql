with sessions as (
    select event_date, session_id,
           max(case when event_type = 'page_view' then 1 else 0 end) as viewed,
           max(case when event_type = 'add_to_cart' then 1 else 0 end) as carted,
           max(case when event_type = 'purchase' then 1 else 0 end) as purchased
    from {{ ref('silver_events') }}
    group by event_date, session_id
)
select event_date, sum(viewed) as viewed, sum(carted) as carted, sum(purchased) as purchased,
       round(sum(purchased) / nullif(sum(viewed), 0), 4) as view_to_purchase_rate
from sessions
group by event_date
