-- Singular test: daily revenue must add up to the priced order lines it summarises.
-- Returns the days where it does not.
with lines as (
    select order_date, sum(amount) as amount
    from {{ ref('gold_order_lines') }}
    where status <> 'cancelled'
    group by order_date
),
revenue as (
    select order_date, sum(revenue) as revenue
    from {{ ref('gold_daily_revenue') }}
    group by order_date
)
select l.order_date, l.amount, r.revenue
from lines as l
full outer join revenue as r on l.order_date = r.order_date
where l.amount is null or r.revenue is null or l.amount <> r.revenue
