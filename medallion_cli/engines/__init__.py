"""Engines: where Delta tables are read and written. One small interface, several engines.

An engine computes with Spark and owns the Delta side: reading a table's current snapshot,
atomic overwrite and append, and MERGE. A profile's target picks the engine by name.
Tables and checkpoints are locations (str): local paths, or object-store URIs on delta-spark.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ..errors import MedallionError
from ..locations import is_remote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..project import Target


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
    sequence_by: str | None = None  # a matched row is only replaced by one at least as new
    delete_column: str | None = None  # boolean source column: matched rows where true are deleted


class Engine(Protocol):
    spark: SparkSession

    def table_exists(self, path: str) -> bool: ...

    def read_table(self, path: str) -> DataFrame: ...

    # How streaming models read Delta tables. An engine with a Delta streaming source
    # (follows_commit_log False) gives read_stream, and the model's SQL runs as a streaming query.
    # One without it follows each table's commit log instead: commit_stream drives the query, and
    # each micro-batch runs the model's SQL on what read_commits returns for its commits.
    follows_commit_log: bool

    def read_stream(self, path: str) -> DataFrame:
        """A streaming DataFrame of the rows each new version of the table adds."""

    def commit_stream(self, path: str) -> DataFrame:
        """A streaming DataFrame with one row (column `version`) per commit of the table."""

    def read_commits(self, path: str, versions: list[int], from_snapshot: bool
                     ) -> tuple[DataFrame, int]:
        """(rows, count) the commits added; from_snapshot: the table at the newest of them."""

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

    def merge(self, df: DataFrame, path: str, spec: MergeSpec, metadata: dict | None = None,
              merge_schema: bool = False, txn: tuple[str, int] | None = None,
              properties: dict[str, str] | None = None) -> WriteResult: ...

    def property_problem(self, key: str, value: str) -> str | None:
        """Why this engine cannot keep a table property, or None when it can."""


    # Maintenance and time travel.

    def optimize(self, path: str) -> dict:
        """Compact small files (a commit with no data change); {files_removed, files_added}."""

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
        """Write a small file (beside a checkpoint's), replacing one that is there."""

    def remove_folder(self, location: str) -> None:
        """Delete a folder and everything in it (a checkpoint); nothing there is fine."""


def duplicate_keys(spec: MergeSpec) -> MedallionError:
    """A MERGE source with several rows for one key (both engines say this)."""
    return MedallionError(
        f"the model returned several rows with the same unique_key ({', '.join(spec.keys)}); "
        "MERGE needs one row per key",
        hint="deduplicate in the SQL or set sequence_by so the latest row wins")


# Commits that rewrite files without changing data; they do not hide the last build's metadata.
MAINTENANCE_OPERATIONS = ("OPTIMIZE", "VACUUM START", "VACUUM END")


def commit_metadata(metadata: dict) -> str:
    """Medallion's commit metadata as Delta's commitInfo.userMetadata (JSON), which both engines
    write and read, so each sees the other's fingerprints."""
    return json.dumps(metadata, sort_keys=True)


def last_commit_value(history: list[dict], key: str) -> str | None:
    """`key` from the userMetadata of the newest data-writing commit in `history` (newest
    first), passing over maintenance commits."""
    for commit in history:
        if commit.get("operation") in MAINTENANCE_OPERATIONS:
            continue
        try:
            return json.loads(commit.get("userMetadata") or "{}").get(key)
        except ValueError:
            return None  # someone else's free-text userMetadata
    return None


def make_engine(target: Target) -> Engine:
    if target.engine == "embedded":
        if is_remote(target.warehouse):
            raise MedallionError(
                f"target '{target.name}' has its warehouse on object storage "
                f"({target.warehouse}), but the embedded engine writes to local disks only",
                path=target.profiles_file,
                hint="use engine: delta-spark for an object-store warehouse (see 'Running on a "
                     "cluster' in the README), or give the embedded engine a local folder")
        from .embedded import EmbeddedEngine

        return EmbeddedEngine(target)
    if target.engine == "delta-spark":
        from .native import NativeEngine

        return NativeEngine(target)
    raise ValueError(f"unknown engine {target.engine}")
