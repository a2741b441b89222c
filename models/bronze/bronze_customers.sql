-- Raw customer snapshots, as landed, with ingestion columns.
select
    *,
    {{ ingestion_columns() }}
from {{ source('landing', 'customers') }}
