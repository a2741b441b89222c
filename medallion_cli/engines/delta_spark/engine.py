"""The delta-spark engine: Delta Lake for Spark with its JARs on the classpath.

This is how a project runs on a cluster. The JARs come from the folder named in the profile
(`delta_jars`), else from the folder `medallion jars` fills with Maven (spark/jars.py), else from
the cluster itself (Databricks and most managed Sparks ship Delta). Writes are Delta writes with
txnAppId/txnVersion, so Delta itself skips a replayed streaming batch; MERGE is Spark SQL
(engines/sql.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import deltalake
from deltalake.exceptions import DeltaError

from ...core.errors import MedallionError
from ...core.locations import is_remote, join, local_table_exists
from ...core.project import Target
from ...spark.conf import LONG_QUERIES
from ...spark.files import read_text
from ...spark.session import OnDemandSpark
from ...spark.start import start_spark
from ..base import (
    Capabilities,
    MergeSpec,
    WriteResult,
    commit_metadata,
    duplicate_keys,
    last_commit_value,
)
from ..deltars import append_rows
from ..sql import merge_sql, table
from .admin import DeltaSparkAdmin
from .settings import check_delta_loaded, refuse_connect, spark_settings


class DeltaSparkEngine(DeltaSparkAdmin, OnDemandSpark):
    name = "delta-spark"
    capabilities = Capabilities(
        delta_streaming_source=True,  # Delta's own streaming source reads the tables
        skips_empty_writes=False,  # an empty append or MERGE still commits
        clustering=None, delta_sql=True, catalog_tables=True, object_stores=("*",),
        jar_bundles=("delta",), long_queries=LONG_QUERIES["delta-spark"])

    def __init__(self, target: Target, spark_log: Path | None = None):
        self.target = target
        self.spark_log = spark_log

    def _start_session(self):
        if self.target.spark_remote:
            refuse_connect(self.target, quiet=self.spark_log is not None)
        spark = start_spark(self.target, spark_settings(self.target, self.long_queries),
                            self.spark_log, self.long_queries)
        check_delta_loaded(spark, self.target)
        # Imported for its effect: Delta's errors (a concurrent commit...) then reach Python
        # with their error classes, which failures.py reads, whatever Delta API runs first.
        from ...spark.pyspark_api import delta_exceptions  # noqa: F401

        return spark

    def _table(self, path: str):
        from ...spark.pyspark_api import DeltaTable

        return DeltaTable.forPath(self.spark, str(path))

    def table_exists(self, path: str) -> bool:
        """A local table's from its log's files, as on the embedded engine (Delta's own answer
        starts Spark, and rendering asks, for is_incremental(), before a build starts it)."""
        if not is_remote(str(path)):
            return local_table_exists(path)
        from ...spark.pyspark_api import DeltaTable

        return DeltaTable.isDeltaTable(self.spark, str(path))

    def read_table(self, path: str):
        return self.spark.read.format("delta").load(str(path))

    def read_stream(self, path: str, changes: bool = False):
        reader = self.spark.readStream.format("delta")
        if changes:  # Delta's change data feed: the table as inserts, then every change
            reader = reader.option("readChangeFeed", "true")
        return reader.load(str(path))

    def read_changes(self, path: str, first: int, last: int):
        return (self.spark.read.format("delta").option("readChangeFeed", "true")
                .option("startingVersion", first).option("endingVersion", last).load(str(path)))

    def _delta_log(self, path: str):
        """Delta's DeltaLog of the table (cached by Delta per path). Builds ask for versions and
        commit metadata many times: its snapshot's version, metadata and checksum cost no Spark
        job, and its history no DataFrame (DeltaTable.history and detail plan a query each
        time: 0.2-3 s apiece on a busy machine)."""
        return self.spark._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
            self.spark._jsparkSession, str(path))

    def _snapshot(self, path: str):
        """The table's current snapshot; raises, as delta-rs and DeltaTable.forPath do, where
        there is no table (Delta gives an empty snapshot, version -1)."""
        none = self.spark._jvm.scala.Option.empty()
        snapshot = self._delta_log(path).update(False, none, none)
        if snapshot.version() < 0:
            raise MedallionError(f"{path} is not a Delta table")
        return snapshot

    def _from_local_log(self, path: str, read: Callable):
        """read(the table opened by delta-rs) for a local table: its log read in a millisecond,
        where Delta's history manager takes 0.1-0.2 s warm and 2 s cold, and starts Spark
        (builds ask once per model and per write, for fingerprints, also of up-to-date nodes).
        None where delta-rs cannot answer (object storage, no table, a table it cannot read):
        then Delta's own answer is asked for."""
        if is_remote(str(path)):
            return None
        try:
            return read(deltalake.DeltaTable(str(path), without_files=True))
        except DeltaError:
            return None

    def table_version(self, path: str) -> int:
        version = self._from_local_log(path, lambda table: table.version())
        return int(self._snapshot(path).version()) if version is None else version

    def last_commit_value(self, path: str, key: str) -> str | None:
        return last_commit_value(self.history(path, 10), key)

    def committed_version(self, path: str, app_id: str) -> int | None:
        """The last version (batch id) `app_id` committed to the table, from the Delta log's
        app transactions (delta-spark keeps them in its DeltaLog; Python has no API for them)."""
        if not self.table_exists(path):
            return None
        snapshot = self._snapshot(path)
        # Delta lists a version's app transactions in its checksum file (.crc): read there,
        # they cost no Spark job (Snapshot.transactions and setTransactionsIfKnown run 1-3).
        # A version without one (a delta-rs commit, a writer killed before writing it) has
        # them found by replaying the log.
        checksum = snapshot.checksumOpt()
        known = checksum.get().setTransactions() if checksum.isDefined() else None
        if known is not None and known.isDefined():
            versions = [t["version"] for t in json.loads(self._json(known.get()))
                        if t["appId"] == app_id]
            return max(versions, default=None)
        version = snapshot.transactions().get(app_id)
        return None if version.isEmpty() else int(version.get())

    def _json(self, value) -> str:
        """A Delta object (actions, history) as JSON, by Delta's own mapper: one call."""
        return self.spark._jvm.org.apache.spark.sql.delta.util.JsonUtils.mapper() \
            .writeValueAsString(value)

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

    def _writer(self, df, metadata, txn):
        writer = df.write.format("delta")
        if metadata:
            writer = writer.option("userMetadata", commit_metadata(metadata))
        if txn:
            writer = writer.option("txnAppId", txn[0]).option("txnVersion", str(txn[1]))
        return writer

    def append_rows(self, rows, path: str, txn: tuple[str, int]) -> None:
        """A local table's by delta-rs: 0.02 s, against 0.8-1.5 s of the build's cores for a
        Spark job (the event log appends every second or two). Object storage takes Delta's
        own writer, with the cluster's credentials."""
        if is_remote(str(path)):
            self.delta_append_rows(rows, path, txn)
        else:
            append_rows(rows, path, txn)

    def delta_append_rows(self, rows, path: str, txn: tuple[str, int]) -> None:
        """One append job and nothing around it (no history read for a WriteResult): Delta
        itself skips a write whose app transaction is in the table (idempotent writes)."""
        (self.spark.createDataFrame(rows).write.format("delta").mode("append")
         .option("mergeSchema", "true").option("txnAppId", txn[0])
         .option("txnVersion", txn[1]).save(str(path)))

    def write(self, df, path: str, mode: str, partition_by: tuple[str, ...] = (),
              metadata: dict | None = None, merge_schema: bool = False,
              txn: tuple[str, int] | None = None,
              properties: dict[str, str] | None = None) -> WriteResult:
        if self._replayed(path, txn):
            return self._unchanged(path)
        writer = self._writer(df, metadata, txn).mode(mode)
        existed = self.table_exists(path)
        if existed:
            self._ensure_properties(path, properties)
        else:  # delta.* writer options become the new table's properties, in its first commit
            writer = writer.options(**(properties or {}))
        if mode == "overwrite":
            writer = writer.option("overwriteSchema", "true")
        if merge_schema:
            writer = writer.option("mergeSchema", "true")
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        writer.save(str(path))
        result = self._result(path, counted=True)
        # Writer options carry only delta.* keys: a team's own keys on a new table take an
        # ALTER TABLE (asked only when there are some: reading the table's detail is a job).
        own = {k: v for k, v in (properties or {}).items() if not k.startswith("delta.")}
        if not existed and own:
            self._ensure_properties(path, own)
        return result

    def merge(self, df, path: str, spec: MergeSpec, metadata: dict | None = None,
              merge_schema: bool = False, txn: tuple[str, int] | None = None,
              properties: dict[str, str] | None = None) -> WriteResult:
        if self._replayed(path, txn):
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
        jvm = self.spark._jvm
        current = dict(jvm.scala.jdk.javaapi.CollectionConverters.asJava(
            self._snapshot(path).metadata().configuration()))
        changed = {k: v for k, v in properties.items() if current.get(k) != v}
        if changed:
            pairs = ", ".join(f"'{k}' = '{v}'" for k, v in changed.items())
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

    # Checkpoints live beside the tables, on whatever storage the warehouse is.


