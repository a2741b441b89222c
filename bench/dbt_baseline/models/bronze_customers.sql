select *, input_file_name() as _source_file, current_timestamp() as _ingested_at
from landing_customers
