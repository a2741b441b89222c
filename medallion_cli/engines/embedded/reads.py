"""What the embedded engine reads with Spark: a snapshot's files (delta-rs lists them, Spark's
Parquet reader reads them), the rows given commits added (streams follow each table's commit
log), and the change feed between versions, from the Delta log's actions.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from ...core.errors import CapabilityError, MedallionError
from ...core.locations import join
from ...storage.object_store import arrow_filesystem
from ..deltars import column_mapped
from . import delta_log

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


def _rows_in(file: str) -> int:
    """A Parquet file's rows, from its footer (local or on S3)."""
    filesystem, where = arrow_filesystem(file)
    rows: int = pq.ParquetFile(where, filesystem=filesystem).metadata.num_rows
    return rows


def _as_changes(rows: DataFrame, change_type: str | None, version: int,
                timestamp_ms: int) -> DataFrame:
    """Rows as change-feed rows: their _change_type (None: they have it already), the commit's
    version and time."""
    from ...spark.pyspark_api import F

    if change_type is not None:
        rows = rows.withColumn(delta_log.CHANGE_TYPE, F.lit(change_type))
    return (rows.withColumn(delta_log.COMMIT_VERSION, F.lit(version).cast("bigint"))
            .withColumn(delta_log.COMMIT_TIMESTAMP, F.timestamp_millis(F.lit(timestamp_ms))))


def _physical(field: dict[str, Any]) -> dict[str, Any]:
    """A Delta schema (as JSON) with each field named as in the data files: its column mapping
    physical name where it has one."""
    named = {key: _physical(value) if isinstance(value, dict) and key != "metadata" else value
             for key, value in field.items()}
    if "fields" in field:
        named["fields"] = [_physical(f) for f in field["fields"]]
    physical = (field.get("metadata") or {}).get("delta.columnMapping.physicalName")
    return {**named, "name": physical} if physical and "name" in field else named


def _named(rows: DataFrame, stored: StructType, schema: StructType) -> DataFrame:
    """Rows read by their files' column names, under the table's names and types (a struct's
    fields renamed by a cast, which matches them by position)."""
    if stored is schema:
        return rows
    from ...spark.pyspark_api import F

    return rows.select(*[F.col(f"`{file.name}`").cast(field.dataType).alias(field.name)
                         for file, field in zip(stored.fields, schema.fields)])


class EmbeddedReads:
    """Reads of a table's files, its commits and its change feed, for batch and streaming models."""

    # the engine's (engine.py)
    spark: SparkSession
    _open: Callable[[str], DeltaTable]

    def _read_files(self, dt: DeltaTable, path: str, files: list[str]) -> DataFrame:
        """The rows of some of the table's data files, with the table's current schema."""
        if "deletionVectors" in (dt.protocol().reader_features or []):
            raise MedallionError("this table uses deletion vectors, which the embedded engine "
                                 "cannot read", path=path,
                                 hint="disable them on the table or use the delta-spark engine")
        schema = self._spark_schema(dt)
        if not files:
            return self.spark.createDataFrame([], schema)
        stored = self._file_schema(dt) or schema
        # basePath lets Spark take partition values from the hive-style folder names delta-rs writes.
        return _named(self.spark.read.schema(stored).option("basePath", str(path)).parquet(*files),
                      stored, schema)

    def read_stream(self, path: str, changes: bool = False, from_version: int | None = None,
                    schema_log: str | None = None) -> DataFrame:
        """Not on this engine (capabilities.delta_streaming_source): Spark 4.1 without Delta's
        JARs has no Delta streaming source, and a Python one costs a Python process per query
        and reads rows through Python, so streams follow each table's commit log instead."""
        raise CapabilityError("the embedded engine has no Delta streaming source: its streams "
                              "follow each table's commit log (commit_stream)", path=path)

    def commit_stream(self, path: str, from_version: int | None = None) -> DataFrame:
        """A streaming DataFrame with one row (column `version`) per commit of the table
        (from_version: per commit from that version on)."""
        commits = delta_log.commit_stream(self.spark, path)
        return commits if from_version is None else commits.where(
            commits.version >= from_version)

    def read_commits(self, path: str, versions: list[int], from_snapshot: bool,
                     changes: bool = False) -> tuple[DataFrame, int]:
        """(rows, count): what the given commits added, or with from_snapshot, every row of the
        table at the newest of them (the first batch of a stream). changes: their row-level
        changes instead, as Delta's change data feed gives them (a snapshot's rows as inserts)."""
        if changes and versions and not from_snapshot:
            return self._read_changes(path, delta_log.commit_changes(path, versions))
        if not versions:
            files = []
        elif from_snapshot:
            files = delta_log.snapshot_files(path, max(versions))
        else:
            files = delta_log.added_files(path, versions)
        rows = self._read_files(self._open(path), path, [f for f, _ in files])
        if changes:  # a stream of changes starts with the table as it is, as inserts
            newest = delta_log.commit_changes(path, [max(versions)])[0] if versions else None
            rows = _as_changes(rows, "insert", *((newest.version, newest.timestamp_ms)
                                                 if newest else (-1, 0)))
        return rows, sum(n or 0 for _, n in files)

    def read_changes(self, path: str, first: int, last: int) -> DataFrame:
        """The table's change feed from version `first` to `last`, both included."""
        return self._read_changes(path, delta_log.commit_changes(path, list(range(first, last + 1)))
                                  )[0]

    def _read_changes(self, path: str, commits: list[delta_log.CommitChanges]
                      ) -> tuple[DataFrame, int]:
        """(rows, count) of the commits' changes, with _change_type, _commit_version and
        _commit_timestamp as delta-spark's change feed has them."""
        dt = self._open(path)
        change_schema = self._spark_schema(dt).add(delta_log.CHANGE_TYPE, "string")
        mapped = self._file_schema(dt)
        stored = change_schema if mapped is None else mapped.add(delta_log.CHANGE_TYPE, "string")
        parts, count = [], 0
        for commit in commits:
            stamp = (commit.version, commit.timestamp_ms)
            if commit.change_files:
                parts.append(_as_changes(_named(
                    self.spark.read.schema(stored).option(
                        "basePath", join(str(path), "_change_data")).parquet(
                        *commit.change_files), stored, change_schema), None, *stamp))
                count += sum(_rows_in(f) for f in commit.change_files)
            for kind, files in (("insert", commit.inserted), ("delete", commit.deleted)):
                if files:
                    parts.append(_as_changes(self._read_files(dt, path, [f for f, _ in files]),
                                             kind, *stamp))
                    count += sum(n if n is not None else _rows_in(f) for f, n in files)
        if not parts:
            return _as_changes(self._read_files(dt, path, []), "insert", -1, 0), 0
        rows = parts[0]
        for part in parts[1:]:
            rows = rows.unionByName(part)
        return rows, count

    @staticmethod
    def _file_schema(dt: DeltaTable) -> StructType | None:
        """The table's schema as its data files name the columns where they name them
        otherwise: with Delta's column mapping (columns renamed or dropped in place, by
        delta-spark), by their physical names. None without."""
        from ...spark.pyspark_api import T

        if not column_mapped(dt):
            return None
        stored: StructType = T.StructType.fromJson(_physical(json.loads(dt.schema().to_json())))
        return stored

    @staticmethod
    def _spark_schema(dt: DeltaTable) -> StructType:
        from ...spark.pyspark_api import from_arrow_schema

        schema: StructType = from_arrow_schema(pa.schema(dt.schema().to_arrow()))
        return schema
