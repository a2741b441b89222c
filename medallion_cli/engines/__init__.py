"""Engines: where Delta tables are read and written. One small interface, several engines.

An engine computes with Spark and owns the Delta side: reading a table's current snapshot,
atomic overwrite and append, and MERGE. A profile's target picks the engine by name.
Tables and checkpoints are locations (str): local paths, or object-store URIs on delta-spark.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..core.errors import MedallionError
from ..core.locations import is_remote

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from ..core.project import Target


@dataclass(frozen=True)
class WriteResult:
    version: int
    rows: int | None
    files_added: int | None = None
    non_null: dict = field(default_factory=dict)  # column -> non-null values in what was written


@dataclass(frozen=True)
class MergeSpec:
    """How a MERGE matches and orders rows. The source has one row per key when it is run."""

    keys: tuple[str, ...]
    # A matched row is only replaced by one at least as new, by these columns in order (null
    # sorts first: older than any value).
    sequence_by: tuple[str, ...] = ()
    delete_column: str | None = None  # boolean source column: matched rows where true are deleted
    expire: str | None = None  # condition on target rows the source lacks: those are deleted
    null_safe_keys: tuple[str, ...] = ()  # keys where null matches null
    # The source replaces whole groups of target rows: per group (its keys), one marker row
    # (delete column true) that matches every target row of the group, which are deleted, and
    # the group's new rows (delete column false), which match nothing and are inserted.
    replace_groups: bool = False
    ignore_nulls: bool = False  # a null in a matched source row keeps the stored value
    # The latest truncate's sequence_by values (SQL literals): target rows the source lacks
    # that are not newer are deleted
    truncated_through: dict[str, str] | None = None


def updated_value(spec: MergeSpec, column: str, source, target) -> str:
    """SQL: the value a matched row's column is updated to."""
    if spec.ignore_nulls and column not in spec.keys:
        return f"coalesce({source(column)}, {target(column)})"
    return source(column)


def match_condition(spec: MergeSpec, source, target) -> str:
    """SQL: a target row is the source row's, by the spec's keys (`source` and `target` as in
    newer_condition)."""
    keys = [f"({target(k)} IS NOT DISTINCT FROM {source(k)})" if k in spec.null_safe_keys
            else f"{target(k)} = {source(k)}" for k in spec.keys]
    markers = [source(spec.delete_column)] if spec.replace_groups else []
    return " AND ".join(keys + markers)


def newer_condition(columns: tuple[str, ...], source, target) -> str | None:
    """SQL: the source row is at least as new as the target row, comparing `columns` in order,
    a null older than any value (so a row with a null sequence never replaces one with a value,
    and a valid update always replaces a null); on equal sequences the source wins. `source`
    and `target` name a column as SQL (e.g. `lambda c: f"s.{quote(c)}"`). Both engines' SQL
    (Spark's and delta-rs's DataFusion) read it; DataFusion's parser binds `IS NOT DISTINCT
    FROM` looser than AND, hence its parentheses."""
    if not columns:
        return None
    s, t = source(columns[-1]), target(columns[-1])
    condition = f"({t} IS NULL OR {s} >= {t})"
    for column in reversed(columns[:-1]):
        s, t = source(column), target(column)
        condition = (f"(({t} IS NULL AND {s} IS NOT NULL) OR {s} > {t} OR "
                     f"(({s} IS NOT DISTINCT FROM {t}) AND {condition}))")
    return condition


def sql_literal(text: str | None, type_name: str) -> str:
    """A value, as Spark casts it to a string (timestamps in the session's time zone, UTC), as
    a literal of its Spark type (`simpleString()`) both engines' SQL read."""
    if text is None:
        return "NULL"
    if type_name in ("timestamp", "timestamp_ntz", "date"):
        return f"CAST('{text}' AS {'DATE' if type_name == 'date' else 'TIMESTAMP'})"
    if type_name in ("string", "binary") or type_name.startswith(("varchar", "char")):
        return "'" + text.replace("'", "''") + "'"
    return text  # numbers and booleans read as themselves


def removed_condition(spec: MergeSpec, target) -> str | None:
    """SQL: a target row the source lacks is deleted (spec.expire, or not newer than the latest
    truncate); `target` names a column as SQL."""
    conditions = [spec.expire] if spec.expire else []
    if spec.truncated_through is not None:
        through = spec.truncated_through
        older = newer_condition(spec.sequence_by, lambda c: through[c], target)
        conditions.append(f"coalesce({older}, false)")  # a null truncate is the oldest
    return " OR ".join(f"({c})" for c in conditions) or None


class Engine(Protocol):
    spark: SparkSession  # started on first use (engines/session.py)
    start_seconds: float | None

    def for_node(self) -> Engine:
        """The engine with a Spark session of its own for one node, made when first used."""

    def table_exists(self, path: str) -> bool: ...

    def read_table(self, path: str) -> DataFrame: ...

    # How streaming models read Delta tables. An engine with a Delta streaming source
    # (follows_commit_log False) gives read_stream, and the model's SQL runs as a streaming query.
    # One without it follows each table's commit log instead: commit_stream drives the query, and
    # each micro-batch runs the model's SQL on what read_commits returns for its commits.
    follows_commit_log: bool

    def read_stream(self, path: str, changes: bool = False) -> DataFrame:
        """A streaming DataFrame of the rows each new version of the table adds; changes: of
        its change data feed (its rows as inserts, then each commit's inserts, deletes and
        update pre/post images with _change_type, _commit_version, _commit_timestamp)."""

    def commit_stream(self, path: str) -> DataFrame:
        """A streaming DataFrame with one row (column `version`) per commit of the table."""

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

    def write(self, df: DataFrame, path: str, mode: str, partition_by: tuple[str, ...] = (),
              metadata: dict | None = None, merge_schema: bool = False,
              txn: tuple[str, int] | None = None,
              properties: dict[str, str] | None = None) -> WriteResult:
        """mode 'overwrite' replaces the table (schema included) atomically; 'append' adds rows.
        txn (app_id, version) is recorded in the same commit, for exactly-once streaming.
        properties: Delta table properties the table must have (set in the commit that
        creates it, else by a commit of their own first when they differ)."""

    # Whether an append or MERGE of no rows commits nothing and costs no more than a look for
    # rows would (the embedded engine computes the rows before it commits). Where it does
    # not, callers look for rows first: a MERGE of nothing costs seconds on delta-spark.
    skips_empty_writes: bool

    def append_rows(self, rows: pa.Table, path: str, txn: tuple[str, int]) -> None:
        """Append a few rows made in Python (the event log's) in one commit with the app
        transaction `txn`; nothing when `txn` is already in the table."""

    def merge(self, df: DataFrame, path: str, spec: MergeSpec, metadata: dict | None = None,
              merge_schema: bool = False, txn: tuple[str, int] | None = None,
              properties: dict[str, str] | None = None) -> WriteResult: ...

    def property_problem(self, key: str, value: str) -> str | None:
        """Why this engine cannot keep a table property, or None when it can."""


    # Maintenance and time travel.

    # Why this engine cannot keep a table's liquid clustering, or None when it can.
    clustering_problem: str | None = None

    def cluster(self, path: str, columns: tuple[str, ...]) -> bool:
        """Make `columns` the table's liquid clustering columns when they are not (a commit of
        its own, no data change); whether it changed them."""

    def optimize(self, path: str, zorder_by: tuple[str, ...] = (),
                 cluster_by: tuple[str, ...] = ()) -> dict:
        """Compact small files (a commit with no data change); {files_removed, files_added}.
        zorder_by: rewrite the rows clustered on these columns (Z-order), so that files hold
        narrow ranges of them and reads filtering on them skip most files. cluster_by: the
        table's clustering columns (set first when they differ); its rows are clustered by
        them (liquid clustering: only files not yet clustered are rewritten)."""

    def vacuum(self, path: str, retain_hours: float, enforce_retention: bool = True) -> list[str]:
        """Delete unreferenced files older than the retention; returns them."""

    def file_count(self, path: str) -> int: ...

    def row_count(self, path: str) -> int | None:
        """Rows in the table now, from the Delta log's file statistics (None if it lacks them)."""

    def history(self, path: str, limit: int | None = None) -> list[dict]: ...

    def restore(self, path: str, version: int) -> int:
        """Make `version` current as a new commit; returns the new version."""

    def snapshot(self, path: str, as_of: int | str | None = None, limit: int | None = None):
        """Rows now, at a version, or at a timestamp (a pyarrow Table)."""

    def table_columns(self, path: str) -> dict[str, str] | None:
        """Column name -> type name of the table, or None when there is no table."""

    # Streaming checkpoints, wherever the warehouse is.

    def read_text(self, location: str) -> str:
        """The content of a file (a checkpoint's metadata); FileNotFoundError if none."""

    def write_text(self, location: str, text: str) -> None:
        """Write a small file (beside a checkpoint's), replacing one that is there: whole, or
        not at all when the process is killed meanwhile."""

    def remove_folder(self, location: str) -> None:
        """Delete a folder and everything in it (a checkpoint), or a file; nothing there is
        fine."""


def duplicate_keys(spec: MergeSpec) -> MedallionError:
    """A MERGE source with several rows for one key (both engines say this)."""
    return MedallionError(
        f"the model returned several rows with the same unique_key ({', '.join(spec.keys)}); "
        "MERGE needs one row per key",
        hint="deduplicate in the SQL or set sequence_by so the latest row wins")


# Commits that change no rows (maintenance; properties or comments set after a write): they do
# not hide the last build's metadata.
ROWLESS_OPERATIONS = ("OPTIMIZE", "VACUUM START", "VACUUM END", "SET TBLPROPERTIES",
                      "CHANGE COLUMN", "CLUSTER BY")


def commit_metadata(metadata: dict) -> str:
    """Medallion's commit metadata as Delta's commitInfo.userMetadata (JSON), which both engines
    write and read, so each sees the other's fingerprints."""
    return json.dumps(metadata, sort_keys=True)


def last_commit_value(history: list[dict], key: str) -> str | None:
    """`key` from the userMetadata of the newest data-writing commit in `history` (newest
    first), passing over commits that change no rows."""
    for commit in history:
        if commit.get("operation") in ROWLESS_OPERATIONS:
            continue
        try:
            return json.loads(commit.get("userMetadata") or "{}").get(key)
        except ValueError:
            return None  # someone else's free-text userMetadata
    return None


def write_local_text(location: str, text: str) -> None:
    """Write a small local file whole or not at all (written beside it, then renamed over it):
    a process killed mid-write leaves the file as it was, never an empty one that the next
    build cannot parse."""
    path = Path(location)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    written.write_text(text)
    os.replace(written, path)


def make_engine(target: Target, spark_log: Path | None = None) -> Engine:
    """The target's engine. spark_log: where Spark's own output goes when it starts (None:
    the terminal, as --debug wants)."""
    if target.engine == "embedded":
        if is_remote(target.warehouse):
            raise MedallionError(
                f"target '{target.name}' has its warehouse on object storage "
                f"({target.warehouse}), but the embedded engine writes to local disks only",
                path=target.profiles_file,
                hint="use engine: delta-spark for an object-store warehouse (see 'Running on a "
                     "cluster' in the README), or give the embedded engine a local folder")
        from .embedded.engine import EmbeddedEngine

        return EmbeddedEngine(target, spark_log)
    if target.engine == "delta-spark":
        from .delta_spark.engine import NativeEngine

        return NativeEngine(target, spark_log)
    raise ValueError(f"unknown engine {target.engine}")
