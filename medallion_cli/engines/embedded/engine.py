"""The embedded engine: Spark computes, delta-rs keeps the Delta transaction log.

Reads take the snapshot's file list from delta-rs and hand it to Spark's Parquet reader.
Writes and MERGE sources: rows Spark estimates small are collected on the driver through Arrow
and handed to delta-rs whole (collected.py); larger ones Spark writes to a staging Parquet
folder, so memory stays bounded whatever the size of the result. Appends and overwrites of
unpartitioned tables commit staged files as they are (moved into the table, added with their
statistics: staged.py); MERGE, partitioned writes and schema evolution have delta-rs read them
back as a stream of Arrow batches into its own commit. Either way it is one Delta commit, and
a failure before the commit leaves the table as it was.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, Schema, write_deltalake
from deltalake.exceptions import DeltaError, TableNotFoundError
from deltalake.transaction import create_table_with_add_actions

from ...core.errors import MedallionError
from ...core.locations import (
    S3_SCHEMES,
    data_files,
    is_remote,
    join,
    local_table_exists,
    local_table_version,
)
from ...core.project import Target
from ...spark.conf import HOT_CODE_ONLY, LongQueries
from ...spark.session import OnDemandSpark
from ...spark.start import start_spark
from ...storage.object_store import put_file, storage_options
from ..base import Capabilities, WriteResult, duplicate_keys, last_commit_value
from ..deltars import (
    append_rows,
    commit_properties,
    one_writer,
    open_table,
    replayed,
    with_clause,
    writable,
)
from ..sql import MergeSpec, RowRange, match_condition, merge_whens
from .admin import CANNOT_CLUSTER, CANNOT_EVOLVE, EmbeddedAdmin
from .collected import CollectedRows, collected_if_small
from .properties import property_problem
from .reads import EmbeddedReads
from .staged import StagedFiles, adoptable, remove_dead_staging, staging_folder

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..base import Json, WriteMode
    from ..sql import Side

# The rows for delta-rs, as Arrow data with their rows and non-null counts
HandedOver = tuple[pa.Table | pa.RecordBatchReader, StagedFiles | CollectedRows]

SOURCE, TARGET = "s", "t"


def _quote(column: str) -> str:
    return '"' + column.replace('"', '""') + '"'


class EmbeddedEngine(EmbeddedReads, EmbeddedAdmin, OnDemandSpark):
    name = "embedded"
    capabilities = Capabilities(
        delta_streaming_source=False,  # streams follow each table's commit log
        skips_empty_writes=True,  # rows are staged before the commit: none, no commit
        clustering=CANNOT_CLUSTER,
        delta_sql=False, catalog="thrift", object_stores=S3_SCHEMES, jar_bundles=(),
        long_queries=LongQueries(128 * 2**20, HOT_CODE_ONLY), merges_wide_cheaply=True,
        stages_writes=True, evolves_in_place=CANNOT_EVOLVE,
        spark_connect="the embedded engine writes its Delta log from this process (delta-rs)")

    def __init__(self, target: Target, spark_log: Path | None = None):
        self.target = target
        self.spark_log = spark_log
        self.staging = staging_folder(target.warehouse)
        remove_dead_staging(self.staging)

    def _start_session(self) -> SparkSession:
        return start_spark(self.target, log_file=self.spark_log, long_queries=self.long_work())

    @contextmanager
    def _staged(self, df: DataFrame) -> Iterator[tuple[pa.RecordBatchReader, StagedFiles]]:
        """The DataFrame as (stream of Arrow batches, staged files), via a staging Parquet folder."""
        folder = self.staging / f"{os.getpid()}-{uuid.uuid4().hex}"
        try:
            df.write.parquet(str(folder))
            # Read file by file (pyarrow.dataset would do the same, and its import, which
            # brings pandas, costs every command 0.2 s).
            staged = StagedFiles([str(f) for f in data_files(folder)])
            schema = staged.arrow_schema()
            yield pa.RecordBatchReader.from_batches(schema, (
                batch.cast(schema) for f in staged.files
                for batch in pq.ParquetFile(f).iter_batches())), staged
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    @contextmanager
    def _handed_over(self, df: DataFrame) -> Iterator[HandedOver]:
        """The rows for delta-rs, as (Arrow data, its rows and non-null counts): collected when
        small (collected.py), else staged."""
        source = collected_if_small(df)
        if source is not None:
            yield source.table, source
            return
        with self._staged(df) as staged:
            yield staged

    def committed_version(self, path: str, app_id: str) -> int | None:
        """The last batch id committed to the table by this app (a streaming query), if any."""
        if not self.table_exists(path):
            return None
        return self._open(path).transaction_version(app_id)

    def table_exists(self, path: str) -> bool:
        # From the log's files (delta-rs cannot read every table delta-spark writes).
        if not is_remote(str(path)):
            return local_table_exists(path)
        return DeltaTable.is_deltatable(str(path), storage_options(str(path)))

    def _open(self, path: str) -> DeltaTable:
        try:
            return open_table(path)
        except TableNotFoundError as exc:
            raise MedallionError("no Delta table here", path=path,
                                 hint="build its model first (medallion build -s <model>), "
                                      "which writes the table") from exc

    def read_table(self, path: str) -> DataFrame:
        dt = self._open(path)
        return self._read_files(dt, path, dt.file_uris())

    def table_version(self, path: str) -> int:
        version = local_table_version(path)
        return self._open(path).version() if version is None else version

    def last_commit_value(self, path: str, key: str) -> str | None:
        """`key` from the metadata of the table's last data-writing commit."""
        return last_commit_value(self._open(path).history(10), key)

    def write(self, df: DataFrame, path: str, mode: WriteMode, partition_by: tuple[str, ...] = (),
              metadata: Json | None = None, merge_schema: bool = False,
              txn: tuple[str, int] | None = None,
              properties: dict[str, str] | None = None,
              replace_where: RowRange | None = None) -> WriteResult:
        dt = self._snapshot(path, properties)
        if replayed(dt, txn):
            return self._unchanged(dt)
        with self._handed_over(df) as (data, handed):
            if not handed.rows and mode == "append" and dt is not None:
                return self._unchanged(dt, handed)  # nothing to add: no empty commit
            self.about_to_commit()
            if not is_remote(str(path)):
                Path(path).mkdir(parents=True, exist_ok=True)  # once the rows are computed
            with one_writer(path):
                if replace_where and dt is not None:  # delta-rs checks the rows are in it
                    write_deltalake(dt, data, mode="overwrite",
                                    predicate=replace_where.sql(_quote),
                                    schema_mode="merge" if merge_schema else None,
                                    commit_properties=commit_properties(metadata, txn))
                    return self._result(path, handed)
                if isinstance(handed, StagedFiles) and adoptable(dt, handed, mode, partition_by):
                    return self._adopt(dt, path, handed, mode, metadata, txn, properties)
                write_deltalake(
                    dt if dt is not None else str(path), data, mode=mode,
                    partition_by=list(partition_by) or None,
                    schema_mode="overwrite" if mode == "overwrite" else (
                        "merge" if merge_schema else None),
                    configuration=properties or None if dt is None else None,
                    commit_properties=commit_properties(metadata, txn),
                    storage_options=storage_options(str(path)) if dt is None else None)
        return self._result(path, handed)

    def _adopt(self, dt: DeltaTable | None, path: str, staged: StagedFiles, mode: WriteMode,
               metadata: Json | None, txn: tuple[str, int] | None,
               properties: dict[str, str] | None) -> WriteResult:
        """Commit Spark's staged files as the table's own data files: moved into the table's
        folder (a rename on the same disk; on S3 an upload) and added with their statistics in
        one commit. A failure before the commit leaves at most unreferenced files, which no
        reader sees and vacuum removes."""
        configuration = (properties or {}) if dt is None else dt.metadata().configuration
        actions = staged.add_actions(configuration)
        for action in actions:
            staged_file = str(Path(staged.files[0]).parent / action.path)
            if is_remote(str(path)):
                put_file(staged_file, join(str(path), action.path))
            else:
                os.replace(staged_file, Path(path) / action.path)
        schema = Schema.from_arrow(staged.arrow_schema())
        if dt is None:
            create_table_with_add_actions(str(path), schema, actions, mode="error",
                                          configuration=properties or None,
                                          commit_properties=commit_properties(metadata, txn),
                                          storage_options=storage_options(str(path)))
        else:
            dt.create_write_transaction([*actions], mode, schema,
                                        commit_properties=commit_properties(metadata, txn))
        return WriteResult(version=self._open(path).version(), rows=staged.rows,
                           files_added=len(actions), non_null=staged.non_null)

    def append_rows(self, rows: pa.Table, path: str, txn: tuple[str, int]) -> None:
        self.fence()
        append_rows(rows, path, txn)

    def merge(self, df: DataFrame, path: str, spec: MergeSpec, metadata: Json | None = None,
              merge_schema: bool = False, txn: tuple[str, int] | None = None,
              properties: dict[str, str] | None = None) -> WriteResult:
        # a MERGE needs its table: one line when it is gone (a build creates it, then merges)
        dt = self._snapshot(path, properties) or self._open(path)
        if replayed(dt, txn):
            return self._unchanged(dt)
        with self._handed_over(df) as (data, source):
            if not source.rows:
                return self._unchanged(dt, source)
            self.about_to_commit()
            with one_writer(path):
                self._merge(dt, data, spec, metadata, merge_schema, txn)
        return self._result(path, source)

    def _snapshot(self, path: str, properties: dict[str, str] | None) -> DeltaTable | None:
        """The table as a write starts from (None when there is none), with the properties it
        lacks or has otherwise set (a commit of their own). The write commits against this
        snapshot, so delta-rs refuses it when a concurrent commit took the same app transaction
        meanwhile, instead of adding its rows twice."""
        try:
            dt = writable(open_table(path), path)
        except TableNotFoundError:
            return None
        changed = {k: v for k, v in (properties or {}).items()
                   if dt.metadata().configuration.get(k) != v}
        if changed:
            self.about_to_commit()  # a commit too: held as the rows' (so before computing them)
            dt.alter.set_table_properties(changed)
            dt = self._open(path)
        return dt

    property_problem = staticmethod(property_problem)

    @staticmethod
    def _unchanged(dt: DeltaTable, rows: StagedFiles | CollectedRows | None = None
                   ) -> WriteResult:
        return WriteResult(version=dt.version(), rows=0, files_added=0,
                           non_null=rows.non_null if rows else {})

    def _merge(self, dt: DeltaTable, data: pa.Table | pa.RecordBatchReader, spec: MergeSpec,
               metadata: Json | None, merge_schema: bool, txn: tuple[str, int] | None) -> None:
        source: Side = lambda c: f"{SOURCE}.{_quote(c)}"
        target: Side = lambda c: f"{TARGET}.{_quote(c)}"
        merger = dt.merge(data, match_condition(spec, source, target), source_alias=SOURCE,
                          target_alias=TARGET, merge_schema=merge_schema,
                          commit_properties=commit_properties(metadata, txn))
        for when in merge_whens(spec, data.schema.names, source, target):
            merger = with_clause(merger, when)
        try:
            merger.execute()
        except DeltaError as exc:
            if "multiple source rows" in str(exc):
                raise duplicate_keys(spec) from exc
            raise

    def _result(self, path: str, written: StagedFiles | CollectedRows) -> WriteResult:
        op = self._open(path).history(1)[0]
        metrics = op.get("operationMetrics") or {}
        if "num_added_rows" in metrics:
            rows = metrics["num_added_rows"]
        else:
            rows = sum(metrics.get(f"num_target_rows_{k}", 0)
                       for k in ("inserted", "updated", "deleted"))
        return WriteResult(version=op["version"], rows=rows,
                           files_added=metrics.get("num_added_files",
                                                   metrics.get("num_target_files_added")),
                           non_null=written.non_null)

    # Maintenance and time travel: delta-rs alone, no Spark.


