"""The embedded engine: Spark computes, delta-rs keeps the Delta transaction log.

Reads take the snapshot's file list from delta-rs and hand it to Spark's Parquet reader.
Writes hand Spark's result to delta-rs as Arrow; every write is one Delta commit, so a failure
before the commit leaves the table exactly as it was.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.exceptions import DeltaError, TableNotFoundError

from ..errors import MedallionError
from ..project import Target
from . import MergeSpec, WriteResult
from .spark import start_spark

SOURCE, TARGET = "s", "t"


def _nullable(table: pa.Table) -> pa.Table:
    # Spark marks computed columns NOT NULL where it can prove it; Delta columns stay nullable so a
    # later batch with a null does not fail on a constraint the model never asked for.
    return table.cast(pa.schema([f.with_nullable(True) for f in table.schema]))


def _quote(column: str) -> str:
    return '"' + column.replace('"', '""') + '"'


def _commit(metadata: dict | None) -> CommitProperties | None:
    return CommitProperties(custom_metadata=metadata) if metadata else None


def _last_operation(dt: DeltaTable) -> dict:
    dt.update_incremental()
    return dt.history(1)[0]


class EmbeddedEngine:
    name = "embedded"

    def __init__(self, target: Target):
        self.spark = start_spark(target)

    def table_exists(self, path: Path) -> bool:
        return DeltaTable.is_deltatable(str(path))

    def _open(self, path: Path) -> DeltaTable:
        try:
            return DeltaTable(str(path))
        except TableNotFoundError as exc:
            raise MedallionError("no Delta table here", path=path) from exc

    def read_table(self, path: Path):
        from pyspark.sql.pandas.types import from_arrow_schema

        dt = self._open(path)
        if "deletionVectors" in (dt.protocol().reader_features or []):
            raise MedallionError("this table uses deletion vectors, which the embedded engine "
                                 "cannot read", path=path,
                                 hint="disable them on the table or use the delta-spark engine")
        schema = from_arrow_schema(pa.schema(dt.schema().to_arrow()))
        files = dt.file_uris()
        if not files:
            return self.spark.createDataFrame([], schema)
        # basePath lets Spark take partition values from the hive-style folder names delta-rs writes.
        return self.spark.read.schema(schema).option("basePath", str(path)).parquet(*files)

    def table_metadata(self, path: Path) -> dict:
        return _last_operation(self._open(path))

    def write(self, df, path: Path, mode: str, partition_by: tuple[str, ...] = (),
              metadata: dict | None = None, merge_schema: bool = False) -> WriteResult:
        data = _nullable(df.toArrow())
        path.mkdir(parents=True, exist_ok=True)
        write_deltalake(
            str(path), data, mode=mode, partition_by=list(partition_by) or None,
            schema_mode="overwrite" if mode == "overwrite" else ("merge" if merge_schema else None),
            commit_properties=_commit(metadata))
        return self._result(path)

    def merge(self, df, path: Path, spec: MergeSpec, metadata: dict | None = None,
              merge_schema: bool = False) -> WriteResult:
        data = _nullable(df.toArrow())
        dt = self._open(path)
        on = " AND ".join(f"{TARGET}.{_quote(k)} = {SOURCE}.{_quote(k)}" for k in spec.keys)
        columns = [c for c in data.column_names if c != spec.delete_column]
        values = {c: f"{SOURCE}.{_quote(c)}" for c in columns}
        newer = (f"{SOURCE}.{_quote(spec.sequence_by)} >= {TARGET}.{_quote(spec.sequence_by)}"
                 if spec.sequence_by else None)
        deleting = f"{SOURCE}.{_quote(spec.delete_column)}" if spec.delete_column else None
        merger = dt.merge(data, on, source_alias=SOURCE, target_alias=TARGET,
                          merge_schema=merge_schema, commit_properties=_commit(metadata))
        if deleting:
            merger = merger.when_matched_delete(" AND ".join(filter(None, [newer, deleting])))
        merger = merger.when_matched_update(values, predicate=newer)
        merger = merger.when_not_matched_insert(values, predicate=f"NOT {deleting}" if deleting
                                                else None)
        try:
            merger.execute()
        except DeltaError as exc:
            if "multiple source rows" in str(exc):
                raise MedallionError(
                    "the model returned several rows with the same unique_key "
                    f"({', '.join(spec.keys)}); MERGE needs one row per key",
                    hint="deduplicate in the SQL or set sequence_by so the latest row wins") from exc
            raise
        return self._result(path)

    def _result(self, path: Path) -> WriteResult:
        op = _last_operation(self._open(path))
        metrics = op.get("operationMetrics") or {}
        if "num_added_rows" in metrics:
            rows = metrics["num_added_rows"]
        else:
            rows = sum(metrics.get(f"num_target_rows_{k}", 0)
                       for k in ("inserted", "updated", "deleted"))
        return WriteResult(version=op["version"], rows=rows,
                           files_added=metrics.get("num_added_files",
                                                   metrics.get("num_target_files_added")))
