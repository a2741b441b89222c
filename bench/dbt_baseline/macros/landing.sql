{# A landing folder as a temporary view with its source's declared schema (as medallion's
   sources.yml declares it), malformed lines kept in _corrupt_record. One statement per hook:
   Spark runs several in one call as a script, whose temporary views end with it. #}
{% macro landing_view(name, format, schema) %}
create or replace temporary view landing_{{ name }} ({{ schema }}, _corrupt_record string)
using {{ format }}
options (path '{{ var("landing") }}/{{ name }}', columnNameOfCorruptRecord '_corrupt_record'
         {%- if format == 'csv' %}, header 'true'{% endif %})
{% endmacro %}

{# medallion's `expression` generic test: the rows for which it is false fail. #}
{% test expression(model, expression, column_name=None) %}
select * from {{ model }} where not ({{ expression }})
{% endtest %}
