{{ config(incremental_by='order_date') }}
-- Revenue per day and category, excluding cancelled orders; a build recomputes only the days
-- whose orders changed.
select
    order_date,
    category,
    count(*) as orders,
    {{ money('sum(amount)') }} as revenue,
    {{ currency_code() }} as currency
from {{ ref('gold_order_lines') }}
where status <> 'cancelled'
group by order_date, category
