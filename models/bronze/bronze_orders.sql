-- Raw order events, as landed, with ingestion columns.
select
    *,
    {{ ingestion_columns() }}
from {{ source('landing', 'orders') }}
