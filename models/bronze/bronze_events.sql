-- Raw clickstream events as landed, appended as files arrive, with ingestion columns.
select
    *,
    {{ ingestion_columns() }}
from {{ source('landing', 'events') }}
