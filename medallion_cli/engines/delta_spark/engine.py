"""The delta-spark engine: Delta Lake for Spark with its JARs on the classpath.

How a project runs on a cluster. The JARs come from the profile's `delta_jars` folder, else
the one `medallion jars` fills with Maven (spark/jars.py), else the cluster (Databricks and most
managed Sparks ship Delta). Writes are Delta writes with txnAppId/txnVersion, so Delta itself
skips a replayed streaming batch; MERGE is Spark SQL (engines/sql.py). A target whose spark:
remote names a Spark Connect server runs all of this there, with no JVM in this process:
Delta's work as SQL and DataFrame writes, and the log read where log.py says.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.errors import CapabilityError
from ...core.locations import is_remote, join, local_table_exists, local_table_version
from ...core.project import Target
from ...spark.conf import LongQueries
from ...spark.connect import check_server, client_session, configure
from ...spark.session import OnDemandSpark
from ...spark.start import start_spark
from ...storage.files import read_text
from ..base import (
    Capabilities,
    WriteResult,
    commit_metadata,
    duplicate_keys,
    last_commit_value,
)
from ..deltars import append_rows
from ..sql import MergeSpec, RowRange, merge_sql, table
from .admin import DeltaSparkAdmin
from .log import client_log
from .settings import TAKE_SCHEMA_CHANGES, check_delta_loaded, spark_settings

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, DataFrameWriter, SparkSession

    from ..base import Json, WriteMode


# Streams here are Delta's own (capabilities.delta_streaming_source), not a table's commit log
_DELTA_STREAMS = ("the delta-spark engine streams tables with Delta's own source (read_stream), "
                  "not by following their commit log")


class DeltaSparkEngine(DeltaSparkAdmin, OnDemandSpark):
    name = "delta-spark"
    capabilities = Capabilities(
        delta_streaming_source=True,  # Delta's own streaming source reads the tables
        skips_empty_writes=False,  # an empty append or MERGE still commits
        clustering=None, delta_sql=True, catalog="spark_sql", object_stores=("*",),
        jar_bundles=("delta",), long_queries=LongQueries(256 * 2**20, ()),
        merges_wide_cheaply=False, evolves_in_place=None, spark_connect=None,
        stages_writes=False)  # a write (MERGE, saveAsTable) computes and commits in one command
    # As a Spark Connect server's client (spark: remote): no JVM here
    over_connect = replace(capabilities, batches_on_server=True, observes_rows=False)

    def __init__(self, target: Target, spark_log: Path | None = None):
        self.target = target
        self.spark_log = spark_log
        if target.spark_remote:
            self.capabilities = self.over_connect

    def _start_session(self, checked: bool = False) -> SparkSession:
        if self.target.spark_remote:  # no JVM here: the server runs Spark and keeps Delta
            session = client_session(self.target, quiet=self.spark_log is not None)
            if not checked:
                check_server(session, self.target)
            configure(session, self.target)
            return session
        spark = start_spark(self.target, spark_settings(self.target, self.long_work()),
                            self.spark_log, self.long_work())
        check_delta_loaded(spark, self.target)
        # Imported for its effect: Delta's errors (a concurrent commit...) then reach Python
        # with their error classes, which core/error_text.py reads, whatever Delta API runs first.
        from ...spark.pyspark_api import delta_exceptions  # noqa: F401

        return spark

    def table_exists(self, path: str) -> bool:
        """A local table's from its log's files, as on the embedded engine (Delta's own answer
        starts Spark, and rendering asks, for is_incremental(), before a build starts it)."""
        if not is_remote(str(path)):
            return local_table_exists(path)
        if not self.target.spark_remote:  # a store's own error (no bucket, throttled) raises
            from ...spark.pyspark_api import DeltaTable

            return DeltaTable.isDeltaTable(self.spark, str(path))
        try:
            self.table_version(path)
        except Exception as exc:  # Delta's: no table there
            if "DELTA_MISSING_DELTA_TABLE" in str(exc) or "is not a Delta table" in str(exc):
                return False
            raise
        return True

    def read_table(self, path: str) -> DataFrame:
        return self.spark.read.format("delta").load(self._readable(path))

    def read_stream(self, path: str, changes: bool = False, from_version: int | None = None,
                    schema_log: str | None = None) -> DataFrame:
        reader = self.spark.readStream.format("delta").options(**(
            {} if schema_log is None else {"schemaTrackingLocation": schema_log,
                                           **TAKE_SCHEMA_CHANGES}))
        if changes:  # Delta's change data feed: the table as inserts, then every change
            reader = reader.option("readChangeFeed", "true")
        if from_version is not None:  # the next version, not yet committed, is "latest" to Delta
            reader = reader.option("startingVersion", from_version if from_version <=
                                   self.table_version(path) else "latest")
        return reader.load(self._readable(path))

    def commit_stream(self, path: str, from_version: int | None = None) -> DataFrame:
        raise CapabilityError(_DELTA_STREAMS, path=path)

    def read_commits(self, path: str, versions: list[int], from_snapshot: bool,
                     changes: bool = False) -> tuple[DataFrame, int]:
        raise CapabilityError(_DELTA_STREAMS, path=path)

    def read_changes(self, path: str, first: int, last: int) -> DataFrame:
        return (self.spark.read.format("delta").option("readChangeFeed", "true")
                .option("startingVersion", first).option("endingVersion", last)
                .load(self._readable(path)))

    @staticmethod
    def _readable(path: str) -> str:
        """The path, once a local table's log was read whole by delta-rs (a millisecond or
        two): a commit file cut short fails there in one line naming it and how to recover,
        where Delta's error names neither table nor file. (A table delta-rs cannot read for
        another reason, e.g. a reader feature it lacks, is left to Delta.)"""
        if local_table_exists(path):
            client_log(path, lambda table: None, anywhere=False)
        return str(path)

    def table_version(self, path: str) -> int:
        version = local_table_version(path)
        if version is not None:
            return version
        return self._from_log(path, lambda table: table.version(), lambda log: log.version(path))

    def last_commit_value(self, path: str, key: str) -> str | None:
        return last_commit_value(self.history(path, 10), key)

    def committed_version(self, path: str, app_id: str) -> int | None:
        """The last version (batch id) `app_id` committed to the table, from the Delta log's
        app transactions (Delta for Spark has no Python API for them)."""
        if not self.table_exists(path):
            return None
        return self._from_log(path, lambda table: table.transaction_version(app_id),
                              lambda log: log.app_version(path, app_id))

    def _replayed(self, path: str, txn: tuple[str, int] | None) -> bool:
        """Whether this app transaction's version is already in the table. Delta itself would
        skip the write too; asking first keeps the reported rows and version those of the
        table as it is, not of its last commit."""
        if txn is None:
            return False
        done = self.committed_version(path, txn[0])
        return done is not None and done >= txn[1]

    def _unchanged(self, path: str) -> WriteResult:
        return WriteResult(version=self.table_version(path), rows=0, files_added=0)

    def _writer(self, df: DataFrame, metadata: Json | None, txn: tuple[str, int] | None
                ) -> DataFrameWriter:
        writer = df.write.format("delta")
        if metadata:
            writer = writer.option("userMetadata", commit_metadata(metadata))
        if txn:
            writer = writer.option("txnAppId", txn[0]).option("txnVersion", str(txn[1]))
        return writer

    def append_rows(self, rows: pa.Table, path: str, txn: tuple[str, int]) -> None:
        """A local table's by delta-rs: 0.02 s, against 0.8-1.5 s of the build's cores for a
        Spark job (the event log appends every second or two). Object storage takes Delta's
        own writer, with the cluster's credentials."""
        self.fence()
        if is_remote(str(path)):
            self.delta_append_rows(rows, path, txn)
        else:
            append_rows(rows, path, txn)

    def delta_append_rows(self, rows: pa.Table, path: str, txn: tuple[str, int]) -> None:
        """One append job and nothing around it (no history read for a WriteResult): Delta
        itself skips a write whose app transaction is in the table (idempotent writes)."""
        (self.spark.createDataFrame(rows).write.format("delta").mode("append")
         .option("mergeSchema", "true").option("txnAppId", txn[0])
         .option("txnVersion", txn[1]).save(str(path)))

    def write(self, df: DataFrame, path: str, mode: WriteMode, partition_by: tuple[str, ...] = (),
              metadata: Json | None = None, merge_schema: bool = False,
              txn: tuple[str, int] | None = None,
              properties: dict[str, str] | None = None,
              replace_where: RowRange | None = None) -> WriteResult:
        if self._replayed(self._readable(path), txn):
            return self._unchanged(path)
        writer = self._writer(df, metadata, txn).mode(mode)
        existed = self.table_exists(path)
        if existed:
            self._ensure_properties(path, properties)
        else:  # delta.* writer options become the new table's properties, in its first commit
            writer = writer.options(**(properties or {}))
        options = {"replaceWhere": replace_where.sql()} if replace_where else (
            {"overwriteSchema": "true"} if mode == "overwrite" else {})
        writer = writer.options(**options, **({"mergeSchema": "true"} if merge_schema else {}))
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        self.about_to_commit()  # (computed and committed in one command: before both)
        writer.save(str(path))
        result = self._result(path, counted=True)
        # Writer options carry only delta.* keys: a team's own keys on a new table take an
        # ALTER TABLE (asked only when there are some: reading the table's detail is a job).
        own = {k: v for k, v in (properties or {}).items() if not k.startswith("delta.")}
        if not existed and own:
            self._ensure_properties(path, own)
        return result

    def merge(self, df: DataFrame, path: str, spec: MergeSpec, metadata: Json | None = None,
              merge_schema: bool = False, txn: tuple[str, int] | None = None,
              properties: dict[str, str] | None = None) -> WriteResult:
        if self._replayed(self._readable(path), txn):
            return self._unchanged(path)
        self._ensure_properties(path, properties)
        view = "_medallion_merge_source"
        conf = {}
        if metadata:
            conf["spark.databricks.delta.commitInfo.userMetadata"] = commit_metadata(metadata)
        if txn:  # idempotent DML: Delta skips the MERGE if this app id already has this version
            conf["spark.databricks.delta.write.txnAppId"] = txn[0]
            conf["spark.databricks.delta.write.txnVersion"] = str(txn[1])
        # The MERGE runs in the session of the rows it merges: the node's own, or a
        # micro-batch's. Its view and settings are that session's alone (nodes built side by
        # side have sessions of their own), so no MERGE commits with another's app transaction.
        session = df.sparkSession
        df.createOrReplaceTempView(view)
        for key, value in conf.items():
            session.conf.set(key, value)
        try:
            self.about_to_commit()
            session.sql(merge_sql(str(path), view, df.columns, spec, evolve=merge_schema))
        except Exception as exc:
            if "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE" in str(exc):
                raise duplicate_keys(spec) from exc
            raise
        finally:
            for key in conf:
                session.conf.unset(key)
            session.catalog.dropTempView(view)
        return self._result(path)

    def _ensure_properties(self, path: str, properties: dict[str, str] | None) -> None:
        """Set the properties the table lacks or has otherwise (a commit of its own)."""
        if not properties:
            return
        current = self._from_log(path, lambda table: table.metadata().configuration,
                                 lambda log: log.properties(path))
        changed = {k: v for k, v in properties.items() if current.get(k) != v}
        if changed:
            pairs = ", ".join(f"'{k}' = '{v}'" for k, v in changed.items())
            self.about_to_commit()
            self.spark.sql(f"ALTER TABLE {table(str(path))} SET TBLPROPERTIES ({pairs})")

    def property_problem(self, key: str, value: str) -> str | None:
        return None  # Delta checks its own properties when it sets them

    def _result(self, path: str, counted: bool = False) -> WriteResult:
        """What the last commit wrote. counted: the commit added only the written rows (an
        append or overwrite), so its files' statistics count their non-null values."""
        last = self.history(path, 1)[0]
        metrics = last.get("operationMetrics") or {}
        merged = ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")
        # A MERGE's numOutputRows counts the unchanged rows it copied too: count what changed,
        # as the embedded engine does
        rows = (sum(int(metrics.get(k, 0)) for k in merged) if merged[0] in metrics
                else metrics.get("numOutputRows"))
        return WriteResult(version=last["version"], rows=int(rows or 0),
                           files_added=int(metrics.get("numFiles", metrics.get(
                               "numTargetFilesAdded", 0)) or 0),
                           non_null=self._non_null(path, last["version"]) if counted else {})

    def _non_null(self, path: str, version: int) -> dict[str, int]:
        """Non-null values per column in the files a commit added, from the statistics Delta
        keeps for them (its first 32 columns by default); columns without them are left out."""
        commit = read_text(self, join(str(path), "_delta_log", f"{version:020d}.json"))
        actions = [json.loads(line) for line in commit.splitlines() if line.strip()]
        stats = [json.loads(a["add"].get("stats") or "{}") for a in actions if "add" in a]
        counts: dict[str, int] = {}
        for stat in stats:
            for column, nulls in (stat.get("nullCount") or {}).items():
                if isinstance(nulls, int):  # nested columns have a mapping here: not counted
                    counts[column] = counts.get(column, 0) + stat["numRecords"] - nulls
        known = [set(stat.get("nullCount") or {}) for stat in stats]
        return {c: n for c, n in counts.items() if all(c in k for k in known)}
