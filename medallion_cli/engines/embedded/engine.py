"""The embedded engine: Spark computes, delta-rs keeps the Delta transaction log.

Reads take the snapshot's file list from delta-rs and hand it to Spark's Parquet reader.
Writes: Spark writes its result to a staging Parquet folder. Appends and overwrites of
unpartitioned tables commit those files as they are (moved into the table, added with their
statistics: staged.py); MERGE, partitioned writes and schema evolution have delta-rs read them
back as a stream of Arrow batches into its own commit. Either way it is one Delta commit, nothing
is collected on the driver, so memory stays bounded whatever the size of the result, and a
failure before the commit leaves the table as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Schema, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.transaction import create_table_with_add_actions

from ...core.errors import MedallionError
from ...core.failures import CONCURRENT_COMMIT
from ...core.locations import data_files, local_table_exists
from ...core.project import Target
from .. import (
    MergeSpec,
    WriteResult,
    commit_metadata,
    duplicate_keys,
    last_commit_value,
    match_condition,
    newer_condition,
    removed_condition,
    updated_value,
    write_local_text,
)
from . import delta_log
from ...spark.session import OnDemandSpark
from ...spark.start import start_spark
from .staged import StagedFiles

SOURCE, TARGET = "s", "t"
# Table properties delta-rs keeps and this engine's reads (Spark's Parquet reader over the
# snapshot's files) stay correct under.
EMBEDDED_PROPERTIES = (
    "delta.appendOnly", "delta.enableChangeDataFeed", "delta.checkpointInterval",
    "delta.logRetentionDuration", "delta.deletedFileRetentionDuration",
    "delta.enableExpiredLogCleanup", "delta.dataSkippingNumIndexedCols",
    "delta.dataSkippingStatsColumns", "delta.targetFileSize",
    "delta.checkpoint.writeStatsAsJson", "delta.checkpoint.writeStatsAsStruct")
EMBEDDED_REFUSED = {
    "delta.enableDeletionVectors": "its reads cannot apply deletion vectors (rows a vector "
                                   "deletes would come back)",
    "delta.columnMapping.mode": "its reads find columns by their names in the data files, "
                                "which column mapping renames",
}


def _writable(dt: DeltaTable, path: str) -> DeltaTable:
    """The table, when delta-rs can commit to it: not one delta-spark clustered (cluster_by)."""
    if "clustering" in (dt.protocol().writer_features or []):
        raise MedallionError(
            "this table has liquid clustering (cluster_by, on the delta-spark engine), which "
            "the embedded engine cannot write", path=path,
            hint="build it with a delta-spark target; the embedded engine still reads it")
    return dt


def _quote(column: str) -> str:
    return '"' + column.replace('"', '""') + '"'


def _commit(metadata: dict | None, txn: tuple[str, int] | None) -> CommitProperties | None:
    """Commit properties: custom metadata, and the app transaction that makes a replay a no-op."""
    if not metadata and not txn:
        return None
    return CommitProperties(
        custom_metadata={"userMetadata": commit_metadata(metadata)} if metadata else None,
        app_transactions=[Transaction(*txn)] if txn else None)


def append_rows(rows: pa.Table, path: str, txn: tuple[str, int]) -> None:
    """Rows made in Python appended to a local table by delta-rs alone, no Spark job (the
    Engine contract's append_rows); nothing when `txn` is already in the table."""
    try:
        dt = _writable(DeltaTable(str(path)), path)
    except TableNotFoundError:
        dt = None
    if EmbeddedEngine._replayed(dt, txn):
        return
    with _one_writer(path):
        write_deltalake(dt if dt is not None else str(path), rows, mode="append",
                        schema_mode="merge" if dt is not None else None,
                        commit_properties=_commit(None, txn))


def remove_dead_staging(staging: Path) -> None:
    """Remove staging folders that no running process owns: a build killed mid-write leaves
    its staged Parquet behind (folders are named <pid>-<uuid>)."""
    if not staging.is_dir():
        return
    for folder in staging.iterdir():
        pid = folder.name.split("-", 1)[0]
        if pid.isdigit() and _running(int(pid)):
            continue
        shutil.rmtree(folder, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


@contextmanager
def _one_writer(path: str):
    """A commit that lost to a concurrent one (another build writing the same table) fails with
    one line; nothing of it is in the table."""
    try:
        yield
    except CommitFailedError as exc:
        raise MedallionError(CONCURRENT_COMMIT, path=path) from exc


def _adoptable(dt: DeltaTable | None, staged: StagedFiles, mode: str,
               partition_by: tuple[str, ...]) -> bool:
    """Whether Spark's staged files can become the table's data files as they are: no
    partition folders to translate, no timestamp_ntz (a table feature delta-rs sets when it
    writes), and for an append exactly the table's columns and types. Otherwise delta-rs writes
    the rows (partitions, schema evolution, casts)."""
    if partition_by or not staged.files:
        return False
    schema = staged.arrow_schema()
    if any(pa.types.is_timestamp(f.type) and not f.type.tz for f in schema):
        return False
    if dt is None:
        return True
    if dt.metadata().partition_columns:
        return False
    return mode == "overwrite" or _columns(Schema.from_arrow(schema)) == _columns(dt.schema())


def _columns(schema: Schema) -> list[tuple[str, str]]:
    return [(f["name"], json.dumps(f["type"], sort_keys=True))
            for f in json.loads(schema.to_json())["fields"]]


class EmbeddedEngine(OnDemandSpark):
    name = "embedded"

    def __init__(self, target: Target, spark_log: Path | None = None):
        self.target = target
        self.spark_log = spark_log
        self.staging = Path(target.warehouse) / "_staging"  # local: make_engine checks
        remove_dead_staging(self.staging)

    def _start_session(self):
        return start_spark(self.target, log_file=self.spark_log, long_queries=self.long_queries)

    @contextmanager
    def _staged(self, df):
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

    def committed_version(self, path: str, app_id: str) -> int | None:
        """The last batch id committed to the table by this app (a streaming query), if any."""
        if not self.table_exists(path):
            return None
        return self._open(path).transaction_version(app_id)

    def table_exists(self, path: str) -> bool:
        return local_table_exists(path)  # (delta-rs cannot read every table delta-spark writes)

    def _open(self, path: str) -> DeltaTable:
        try:
            return DeltaTable(str(path))
        except TableNotFoundError as exc:
            raise MedallionError("no Delta table here", path=path) from exc

    def read_table(self, path: str):
        dt = self._open(path)
        return self._read_files(dt, path, dt.file_uris())

    def _read_files(self, dt: DeltaTable, path: str, files: list[str]):
        """The rows of some of the table's data files, with the table's current schema."""
        if "deletionVectors" in (dt.protocol().reader_features or []):
            raise MedallionError("this table uses deletion vectors, which the embedded engine "
                                 "cannot read", path=path,
                                 hint="disable them on the table or use the delta-spark engine")
        schema = self._spark_schema(dt)
        if not files:
            return self.spark.createDataFrame([], schema)
        # basePath lets Spark take partition values from the hive-style folder names delta-rs writes.
        return self.spark.read.schema(schema).option("basePath", str(path)).parquet(*files)

    # Streaming models follow a Delta table through its commit log (see delta_log.py): Spark
    # 4.1 without the Delta JARs has no Delta streaming source, and a Python one costs a Python
    # process per query and reads rows through Python.
    follows_commit_log = True
    skips_empty_writes = True  # rows are staged before the commit: none, no commit

    def commit_stream(self, path: str):
        """A streaming DataFrame with one row (column `version`) per commit of the table."""
        return delta_log.commit_stream(self.spark, path)

    def read_commits(self, path: str, versions: list[int], from_snapshot: bool,
                     changes: bool = False):
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

    def read_changes(self, path: str, first: int, last: int):
        """The table's change feed from version `first` to `last`, both included."""
        return self._read_changes(path, delta_log.commit_changes(path, list(range(first, last + 1)))
                                  )[0]

    def _read_changes(self, path: str, commits: list[delta_log.CommitChanges]):
        """(rows, count) of the commits' changes, with _change_type, _commit_version and
        _commit_timestamp as delta-spark's change feed has them."""
        dt = self._open(path)
        change_schema = self._spark_schema(dt).add(delta_log.CHANGE_TYPE, "string")
        parts, count = [], 0
        for commit in commits:
            stamp = (commit.version, commit.timestamp_ms)
            if commit.change_files:
                parts.append(_as_changes(
                    self.spark.read.schema(change_schema).option(
                        "basePath", str(Path(path) / "_change_data")).parquet(
                        *commit.change_files), None, *stamp))
                count += sum(pq.ParquetFile(f).metadata.num_rows for f in commit.change_files)
            for kind, files in (("insert", commit.inserted), ("delete", commit.deleted)):
                if files:
                    parts.append(_as_changes(self._read_files(dt, path, [f for f, _ in files]),
                                             kind, *stamp))
                    count += sum(n if n is not None else pq.ParquetFile(f).metadata.num_rows
                                 for f, n in files)
        if not parts:
            return _as_changes(self._read_files(dt, path, []), "insert", -1, 0), 0
        rows = parts[0]
        for part in parts[1:]:
            rows = rows.unionByName(part)
        return rows, count

    @staticmethod
    def _spark_schema(dt: DeltaTable):
        from ...spark.pyspark_api import from_arrow_schema

        return from_arrow_schema(pa.schema(dt.schema().to_arrow()))

    def table_version(self, path: str) -> int:
        return self._open(path).version()

    def last_commit_value(self, path: str, key: str) -> str | None:
        """`key` from the metadata of the table's last data-writing commit."""
        return last_commit_value(self._open(path).history(10), key)

    def write(self, df, path: str, mode: str, partition_by: tuple[str, ...] = (),
              metadata: dict | None = None, merge_schema: bool = False,
              txn: tuple[str, int] | None = None,
              properties: dict[str, str] | None = None) -> WriteResult:
        dt = self._snapshot(path, properties)
        if self._replayed(dt, txn):
            return self._unchanged(dt)
        with self._staged(df) as (data, staged):
            if not staged.rows and mode == "append" and dt is not None:
                return self._unchanged(dt, staged)  # nothing to add: no empty commit
            Path(path).mkdir(parents=True, exist_ok=True)  # once the rows are computed
            with _one_writer(path):
                if _adoptable(dt, staged, mode, partition_by):
                    return self._adopt(dt, path, staged, mode, metadata, txn, properties)
                write_deltalake(
                    dt if dt is not None else str(path), data, mode=mode,
                    partition_by=list(partition_by) or None,
                    schema_mode="overwrite" if mode == "overwrite" else (
                        "merge" if merge_schema else None),
                    configuration=properties or None if dt is None else None,
                    commit_properties=_commit(metadata, txn))
        return self._result(path, staged)

    def _adopt(self, dt: DeltaTable | None, path: str, staged: StagedFiles, mode: str,
               metadata: dict | None, txn: tuple[str, int] | None,
               properties: dict[str, str] | None) -> WriteResult:
        """Commit Spark's staged files as the table's own data files: moved into the table's
        folder (a rename, same file system) and added with their statistics in one commit.
        A failure before the commit leaves at most unreferenced files, which no reader sees and
        vacuum removes."""
        configuration = (properties or {}) if dt is None else dt.metadata().configuration
        actions = staged.add_actions(configuration)
        for action in actions:
            os.replace(Path(staged.files[0]).parent / action.path, Path(path) / action.path)
        schema = Schema.from_arrow(staged.arrow_schema())
        if dt is None:
            create_table_with_add_actions(str(path), schema, actions, mode="error",
                                          configuration=properties or None,
                                          commit_properties=_commit(metadata, txn))
        else:
            dt.create_write_transaction(actions, mode, schema,
                                        commit_properties=_commit(metadata, txn))
        return WriteResult(version=self._open(path).version(), rows=staged.rows,
                           files_added=len(actions), non_null=staged.non_null)

    def append_rows(self, rows: pa.Table, path: str, txn: tuple[str, int]) -> None:
        append_rows(rows, path, txn)

    def merge(self, df, path: str, spec: MergeSpec, metadata: dict | None = None,
              merge_schema: bool = False, txn: tuple[str, int] | None = None,
              properties: dict[str, str] | None = None) -> WriteResult:
        dt = self._snapshot(path, properties)
        if self._replayed(dt, txn):
            return self._unchanged(dt)
        with self._staged(df) as (data, staged):
            if not staged.rows:
                return self._unchanged(dt, staged)
            with _one_writer(path):
                self._merge(dt, data, spec, metadata, merge_schema, txn)
        return self._result(path, staged)

    def _snapshot(self, path: str, properties: dict[str, str] | None) -> DeltaTable | None:
        """The table as a write starts from (None when there is none), with the properties it
        lacks or has otherwise set (a commit of their own). The write commits against this
        snapshot, so delta-rs refuses it when a concurrent commit took the same app transaction
        meanwhile, instead of adding its rows twice."""
        try:
            dt = _writable(DeltaTable(str(path)), path)
        except TableNotFoundError:
            return None
        changed = {k: v for k, v in (properties or {}).items()
                   if dt.metadata().configuration.get(k) != v}
        if changed:
            dt.alter.set_table_properties(changed)
            dt = self._open(path)
        return dt

    clustering_problem = ("the embedded engine cannot cluster tables: delta-rs, which keeps "
                          "its Delta log, cannot write a table with liquid clustering")

    def cluster(self, path: str, columns: tuple[str, ...]) -> bool:
        raise MedallionError(self.clustering_problem, path=path)

    def property_problem(self, key: str, value: str) -> str | None:
        if key in EMBEDDED_PROPERTIES:
            return None
        why = EMBEDDED_REFUSED.get(key, "delta-rs, which keeps this engine's Delta log, does "
                                   "not know it")
        return (f"the embedded engine cannot keep table property {key}: {why}. It keeps "
                + ", ".join(EMBEDDED_PROPERTIES) + "; the delta-spark engine keeps any")

    @staticmethod
    def _replayed(dt: DeltaTable | None, txn: tuple[str, int] | None) -> bool:
        """Whether the app transaction already committed this version (or a later one): then
        the write is a replay and must change nothing, as in Delta's own txnAppId/txnVersion."""
        if txn is None or dt is None:
            return False
        done = dt.transaction_version(txn[0])
        return done is not None and done >= txn[1]

    @staticmethod
    def _unchanged(dt: DeltaTable, staged: StagedFiles | None = None) -> WriteResult:
        return WriteResult(version=dt.version(), rows=0, files_added=0,
                           non_null=staged.non_null if staged else {})

    def _merge(self, dt, data, spec, metadata, merge_schema, txn) -> None:
        on = match_condition(spec, lambda c: f"{SOURCE}.{_quote(c)}",
                             lambda c: f"{TARGET}.{_quote(c)}")
        columns = [c for c in data.schema.names if c != spec.delete_column]
        values = {c: f"{SOURCE}.{_quote(c)}" for c in columns}
        newer = newer_condition(spec.sequence_by, lambda c: f"{SOURCE}.{_quote(c)}",
                                lambda c: f"{TARGET}.{_quote(c)}")
        deleting = f"{SOURCE}.{_quote(spec.delete_column)}" if spec.delete_column else None
        merger = dt.merge(data, on, source_alias=SOURCE, target_alias=TARGET,
                          merge_schema=merge_schema, commit_properties=_commit(metadata, txn))
        if deleting:
            merger = merger.when_matched_delete(" AND ".join(filter(None, [newer, deleting])))
        merger = merger.when_matched_update({c: updated_value(
            spec, c, lambda n: f"{SOURCE}.{_quote(n)}", lambda n: f"{TARGET}.{_quote(n)}")
            for c in columns}, predicate=newer)
        merger = merger.when_not_matched_insert(values, predicate=f"NOT {deleting}" if deleting
                                                else None)
        removed = removed_condition(spec, lambda c: f"{TARGET}.{_quote(c)}")
        if removed:
            merger = merger.when_not_matched_by_source_delete(removed)
        try:
            merger.execute()
        except DeltaError as exc:
            if "multiple source rows" in str(exc):
                raise duplicate_keys(spec) from exc
            raise

    def _result(self, path: str, staged: StagedFiles) -> WriteResult:
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
                           non_null=staged.non_null)

    # Maintenance and time travel: delta-rs alone, no Spark.

    def optimize(self, path: str, zorder_by: tuple[str, ...] = (),
                 cluster_by: tuple[str, ...] = ()) -> dict:
        """Compact small files into larger ones (no data change); returns files removed/added."""
        if cluster_by:
            self.cluster(path, cluster_by)
        dt = _writable(self._open(path), path)
        metrics = dt.optimize.z_order(list(zorder_by)) if zorder_by else dt.optimize.compact()
        return {"files_removed": metrics["numFilesRemoved"], "files_added": metrics["numFilesAdded"]}

    def vacuum(self, path: str, retain_hours: float, enforce_retention: bool = True) -> list[str]:
        """Delete files no version within the retention needs; returns the files deleted."""
        return self._open(path).vacuum(retention_hours=int(retain_hours), dry_run=False,
                                       enforce_retention_duration=enforce_retention)

    def file_count(self, path: str) -> int:
        return len(self._open(path).file_uris())

    def row_count(self, path: str) -> int | None:
        rows = pa.table(self._open(path).get_add_actions(flatten=True)).column("num_records")
        return None if rows.null_count else sum(rows.to_pylist())

    def history(self, path: str, limit: int | None = None) -> list[dict]:
        return self._open(path).history(limit)

    def restore(self, path: str, version: int) -> int:
        """Make `version`'s rows the table's current state, as a new commit; returns it."""
        dt = self._open(path)
        dt.restore(version)
        return self.table_version(path)

    def snapshot(self, path: str, as_of: int | str | None = None, limit: int | None = None):
        """The table's rows (as a pyarrow Table) now, at a version, or at a timestamp."""
        dt = self._open(path)
        if as_of is not None:
            dt.load_as_version(as_of)
        dataset = dt.to_pyarrow_dataset()
        return dataset.head(limit) if limit is not None else dataset.to_table()

    def table_columns(self, path: str) -> dict[str, str] | None:
        """Column name -> Delta type name, from the Delta log (no JVM)."""
        if not self.table_exists(path):
            return None
        return {f.name: _type_name(f.type) for f in self._open(path).schema().fields}

    # Checkpoints: the warehouse is a local folder here.

    def read_text(self, location: str) -> str:
        return Path(location).read_text()

    def write_text(self, location: str, text: str) -> None:
        write_local_text(location, text)

    def remove_folder(self, location: str) -> None:
        if Path(location).is_file():
            Path(location).unlink()
        shutil.rmtree(location, ignore_errors=True)


def _as_changes(rows, change_type: str | None, version: int, timestamp_ms: int):
    """Rows as change-feed rows: their _change_type (None: they have it already), the commit's
    version and time."""
    from ...spark.pyspark_api import F

    if change_type is not None:
        rows = rows.withColumn(delta_log.CHANGE_TYPE, F.lit(change_type))
    return (rows.withColumn(delta_log.COMMIT_VERSION, F.lit(version).cast("bigint"))
            .withColumn(delta_log.COMMIT_TIMESTAMP, F.timestamp_millis(F.lit(timestamp_ms))))


def _type_name(delta_type) -> str:
    """`long`, `decimal(12,2)`, or the kind of a nested type (array, struct, map)."""
    primitive = getattr(delta_type, "type", None)
    return primitive if isinstance(primitive, str) else type(delta_type).__name__.replace(
        "Type", "").lower()
