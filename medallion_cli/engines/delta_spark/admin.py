"""The delta-spark engine's table administration: liquid clustering, compaction and Z-order,
vacuum, restore and columns changed in place through Delta's SQL (which Spark Connect carries
too); history, counts and columns from the table's log, where log.py says.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..base import FileLayout
from ..deltars import columns_without_nulls, file_layout, rows_in_stats
from ..sql import ColumnChanges, evolve_sql, quote, snapshot_sql, table
from .log import Answer, JvmLog, SqlLog, client_log

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, Row, SparkSession

    from ...core.project import Target
    from ..base import Json


class DeltaSparkAdmin:
    """Table administration (TableAdmin) on Delta Lake for Spark, and where the engine reads
    a table's log."""

    # the engine's (engine.py)
    spark: SparkSession
    target: Target
    table_exists: Callable[[str], bool]
    table_version: Callable[[str], int]
    read_table: Callable[[str], DataFrame]

    def _log(self) -> JvmLog | SqlLog:
        """Delta's log where Spark runs: in this process's JVM, or over Spark Connect by SQL
        (log.py says which answers what, and why)."""
        return (SqlLog if self.target.spark_remote else JvmLog)(self.spark)

    def _answer(self, sql: str) -> Row:
        """The one row a Delta command answers (DESCRIBE DETAIL, OPTIMIZE)."""
        row = self.spark.sql(sql).first()
        assert row is not None, sql
        return row

    def _from_log(self, path: str, by_delta_rs: Callable[[DeltaTable], Answer],
                  by_log: Callable[[JvmLog | SqlLog], Answer]) -> Answer:
        """by_delta_rs(the table opened by delta-rs here) where it answers (a local table, and
        over Spark Connect any this machine reaches), else by_log(the log where Spark runs)."""
        answer = client_log(path, lambda table: [by_delta_rs(table)],
                            anywhere=bool(self.target.spark_remote))
        return by_log(self._log()) if answer is None else answer[0]


    def cluster(self, path: str, columns: tuple[str, ...]) -> bool:
        # Set after each build: Delta 4.4's DataFrame writes to a path ignore clusterBy and an
        # overwrite drops the table's clustering columns.
        current = self._answer(f"DESCRIBE DETAIL {table(str(path))}")["clusteringColumns"] or []
        if sorted(current) == sorted(columns):
            return False
        self.spark.sql(f"ALTER TABLE {table(str(path))} CLUSTER BY "
                       f"({', '.join(quote(c) for c in columns)})")
        return True

    def optimize(self, path: str, zorder_by: tuple[str, ...] = (),
                 cluster_by: tuple[str, ...] = ()) -> dict[str, int]:
        if cluster_by:  # OPTIMIZE of a clustered table clusters it
            self.cluster(path, cluster_by)
        zorder = f" ZORDER BY ({', '.join(quote(c) for c in zorder_by)})" if zorder_by else ""
        metrics = self._answer(f"OPTIMIZE {table(str(path))}{zorder}")["metrics"]
        return {"files_removed": metrics["numFilesRemoved"], "files_added": metrics["numFilesAdded"]}

    def vacuum(self, path: str, retain_hours: float, enforce_retention: bool = True) -> list[str]:
        """Delete files no version within the retention needs; returns them (a dry run lists
        them first: delta-spark's vacuum only counts what it deleted)."""
        self.spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled",
                            str(enforce_retention).lower())
        try:
            sql = f"VACUUM {table(str(path))} RETAIN {retain_hours} HOURS"
            doomed = [row[0] for row in self.spark.sql(sql + " DRY RUN").collect()]
            self.spark.sql(sql)
        finally:
            self.spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
        return doomed

    def file_count(self, path: str) -> int:
        return self._from_log(path, lambda table: len(table.file_uris()),
                              lambda log: log.file_count(path))

    def file_layout(self, path: str, small_below: int) -> FileLayout:
        """Each file's size where delta-rs reads the log; elsewhere Delta's totals."""
        return self._from_log(path, lambda table: file_layout(table, small_below),
                              lambda log: FileLayout.of_totals(*log.file_totals(path),
                                                               small_below))

    def row_count(self, path: str) -> int | None:
        """From the log's statistics where delta-rs reads it (no Spark job: 0.1-0.3 s a
        table), else Delta's count, which it answers from its log."""
        counted = client_log(path, rows_in_stats, anywhere=bool(self.target.spark_remote))
        return counted if counted is not None else self.read_table(path).count()

    def columns_without_nulls(self, path: str, version: int) -> frozenset[str]:
        """From the log where delta-rs reads it; elsewhere none are known (no Spark job)."""
        def at_version(dt: DeltaTable) -> frozenset[str]:
            dt.load_as_version(version)
            return columns_without_nulls(dt)
        return client_log(path, at_version, anywhere=bool(self.target.spark_remote)) or frozenset()

    def history(self, path: str, limit: int | None = None) -> list[Json]:
        """Newest first, as DESCRIBE HISTORY has them (timestamps in ms; absent fields left
        out): delta-rs's where it answers, else Delta's own (log.py)."""
        return self._from_log(path, lambda table: table.history(limit),
                              lambda log: log.history(path, limit))

    def restore(self, path: str, version: int) -> int:
        self.spark.sql(f"RESTORE TABLE {table(str(path))} TO VERSION AS OF {int(version)}")
        return self.table_version(path)

    def snapshot(self, path: str, as_of: int | str | None = None,
                 limit: int | None = None) -> pa.Table:
        df = self.spark.sql(snapshot_sql(str(path), as_of))
        return (df.limit(limit) if limit is not None else df).toArrow()

    def table_columns(self, path: str) -> dict[str, str] | None:
        if not self.table_exists(path):
            return None
        return {f.name: f.dataType.simpleString() for f in self.read_table(path).schema.fields}

    def evolve_columns(self, path: str, changes: ColumnChanges) -> None:
        properties = {row["key"]: row["value"] for row in
                      self.spark.sql(f"SHOW TBLPROPERTIES {table(str(path))}").collect()}
        for statement in evolve_sql(str(path), changes, properties):
            self.spark.sql(statement)
