{{ config(cdc='debezium', unique_key='customer_id', scd_type=2, trigger='1 second') }}
-- Customer history (SCD2) straight from the change topic: cdc='debezium' orders the changes by
-- commit time and log position and applies deletes; no unpacking SQL.
select customer_id, name, lower(email) as email, country, updated_at,
       _cdc_committed_at, _cdc_lsn, _cdc_deleted
from {{ source('kafka', 'customers') }}
where _corrupt_record is null
