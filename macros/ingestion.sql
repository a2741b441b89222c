{# When a row arrived. File sources also carry _source_file, the file the row came from. #}
{% macro ingestion_columns() -%}
current_timestamp() as _ingested_at
{%- endmacro %}
