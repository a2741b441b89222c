"""Following a Delta table's commit log as a stream, for engines without a Delta streaming source.

The stream is Spark's own file source over the table's `_delta_log/*.json`: one row per new
commit, so Spark's checkpoint records which commits each micro-batch took, and a replayed batch
takes the same ones. The rows a batch stands for are then read with Spark's Parquet reader: for
the first batch of a query, the table's snapshot at the newest commit in it; after that, the files
those commits added. Commits that only rearrange data (compaction: dataChange=false) add nothing
new and are passed over, so they are never re-read. A commit that changes existing rows (MERGE,
UPDATE, DELETE, overwrite) cannot be read as appends: the batch fails saying so. A table's change
feed (ref('x', changes=true)) reads every commit's row-level changes instead (commit_changes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa

from ...core.config import CHANGE_FEED_COLUMNS
from ...core.error_text import changed_upstream
from ...core.locations import COMMIT, join
from ...storage.object_store import read_bytes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
from ..deltars import open_table

CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP = CHANGE_FEED_COLUMNS


class ChangeCommitError(Exception):
    pass


def commit_stream(spark: SparkSession, path: str) -> DataFrame:
    """A streaming DataFrame with one row (column `version`) per commit of the table."""
    from ...spark.pyspark_api import F

    log = (spark.readStream.format("text").option("wholetext", "true")
           .load(join(str(path), "_delta_log", "*.json")))
    version = F.regexp_extract(F.col("_metadata.file_name"), COMMIT, 1)
    return log.select(version.alias("version")).where("version <> ''").select(
        F.col("version").cast("bigint").alias("version"))


def snapshot_files(path: str, version: int) -> list[tuple[str, int | None]]:
    """(file, rows) of every file in the table at `version`."""
    actions = pa.table(open_table(path, version).get_add_actions(flatten=True))
    return [(join(str(path), unquote(p)), n) for p, n in zip(
        actions.column("path").to_pylist(), actions.column("num_records").to_pylist(), strict=True)]


def _actions(path: str, version: int) -> list[dict[str, Any]]:
    commit = join(str(path), "_delta_log", f"{version:020d}.json")
    try:
        text = read_bytes(commit).decode()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"Delta log entry {commit} is gone (log cleanup); rebuild the reading model "
            "with --full-refresh") from None
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _file(path: str, action: dict[str, Any]) -> tuple[str, int | None]:
    rows = json.loads(action["stats"]).get("numRecords") if action.get("stats") else None
    return join(str(path), unquote(action["path"])), rows


def added_files(path: str, versions: list[int]) -> list[tuple[str, int | None]]:
    """(file, rows) of the files the given commits added with new data, in commit order."""
    files = []
    for version in sorted(versions):
        actions = _actions(path, version)
        if any("remove" in a and a["remove"].get("dataChange") for a in actions):
            raise ChangeCommitError(changed_upstream(path, version))
        files += [_file(path, a["add"]) for a in actions
                  if "add" in a and a["add"].get("dataChange", True)]
    return files


@dataclass(frozen=True)
class CommitChanges:
    """A commit's row-level changes, as Delta's change data feed defines them: the commit's
    change files (`cdc` actions, whose rows carry their `_change_type`) when it wrote any (a
    MERGE, UPDATE or DELETE on a table with the feed enabled); else every row of the files it
    added is an insert and every row of the files it removed a delete (appends, overwrites).
    Commits that only rearrange files (compaction) change no rows."""

    version: int
    timestamp_ms: int
    change_files: list[str]
    inserted: list[tuple[str, int | None]]
    deleted: list[tuple[str, int | None]]


def commit_changes(path: str, versions: list[int]) -> list[CommitChanges]:
    changes = []
    for version in sorted(versions):
        actions = _actions(path, version)
        info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        timestamp = info.get("inCommitTimestamp") or info.get("timestamp") or 0
        cdc = [join(str(path), unquote(a["cdc"]["path"])) for a in actions if "cdc" in a]
        if cdc:
            changes.append(CommitChanges(version, timestamp, cdc, [], []))
            continue
        changed = {kind: [_file(path, a[kind]) for a in actions
                          if kind in a and a[kind].get("dataChange", True)]
                   for kind in ("add", "remove")}
        changes.append(CommitChanges(version, timestamp, [], changed["add"], changed["remove"]))
    return changes
