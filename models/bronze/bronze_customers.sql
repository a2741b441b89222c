-- Raw customer snapshots as landed, appended as files arrive, with ingestion columns.
select
    *,
    {{ ingestion_columns() }}
from {{ source('landing', 'customers') }}
