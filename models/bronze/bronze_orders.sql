-- Raw order events as landed, appended as files arrive, with ingestion columns.
-- Lines that are not valid JSON for the schema keep their text in _corrupt_record.
select
    *,
    {{ ingestion_columns() }}
from {{ source('landing', 'orders') }}
