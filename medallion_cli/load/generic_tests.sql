{#- Built-in generic data tests. Each returns the rows that fail it; a project can define its own
    with the same syntax, in macros/ or tests/generic/. -#}

{% test not_null(model, column_name) %}
select * from {{ model }} where {{ column_name }} is null
{% endtest %}

{% test unique(model, column_name) %}
select {{ column_name }}, count(*) as n_records
from {{ model }}
where {{ column_name }} is not null
group by {{ column_name }}
having count(*) > 1
{% endtest %}

{% test accepted_values(model, column_name, values, quote=true) %}
select * from {{ model }}
where {{ column_name }} is not null and {{ column_name }} not in (
  {%- for value in values %}{{ "'" ~ value ~ "'" if quote else value }}{{ ", " if not loop.last }}{% endfor -%}
)
{% endtest %}

{% test relationships(model, column_name, to, field) %}
select child.* from {{ model }} as child
left anti join {{ to }} as parent on child.{{ column_name }} = parent.{{ field }}
where child.{{ column_name }} is not null
{% endtest %}

{#- A SQL condition every row must meet; a row where it is null fails too. -#}
{% test expression(model, expression, column_name=none) %}
select * from {{ model }} where not coalesce(({{ expression }}), false)
{% endtest %}
