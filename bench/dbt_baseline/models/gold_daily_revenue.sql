select order_date, category, count(*) as orders, {{ money('sum(amount)') }} as revenue,
       '{{ var("currency") }}' as currency
from {{ ref('gold_order_lines') }}
where status <> 'cancelled'
group by order_date, category
