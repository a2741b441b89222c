"""A Spark Python streaming source over a Delta table, for the embedded engine.

Offsets are Delta versions. The first batch reads the snapshot at the latest version; later
batches read the files that commits after it added. Commits that only rearrange data
(compaction: dataChange=false) add nothing new and are passed over, so they are never re-read.
A commit that changes existing rows (MERGE, UPDATE, DELETE, overwrite) cannot be streamed as
appends: the query fails saying so, unless the read asks to skip such commits.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

FORMAT = "medallion_delta"
START = -1  # offset before the first version: the first batch reads the whole snapshot
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


class ChangeCommitError(Exception):
    pass


def _partition_values(relative_path: str) -> dict[str, str]:
    """Hive-style partition values from a data file's path, as delta-rs and Spark write them."""
    parts = relative_path.split("/")[:-1]
    return dict(unquote(p).split("=", 1) for p in parts if "=" in p)


def snapshot_files(table: str, version: int) -> list[tuple[str, dict]]:
    from deltalake import DeltaTable

    dt = DeltaTable(table, version=version)
    root = Path(table)
    return [(uri, _partition_values(str(Path(uri).relative_to(root)))) for uri in dt.file_uris()]


def added_files(table: str, first: int, last: int, skip_change_commits: bool):
    """Files added with new data by commits first..last, in commit order."""
    log = Path(table) / "_delta_log"
    files = []
    for version in range(first, last + 1):
        commit = log / f"{version:020d}.json"
        if not commit.exists():
            raise FileNotFoundError(
                f"Delta log entry {commit} is gone (log cleanup); rebuild the reading model "
                "with --full-refresh")
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
        changes = [a["remove"] for a in actions if "remove" in a and a["remove"].get("dataChange")]
        if changes:
            if skip_change_commits:
                continue
            raise ChangeCommitError(
                f"the upstream table {table} changed or removed existing rows at version "
                f"{version}, which a streaming read cannot take as new rows. Stream only from "
                "append-only tables, set skip_change_commits on the read, or rebuild with "
                "--full-refresh")
        for action in actions:
            add = action.get("add")
            if add and add.get("dataChange", True):
                rel = unquote(add["path"])
                files.append((str(Path(table) / rel), {
                    k: v for k, v in (add.get("partitionValues") or {}).items()}))
    return files


class DeltaStreamReader(DataSourceStreamReader):
    def __init__(self, table: str, schema, skip_change_commits: bool):
        self.table = table
        self.schema = schema
        self.skip_change_commits = skip_change_commits

    def initialOffset(self) -> dict:
        return {"version": START}

    def latestOffset(self) -> dict:
        from deltalake import DeltaTable

        return {"version": DeltaTable(self.table).version()}

    def partitions(self, start: dict, end: dict):
        first, last = start["version"], end["version"]
        if first == START:
            files = snapshot_files(self.table, last)
        else:
            files = added_files(self.table, first + 1, last, self.skip_change_commits)
        return [InputPartition(f) for f in files]

    def read(self, partition: InputPartition):
        from pyspark.sql.pandas.types import to_arrow_schema

        path, partition_values = partition.value
        arrow_schema = to_arrow_schema(self.schema)
        parquet = pq.ParquetFile(path)
        for batch in parquet.iter_batches(batch_size=65536):
            columns = []
            for field in arrow_schema:
                if field.name in batch.schema.names:
                    columns.append(batch.column(field.name).cast(field.type))
                elif partition_values.get(field.name) not in (None, HIVE_NULL):
                    value = pa.array([partition_values[field.name]] * batch.num_rows)
                    columns.append(value.cast(field.type))
                else:  # a column added to the table after this file was written
                    columns.append(pa.nulls(batch.num_rows, field.type))
            yield pa.RecordBatch.from_arrays(columns, schema=arrow_schema)

    def commit(self, end: dict) -> None:
        pass  # nothing to clean up: the Delta log is the source of truth


class DeltaStreamSource(DataSource):
    """spark.readStream.format("medallion_delta").option("path", ...).load()"""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self):
        from deltalake import DeltaTable
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(pa.schema(DeltaTable(self.options["path"]).schema().to_arrow()))

    def streamReader(self, schema):
        skip = str(self.options.get("skip_change_commits", "false")).lower() == "true"
        return DeltaStreamReader(self.options["path"], schema, skip)
