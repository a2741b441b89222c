-- Orders and items per customer, with the customer's current country.
select
    o.customer_id,
    c.country,
    count(*) as orders,
    sum(o.quantity) as items
from {{ ref('silver_orders') }} o
left join {{ ref('silver_customers') }} c
    on c.customer_id = o.customer_id and c.is_current
where o.status <> 'cancelled'
group by o.customer_id, c.country
