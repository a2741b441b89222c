"""Following a Delta table's commit log as a stream, for engines without a Delta streaming source.

The stream is Spark's own file source over the table's `_delta_log/*.json`: one row per new
commit, so Spark's checkpoint records which commits each micro-batch took, and a replayed batch
takes the same ones. The rows a batch stands for are then read with Spark's Parquet reader: for
the first batch of a query, the table's snapshot at the newest commit in it; after that, the files
those commits added. Commits that only rearrange data (compaction: dataChange=false) add nothing
new and are passed over, so they are never re-read. A commit that changes existing rows (MERGE,
UPDATE, DELETE, overwrite) cannot be read as appends: the batch fails saying so.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
from deltalake import DeltaTable

from ..failures import changed_upstream

LOG_FILE = r"^(\d{20})\.json$"


class ChangeCommitError(Exception):
    pass


def commit_stream(spark, path: str):
    """A streaming DataFrame with one row (column `version`) per commit of the table."""
    from pyspark.sql import functions as F

    log = (spark.readStream.format("text").option("wholetext", "true")
           .load(str(Path(path) / "_delta_log" / "*.json")))
    version = F.regexp_extract(F.col("_metadata.file_name"), LOG_FILE, 1)
    return log.select(version.alias("version")).where("version <> ''").select(
        F.col("version").cast("bigint").alias("version"))


def snapshot_files(path: str, version: int) -> list[tuple[str, int | None]]:
    """(file, rows) of every file in the table at `version`."""
    actions = pa.table(DeltaTable(path, version=version).get_add_actions(flatten=True))
    return [(str(Path(path) / unquote(p)), n) for p, n in zip(
        actions.column("path").to_pylist(), actions.column("num_records").to_pylist(), strict=True)]


def added_files(path: str, versions: list[int]) -> list[tuple[str, int | None]]:
    """(file, rows) of the files the given commits added with new data, in commit order."""
    files = []
    for version in sorted(versions):
        commit = Path(path) / "_delta_log" / f"{version:020d}.json"
        if not commit.exists():
            raise FileNotFoundError(
                f"Delta log entry {commit} is gone (log cleanup); rebuild the reading model "
                "with --full-refresh")
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
        if any("remove" in a and a["remove"].get("dataChange") for a in actions):
            raise ChangeCommitError(changed_upstream(path, version))
        for action in actions:
            add = action.get("add")
            if add and add.get("dataChange", True):
                rows = json.loads(add["stats"]).get("numRecords") if add.get("stats") else None
                files.append((str(Path(path) / unquote(add["path"])), rows))
    return files
