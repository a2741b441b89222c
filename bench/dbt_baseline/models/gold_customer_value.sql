select c.customer_id, c.name, c.country, count(l.order_id) as orders,
       {{ money('coalesce(sum(l.amount), 0)') }} as lifetime_value
from {{ ref('silver_customers') }} as c
left join {{ ref('gold_order_lines') }} as l
    on l.customer_id = c.customer_id and l.status <> 'cancelled'
where c.is_current
group by c.customer_id, c.name, c.country
