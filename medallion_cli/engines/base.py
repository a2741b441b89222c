"""What every engine is: table reads and writes (TableIO: snapshots, streams, append, replace,
MERGE, each one commit, exactly once with an app transaction) and table administration
(TableAdmin: history, time travel, restore, optimize, vacuum, counts), what a write returns,
how a MERGE matches, and the capabilities by which engines differ, which the build consults
instead of engine names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal, Protocol

from ..core.errors import MedallionError
from ..spark.conf import LongQueries
from .sql import ColumnChanges, MergeSpec, RowRange

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

# How a write meets the table: rows added, or the table replaced (schema included)
WriteMode = Literal["append", "overwrite"]
# A JSON object: Delta's commitInfo, a history entry, medallion's commit metadata
Json = dict[str, Any]


@dataclass(frozen=True)
class WriteResult:
    version: int
    rows: int | None
    files_added: int | None = None
    # column -> non-null values in what was written
    non_null: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class FileLayout:
    """A table's data files as a full read opens them, and how many are small (below the
    size asked for): what a compaction policy weighs (materialize/compaction.py)."""

    files: int
    bytes: int
    small_files: int
    small_bytes: int

    @property
    def mean_file_bytes(self) -> float:
        return self.bytes / self.files if self.files else 0.0

    @classmethod
    def of_sizes(cls, sizes: list[int], small_below: int) -> FileLayout:
        small = [size for size in sizes if size < small_below]
        return cls(len(sizes), sum(sizes), len(small), sum(small))

    @classmethod
    def of_totals(cls, files: int, size: int, small_below: int) -> FileLayout:
        """Where only the totals are known (Delta's DESCRIBE DETAIL): every file counts as
        small when their mean is."""
        small = bool(files) and size / files < small_below
        return cls(files, size, files if small else 0, size if small else 0)


@dataclass(frozen=True)
class Capabilities:
    """How engines differ, declared: the build consults these, never an engine's name."""

    # Delta's own streaming source reads tables (read_stream); without it, a streaming model
    # follows each table's commit log (commit_stream drives the query, and each micro-batch
    # runs the model's SQL on what read_commits returns for its commits)
    delta_streaming_source: bool
    # An append or MERGE of no rows commits nothing and costs no more than a look for rows
    # would (rows computed before the commit); elsewhere callers look for rows first: a MERGE
    # of nothing costs seconds on delta-spark
    skips_empty_writes: bool
    clustering: str | None  # why it cannot keep a table's liquid clustering; None: it can
    delta_sql: bool  # Spark SQL statements on Delta tables (DESCRIBE HISTORY, OPTIMIZE) run
    # Where a target's metastore names its tables (engines/catalog.py): "spark_sql", its
    # Spark's own catalog (any metastore that Spark reaches); "thrift", only a Hive Metastore
    # service, through its API (the engine's Spark has no Delta catalog)
    catalog: str
    object_stores: tuple[str, ...]  # warehouse URI schemes it writes to; "*": any Spark can
    jar_bundles: tuple[str, ...]  # Maven bundles (spark/jars.py) its driver needs
    long_queries: LongQueries  # from how much new data a build is long queries, and its JIT
    # A MERGE reaching every file of a table costs less than rewriting the table with Spark
    # (delta-rs's, in one pass: 0.1-0.2 s over 500k rows against 0.45-0.8 s); elsewhere (Delta
    # Lake for Spark reads the target twice and materializes the source) groups that reach most
    # files are replaced by a rewrite
    merges_wide_cheaply: bool
    # A write computes its rows (staged) before it commits them, calling before_commit in
    # between: a model can compute while the data tests on its inputs run, its commit held for
    # their verdict; elsewhere (a write is one Spark command) it starts after them
    stages_writes: bool
    spark_connect: str | None  # why it cannot run on a Spark Connect server; None: it can
    # Why it cannot rename, drop or widen a table's columns in place (Delta's column mapping
    # and type widening: on_schema_change sync_all_columns, renamed_columns); None: it can
    evolves_in_place: str | None
    # A streaming micro-batch (foreachBatch) runs in a Python worker the Spark Connect server
    # starts (materialize/streaming/server_batches.py); elsewhere in this process
    batches_on_server: bool = False
    # Spark's Observation counts a check's rows as the write computes them; pyspark 4.1's
    # Spark Connect client fails a plan that holds one observation twice (SCD2 reads the rows
    # twice), so there the counts are a pass of their own (materialize/checks.py)
    observes_rows: bool = True


class TableIO(Protocol):
    """Reading and writing tables, each write one commit."""

    name: str  # for messages only ("the embedded engine")
    capabilities: Capabilities
    spark: SparkSession  # started on first use (spark/session.py)
    start_seconds: float | None

    def for_node(self, before_commit: Callable[[], None] | None = None) -> Engine:
        """The engine with a Spark session of its own for one node, made when first used;
        before_commit: called before each of the node's commits (where stages_writes)."""

    # raises (RunStopped) once this process may no longer write the warehouse; set by the
    # command holding the warehouse's lock (spark/session.py)
    fence: Callable[[], None]

    def plan_start(self, on_start: Callable[[bool], None], long_queries: bool = False) -> None:
        """Before Spark's first use: whom to tell of its start (True before, False after),
        and whether long queries over many rows follow it."""

    def about_to_commit(self) -> None:
        """Called just before each commit: the node's gate (before_commit), then the fence."""

    def cancel_jobs(self) -> None:
        """Cancel every Spark job this process started (Ctrl-C), if Spark has started."""

    def table_exists(self, path: str) -> bool: ...

    def read_table(self, path: str) -> DataFrame: ...

    def read_stream(self, path: str, changes: bool = False, from_version: int | None = None,
                    schema_log: str | None = None) -> DataFrame:
        """A streaming DataFrame of the rows each new version of the table adds; changes: of
        its change data feed (its rows as inserts, then each commit's inserts, deletes and
        update pre/post images with _change_type, _commit_version, _commit_timestamp).
        from_version: a new query reads the commits from that version on (a version not yet
        committed: the commits to come), rather than the table as it is, then its commits.
        schema_log: where the query keeps the table's schema; a column renamed, dropped or
        widened in place then stops the query once (STREAM_SCHEMA_CHANGED), and it goes on
        with the new columns when started again."""

    def commit_stream(self, path: str, from_version: int | None = None) -> DataFrame:
        """A streaming DataFrame with one row (column `version`) per commit of the table
        (from_version: per commit from that version on)."""

    def read_commits(self, path: str, versions: list[int], from_snapshot: bool,
                     changes: bool = False) -> tuple[DataFrame, int]:
        """(rows, count) the commits added; from_snapshot: the table at the newest of them;
        changes: their change data feed, as read_stream gives it."""

    def read_changes(self, path: str, first: int, last: int) -> DataFrame:
        """The table's change data feed from version `first` to `last`, both included."""

    def table_version(self, path: str) -> int: ...

    def last_commit_value(self, path: str, key: str) -> str | None:
        """`key` from the custom metadata of the table's last data-writing commit."""

    def committed_version(self, path: str, app_id: str) -> int | None:
        """The last version (batch id) `app_id` committed to the table, or None."""

    def write(self, df: DataFrame, path: str, mode: WriteMode, partition_by: tuple[str, ...] = (),
              metadata: Json | None = None, merge_schema: bool = False,
              txn: tuple[str, int] | None = None,
              properties: dict[str, str] | None = None,
              replace_where: RowRange | None = None) -> WriteResult:
        """mode 'overwrite' replaces the table (schema included) atomically, or with
        replace_where only the rows in that range (the new rows all in it); 'append' adds rows.
        txn (app_id, version) is recorded in the same commit, for exactly-once streaming.
        properties: Delta table properties the table must have (set in the commit that
        creates it, else by a commit of their own first when they differ)."""

    def append_rows(self, rows: pa.Table, path: str, txn: tuple[str, int]) -> None:
        """Append a few rows made in Python (the event log's) in one commit with the app
        transaction `txn`; nothing when `txn` is already in the table."""

    def merge(self, df: DataFrame, path: str, spec: MergeSpec, metadata: Json | None = None,
              merge_schema: bool = False, txn: tuple[str, int] | None = None,
              properties: dict[str, str] | None = None) -> WriteResult: ...

    def property_problem(self, key: str, value: str) -> str | None:
        """Why this engine cannot keep a table property, or None when it can."""


class TableAdmin(Protocol):
    """Looking after tables: layout, maintenance, history and time travel, counts."""

    def cluster(self, path: str, columns: tuple[str, ...]) -> bool:
        """Make `columns` the table's liquid clustering columns when they are not (a commit of
        its own, no data change); whether it changed them."""

    def optimize(self, path: str, zorder_by: tuple[str, ...] = (),
                 cluster_by: tuple[str, ...] = ()) -> dict[str, int]:
        """Compact small files (a commit with no data change); {files_removed, files_added}.
        zorder_by: rewrite the rows clustered on these columns (Z-order), so that files hold
        narrow ranges of them and reads filtering on them skip most files. cluster_by: the
        table's clustering columns (set first when they differ); its rows are clustered by
        them (liquid clustering: only files not yet clustered are rewritten)."""

    def vacuum(self, path: str, retain_hours: float, enforce_retention: bool = True) -> list[str]:
        """Delete unreferenced files older than the retention; returns them."""

    def file_count(self, path: str) -> int: ...

    def file_layout(self, path: str, small_below: int) -> FileLayout:
        """The table's data files now: how many, their bytes, and those below `small_below`."""

    def row_count(self, path: str) -> int | None:
        """Rows in the table now, from the Delta log's file statistics (None if it lacks them)."""

    def columns_without_nulls(self, path: str, version: int) -> frozenset[str]:
        """The table's top-level columns with no null at `version`, from the Delta log's file
        statistics (a column they do not cover, or a log not read here, is left out)."""

    def history(self, path: str, limit: int | None = None) -> list[Json]: ...

    def restore(self, path: str, version: int) -> int:
        """Make `version` current as a new commit; returns the new version."""

    def snapshot(self, path: str, as_of: int | str | None = None,
                 limit: int | None = None) -> pa.Table:
        """Rows now, at a version, or at a timestamp (a pyarrow Table)."""

    def table_columns(self, path: str) -> dict[str, str] | None:
        """Column name -> type name of the table, or None when there is no table."""

    def evolve_columns(self, path: str, changes: ColumnChanges) -> None:
        """The table's columns renamed, dropped or widened in place, each a commit of metadata
        alone (capabilities.evolves_in_place says where not)."""


class Engine(TableIO, TableAdmin, Protocol):
    """An engine: both."""


def duplicate_keys(spec: MergeSpec) -> MedallionError:
    """A MERGE source with several rows for one key (both engines say this)."""
    return MedallionError(
        f"the model returned several rows with the same unique_key ({', '.join(spec.keys)}); "
        "MERGE needs one row per key",
        hint="deduplicate in the SQL or set sequence_by so the latest row wins")


# Commits that change no rows (maintenance; properties or comments set after a write): they do
# not hide the last build's metadata.
ROWLESS_OPERATIONS = ("OPTIMIZE", "VACUUM START", "VACUUM END", "SET TBLPROPERTIES",
                      "CHANGE COLUMN", "CLUSTER BY", "UPDATE TABLE METADATA",
                      "UPDATE FIELD METADATA")


def commit_metadata(metadata: Json) -> str:
    """Medallion's commit metadata as Delta's commitInfo.userMetadata (JSON), which both engines
    write and read, so each sees the other's fingerprints."""
    return json.dumps(metadata, sort_keys=True)


def last_commit_value(history: list[Json], key: str) -> str | None:
    """`key` from the userMetadata of the newest data-writing commit in `history` (newest
    first), passing over commits that change no rows."""
    for commit in history:
        if commit.get("operation") in ROWLESS_OPERATIONS:
            continue
        try:
            value: str | None = json.loads(commit.get("userMetadata") or "{}").get(key)
            return value
        except ValueError:
            return None  # someone else's free-text userMetadata
    return None
