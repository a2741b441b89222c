"""The Parquet files Spark staged for a write, read through their footers only: rows, non-null
counts, and the Delta add actions (with statistics) that make them a table's own data files.

Committing Spark's files as they are saves the embedded engine rewriting every row through
delta-rs. The statistics follow delta-rs's own conventions, so any Delta reader skips files on
them as it would on files delta-rs wrote: numRecords, nullCount, and min/max of the first
`delta.dataSkippingNumIndexedCols` (default 32) top-level columns, timestamps to the
millisecond, strings when short enough to keep whole.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, Schema
from deltalake.transaction import AddAction

from ...core.locations import is_remote
from ...core.processes import running

DEFAULT_INDEXED_COLUMNS = 32
LONGEST_STRING_STAT = 32  # longer values are left out of min/max rather than truncated


class StagedFiles:
    """Staged Parquet files, with row and null counts from their footers (no scan). Counted
    while the files exist: a write reports them after the staging folder is gone."""

    def __init__(self, files: list[str]) -> None:
        self.files = files
        self.metadata = [pq.ParquetFile(f).metadata for f in files]
        self.rows = sum(m.num_rows for m in self.metadata)
        self.non_null = _non_null(files, self.metadata)

    def arrow_schema(self) -> pa.Schema:
        return table_schema(self.metadata[0].schema.to_arrow_schema())

    def add_actions(self, configuration: Mapping[str, str | None]) -> list[AddAction]:
        """Add actions for the files with rows (Spark writes empty ones for empty partitions),
        once moved to the table's root."""
        stats_columns = _stats_columns(self.arrow_schema(), configuration)
        actions = []
        for path, meta in zip(self.files, self.metadata, strict=True):
            if not meta.num_rows:
                continue
            info = os.stat(path)
            actions.append(AddAction(
                path=Path(path).name,
                size=info.st_size, partition_values={}, modification_time=info.st_mtime_ns // 10**6,
                data_change=True, stats=json.dumps(file_stats(meta, stats_columns))))
        return actions


def table_schema(schema: pa.Schema) -> pa.Schema:
    """Staged files' schema as a table's: nullable columns, no writer metadata. (Spark marks
    computed columns NOT NULL where it can prove it; Delta columns stay nullable so a later
    batch with a null does not fail on a constraint nobody asked for.)"""
    return pa.schema([f.with_nullable(True) for f in schema]).remove_metadata()


def _stats_columns(schema: pa.Schema, configuration: Mapping[str, str | None]) -> list[str]:
    listed = configuration.get("delta.dataSkippingStatsColumns")
    if listed:
        return [c.strip() for c in listed.split(",")]
    count = int(configuration.get("delta.dataSkippingNumIndexedCols") or DEFAULT_INDEXED_COLUMNS)
    names: list[str] = schema.names
    return names if count < 0 else names[:count]


def file_stats(meta: pq.FileMetaData, columns: list[str]) -> dict[str, Any]:
    """A file's Delta statistics from its row groups' Parquet statistics."""
    arrow = meta.schema.to_arrow_schema()
    lows, highs, nulls = {}, {}, {}
    for index, name in _top_level_columns(meta, set(columns)):
        kind = arrow.field(name).type
        count: int | None = 0
        low, high, bounded = None, None, True
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            stats = group.column(index).statistics
            if stats is None or not stats.has_null_count:
                count = None
                break
            count += stats.null_count
            if stats.null_count == group.num_rows:
                continue  # all null: no bounds to widen
            if not stats.has_min_max:
                bounded = False
                continue
            low = stats.min if low is None else min(low, stats.min)
            high = stats.max if high is None else max(high, stats.max)
        if count is None:
            continue
        nulls[name] = count
        if bounded and low is not None:
            low, high = _stat_value(low, kind), _stat_value(high, kind)
            if low is not None and high is not None:
                lows[name], highs[name] = low, high
    return {"numRecords": meta.num_rows, "minValues": lows, "maxValues": highs,
            "nullCount": nulls}


def _top_level_columns(meta: pq.FileMetaData, wanted: set[str]) -> Iterator[tuple[int, str]]:
    """(column index, name) of the primitive top-level columns among `wanted`."""
    if not meta.num_row_groups:
        return
    group = meta.row_group(0)
    for index in range(group.num_columns):
        name = group.column(index).path_in_schema
        if "." not in name and name in wanted:
            yield index, name


def _stat_value(value: Any, kind: pa.DataType) -> Any:
    """A Parquet statistic as Delta writes it in JSON; None where it is left out."""
    if pa.types.is_timestamp(kind):
        text = value.replace(microsecond=value.microsecond // 1000 * 1000).isoformat(
            timespec="milliseconds")
        return text.replace("+00:00", "Z") if kind.tz else text.replace("T", " ")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):  # as a JSON number, where a double keeps it exact
        return float(value) if kind.precision <= 15 else None
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, str):
        return value if len(value) <= LONGEST_STRING_STAT else None
    if isinstance(value, (bool, int)):
        return value
    return None  # binary and others: no bounds


def _non_null(files: list[str], metadata: list[pq.FileMetaData]) -> dict[str, int]:
    """Non-null values per top-level column, from the row groups' statistics, reading the column
    itself where a footer has none (Parquet writers drop statistics for long values)."""
    counts: dict[str, int] = {}
    for path, meta in zip(files, metadata, strict=True):
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for c in range(group.num_columns):
                column = group.column(c)
                name = column.path_in_schema
                if "." in name:
                    continue  # nested fields are not counted
                stats = column.statistics
                if stats is not None and stats.has_null_count:
                    nulls = stats.null_count
                else:
                    nulls = pq.ParquetFile(path).read_row_group(g, columns=[name]).column(
                        0).null_count
                counts[name] = counts.get(name, 0) + group.num_rows - nulls
    return counts


def staging_folder(warehouse: str) -> Path:
    """Where Spark stages a write's Parquet files: beside the tables in a local warehouse (a
    rename then moves them in); for one on object storage, a folder on this machine named
    after it (the files are uploaded into the table when it commits)."""
    if not is_remote(warehouse):
        return Path(warehouse) / "_staging"
    digest = hashlib.sha256(warehouse.encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / "medallion-staging" / digest


def remove_dead_staging(staging: Path) -> None:
    """Remove staging folders that no running process owns: a build killed mid-write leaves
    its staged Parquet behind (folders are named <pid>-<uuid>)."""
    if not staging.is_dir():
        return
    for folder in staging.iterdir():
        pid = folder.name.split("-", 1)[0]
        if pid.isdigit() and running(int(pid)):
            continue
        shutil.rmtree(folder, ignore_errors=True)


def adoptable(dt: DeltaTable | None, staged: StagedFiles, mode: str,
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
