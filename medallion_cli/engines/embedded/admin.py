"""The embedded engine's table administration, by delta-rs from the Delta log alone (no JVM):
compaction and Z-order, vacuum, restore, history and time travel, counts and columns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from ...core.errors import CapabilityError, MedallionError
from ...storage.object_store import arrow_filesystem
from ..base import FileLayout
from ..deltars import (
    changed_in_place,
    columns_without_nulls,
    file_layout,
    open_table,
    rows_in_stats,
    table_columns,
    writable,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame

    from ..sql import ColumnChanges

CANNOT_EVOLVE = ("the embedded engine cannot: delta-rs, which keeps its Delta log, writes no "
                 "table with column mapping or type widening")
CANNOT_CLUSTER = ("the embedded engine cannot cluster tables: delta-rs, which keeps its Delta "
                  "log, cannot write a table with liquid clustering")


class EmbeddedAdmin:
    """Table administration (TableAdmin) on the embedded engine: delta-rs alone, no JVM."""

    # the engine's (engine.py, reads.py)
    _open: Callable[[str], DeltaTable]
    _read_files: Callable[[DeltaTable, str, list[str]], DataFrame]
    table_version: Callable[[str], int]
    table_exists: Callable[[str], bool]

    def cluster(self, path: str, columns: tuple[str, ...]) -> bool:
        raise MedallionError(CANNOT_CLUSTER, path=path)

    def optimize(self, path: str, zorder_by: tuple[str, ...] = (),
                 cluster_by: tuple[str, ...] = ()) -> dict[str, int]:
        """Compact small files into larger ones (no data change); returns files removed/added."""
        if cluster_by:
            self.cluster(path, cluster_by)
        dt = writable(self._open(path), path)
        metrics = dt.optimize.z_order(list(zorder_by)) if zorder_by else dt.optimize.compact()
        return {"files_removed": metrics["numFilesRemoved"], "files_added": metrics["numFilesAdded"]}

    def vacuum(self, path: str, retain_hours: float, enforce_retention: bool = True) -> list[str]:
        """Delete files no version within the retention needs; returns the files deleted.
        delta-rs names every expired file its log removed, those an earlier vacuum deleted
        too: only the ones still there are counted."""
        dt = self._open(path)
        expired = dt.vacuum(int(retain_hours), dry_run=True,
                            enforce_retention_duration=enforce_retention)
        filesystem, root = arrow_filesystem(path)
        found = filesystem.get_file_info([
            arrow_filesystem(f)[1] if "://" in f else f if f.startswith("/") else f"{root}/{f}"
            for f in expired])
        there = [f for f, info in zip(expired, found) if info.type != pafs.FileType.NotFound]
        dt.vacuum(int(retain_hours), dry_run=False, enforce_retention_duration=enforce_retention)
        return there

    def file_count(self, path: str) -> int:
        return len(self._open(path).file_uris())

    def file_layout(self, path: str, small_below: int) -> FileLayout:
        return file_layout(self._open(path), small_below)

    def row_count(self, path: str) -> int | None:
        return rows_in_stats(self._open(path))

    def columns_without_nulls(self, path: str, version: int) -> frozenset[str]:
        return columns_without_nulls(open_table(path, version))

    def history(self, path: str, limit: int | None = None) -> list[dict[str, Any]]:
        return self._open(path).history(limit)

    def restore(self, path: str, version: int) -> int:
        """Make `version`'s rows the table's current state, as a new commit; returns it."""
        dt = self._open(path)
        dt.restore(version)
        return self.table_version(path)

    def snapshot(self, path: str, as_of: int | str | None = None,
                 limit: int | None = None) -> pa.Table:
        """The table's rows (as a pyarrow Table) now, at a version, or at a timestamp."""
        dt = self._open(path)
        if as_of is not None:
            dt.load_as_version(as_of)
        if changed_in_place(dt):  # delta-rs 1.6 would misread or refuse it: Spark reads it
            rows = self._read_files(dt, path, dt.file_uris())
            return (rows.limit(limit) if limit is not None else rows).toArrow()
        dataset = dt.to_pyarrow_dataset()
        return dataset.head(limit) if limit is not None else dataset.to_table()

    def table_columns(self, path: str) -> dict[str, str] | None:
        """Column name -> its type as Spark names it, from the Delta log (no JVM)."""
        if not self.table_exists(path):
            return None
        return table_columns(self._open(path))

    def evolve_columns(self, path: str, changes: ColumnChanges) -> None:
        """Not on this engine (capabilities.evolves_in_place)."""
        raise CapabilityError(f"changing columns in place ({changes.said()}): {CANNOT_EVOLVE}",
                              path=path)
