{# Money amounts are decimals with two places, in the project's currency (var 'currency'). #}
{% macro money(expression) -%}
cast(round({{ expression }}, 2) as decimal(12, 2))
{%- endmacro %}

{% macro currency_code() -%}
'{{ var("currency") }}'
{%- endmacro %}
