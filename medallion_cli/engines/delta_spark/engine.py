"""The native engine: Delta Lake for Spark (delta-spark) with its JARs on the classpath.

This is how a project runs on a cluster. The JARs come from the folder named in the profile
(`delta_jars`), else from the folder `medallion jars` fills with Maven (see jars.py), else from
the cluster itself (Databricks and most managed Sparks ship Delta). Writes are Delta writes with
txnAppId/txnVersion, so Delta itself skips a replayed streaming batch; MERGE is Spark SQL (see
native_sql.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import deltalake
from deltalake.exceptions import DeltaError

from ...spark import jars
from ...core.errors import MedallionError
from ...core.locations import is_remote, join, local_table_exists
from ...core.project import Target
from .. import (
    MergeSpec,
    WriteResult,
    commit_metadata,
    duplicate_keys,
    last_commit_value,
    write_local_text,
)
from ..embedded.engine import append_rows
from ..sql import merge_sql, quote, snapshot_sql, table
from ...spark.session import OnDemandSpark
from ...spark.start import (
    is_local_master,
    read_text,
    remove_folder,
    shuffle_partitions,
    spark_conf,
    start_spark,
    write_text,
)

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
DELTA_CLASS = "io.delta.tables.DeltaTable"


def _fix(target: Target) -> str:
    return (f"run `medallion jars` (it fetches them with Maven into {jars.folder('delta')}, "
            f"used when the target has no delta_jars), or name a folder of delta-spark and "
            f"delta-storage JARs built for this Spark as delta_jars in target '{target.name}', or "
            "use a cluster that ships Delta (e.g. Databricks)")


def delta_jar_files(target: Target) -> list[Path]:
    """The Delta JARs to give Spark: the target's delta_jars folder, else the one `medallion
    jars` fills. Checked against the installed Spark before any JVM starts."""
    if target.delta_jars:
        found = jars.jar_files(target.delta_jars)
        if not found:
            raise MedallionError(
                f"target '{target.name}': delta_jars names {target.delta_jars}, which has no "
                ".jar files", path=target.profiles_file, hint=_fix(target))
    else:
        folder = jars.present("delta")
        found = jars.jar_files(folder) if folder else []
    jars.check_spark_jars(found, target.profiles_file or "profiles.yml", _fix(target),
                          f"target '{target.name}': ")
    return found


def spark_settings(target: Target, long_queries: bool = False) -> dict[str, str]:
    """Spark conf for Delta: the extension and catalog, and the JARs when they are here.
    long_queries: as for spark_conf."""
    conf = dict(DELTA_CONF)
    # Delta rebuilds a table's state from its log with a shuffle of 50 partitions by default,
    # which costs seconds per small table. On a cluster, as many as the target's shuffles. A
    # local session's logs are a laptop's, and each task there generates and compiles its
    # code again on the same few cores: two fifths of the JVM's samples of an increment; with
    # one task it took 15-20% fewer CPU-seconds (README). The profile's conf still wins.
    # (Listing, VACUUM's too: spark.py's spark_conf.)
    replay_tasks = "1" if is_local_master(target.spark_master) else shuffle_partitions(target)
    conf["spark.databricks.delta.snapshotPartitions"] = target.spark_conf.get(
        "spark.databricks.delta.snapshotPartitions", replay_tasks)
    conf.update(metastore_settings(target, long_queries))
    found = delta_jar_files(target)
    own = target.spark_conf.get("spark.jars")
    if found:
        conf["spark.jars"] = ",".join([str(p) for p in found] + ([own] if own else []))
    elif is_local_master(target.spark_master) and not (
            own or target.spark_conf.get("spark.jars.packages")):
        # Nothing can bring Delta to a local Spark: say so before starting a JVM.
        raise MedallionError(f"target '{target.name}' uses the delta-spark engine, but the Delta "
                             "Lake JARs are not here", path=target.profiles_file,
                             hint=_fix(target))
    return conf


def metastore_settings(target: Target, long_queries: bool = False) -> dict[str, str]:
    """Spark conf for the target's metastore: Hive's catalog, and for `local` its Derby
    database (and Derby's own log) in the warehouse, so tables stay registered between runs
    on a laptop. `session` takes whatever catalog the cluster's Spark is set up with."""
    if target.metastore is None:
        return {}
    conf = {"spark.sql.catalogImplementation": "hive"}
    if target.metastore == "local":
        home = join(target.warehouse, "_medallion")
        conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
            f"jdbc:derby:;databaseName={join(home, 'metastore')};create=true")
        java_options = spark_conf(target, long_queries)["spark.driver.extraJavaOptions"]
        conf["spark.driver.extraJavaOptions"] = f"{java_options} -Dderby.system.home={home}"
    # The target's own settings win, but its Java options are in java_options already.
    return {**conf, **{k: v for k, v in target.spark_conf.items()
                       if k in conf and k != "spark.driver.extraJavaOptions"}}


def check_delta_loaded(spark, target: Target) -> None:
    """Delta's classes load and were built for this Spark, wherever they came from."""
    jvm = spark._jvm
    try:
        # The context class loader is the one that sees spark.jars.
        cls = jvm.java.lang.Thread.currentThread().getContextClassLoader().loadClass(DELTA_CLASS)
    except Exception as exc:
        text = str(exc)
        missing = "ClassNotFoundException: " + DELTA_CLASS in text
        raise MedallionError(
            f"target '{target.name}': the Delta Lake JARs are not on Spark's classpath"
            if missing else f"target '{target.name}': the Delta Lake JARs do not fit this Spark "
            f"({spark.version}): {jars_error_line(text)}", path=target.profiles_file,
            hint=_fix(target)) from exc
    source = cls.getProtectionDomain().getCodeSource()
    if source is not None:
        jar = Path(str(source.getLocation().getPath()))
        jars.check_spark_jars([jar], target.profiles_file or "profiles.yml", _fix(target),
                              f"target '{target.name}': ")


def jars_error_line(text: str) -> str:
    """The line of a Java error that names what failed to link."""
    for line in text.splitlines():
        if "NoClassDefFoundError" in line or "ClassNotFoundException" in line:
            return line.split(":", 1)[-1].strip()
    return text.strip().splitlines()[0] if text.strip() else "unknown error"


class NativeEngine(OnDemandSpark):
    name = "delta-spark"

    def __init__(self, target: Target, spark_log: Path | None = None):
        self.target = target
        self.spark_log = spark_log

    def _start_session(self):
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

    follows_commit_log = False  # Delta's own streaming source reads the tables
    skips_empty_writes = False  # an empty append or MERGE still commits

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
        commit = self.read_text(join(str(path), "_delta_log", f"{version:020d}.json"))
        actions = [json.loads(line) for line in commit.splitlines() if line.strip()]
        stats = [json.loads(a["add"].get("stats") or "{}") for a in actions if "add" in a]
        counts: dict[str, int] = {}
        for stat in stats:
            for column, nulls in (stat.get("nullCount") or {}).items():
                if isinstance(nulls, int):  # nested columns have a mapping here: not counted
                    counts[column] = counts.get(column, 0) + stat["numRecords"] - nulls
        known = [set(stat.get("nullCount") or {}) for stat in stats]
        return {c: n for c, n in counts.items() if all(c in k for k in known)}

    clustering_problem = None

    def cluster(self, path: str, columns: tuple[str, ...]) -> bool:
        # Set after each build: Delta 4.4's DataFrame writes to a path ignore clusterBy and an
        # overwrite drops the table's clustering columns.
        current = self._table(path).detail().first()["clusteringColumns"] or []
        if sorted(current) == sorted(columns):
            return False
        self.spark.sql(f"ALTER TABLE {table(str(path))} CLUSTER BY "
                       f"({', '.join(quote(c) for c in columns)})")
        return True

    def optimize(self, path: str, zorder_by: tuple[str, ...] = (),
                 cluster_by: tuple[str, ...] = ()) -> dict:
        if cluster_by:  # OPTIMIZE of a clustered table clusters it
            self.cluster(path, cluster_by)
        builder = self._table(path).optimize()
        done = builder.executeZOrderBy(*zorder_by) if zorder_by else builder.executeCompaction()
        metrics = done.first()["metrics"]
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
        """From the version's checksum (.crc), as committed_version reads it: no Spark job.
        Delta 4.4's Snapshot.numOfFiles replays the log in one even when the checksum has the
        count. A version without a checksum: Delta's replay. (Builds ask before a write,
        which replays the log anyway: none measured faster for it.)"""
        snapshot = self._snapshot(path)
        checksum = snapshot.checksumOpt()
        return int(checksum.get().numFiles() if checksum.isDefined() else snapshot.numOfFiles())

    def row_count(self, path: str) -> int | None:
        return self.read_table(path).count()  # Delta answers a bare count from its log

    def history(self, path: str, limit: int | None = None) -> list[dict]:
        """Newest first, as DESCRIBE HISTORY has them (timestamps in ms; absent fields left
        out). A local table's from delta-rs, else Delta's own, serialized by Delta's JSON
        mapper in one call."""
        history = self._from_local_log(path, lambda table: table.history(limit))
        return self.delta_history(path, limit) if history is None else history

    def delta_history(self, path: str, limit: int | None = None) -> list[dict]:
        jvm = self.spark._jvm
        none = jvm.scala.Option.empty()
        commits = self._snapshot(path).deltaLog().history().getHistory(
            none if limit is None else jvm.scala.Option.apply(limit), none)
        return json.loads(self._json(commits))

    def restore(self, path: str, version: int) -> int:
        self._table(path).restoreToVersion(version)
        return self.table_version(path)

    def snapshot(self, path: str, as_of: int | str | None = None, limit: int | None = None):
        df = self.spark.sql(snapshot_sql(str(path), as_of))
        return (df.limit(limit) if limit is not None else df).toArrow()

    def table_columns(self, path: str) -> dict[str, str] | None:
        if not self.table_exists(path):
            return None
        return {f.name: f.dataType.simpleString() for f in self.read_table(path).schema.fields}

    # Checkpoints live beside the tables, on whatever storage the warehouse is.

    def read_text(self, location: str) -> str:
        return read_text(self.spark, location) if is_remote(location) else Path(
            location).read_text()

    def write_text(self, location: str, text: str) -> None:
        # Object stores show an object whole when its writer closes it; a local file is
        # written beside and renamed over.
        if is_remote(location):
            write_text(self.spark, location, text)
        else:
            write_local_text(location, text)

    def remove_folder(self, location: str) -> None:
        remove_folder(self.spark, location)
