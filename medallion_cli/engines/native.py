"""The native engine: Delta Lake for Spark (delta-spark) with its JARs on the classpath.

This is how a project runs on a cluster. The JARs come from the cluster itself (Databricks and
most managed Sparks), from a folder named in the profile (`delta_jars`), or from Maven through
`spark.jars.packages` where Maven is reachable. Writes are Delta writes with txnAppId/txnVersion,
so Delta itself skips a replayed streaming batch; MERGE is Spark SQL (see native_sql.py).
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path

from ..errors import MedallionError
from ..project import Target
from . import MergeSpec, WriteResult
from .native_sql import merge_sql, snapshot_sql
from .spark import read_text, remove_folder, start_spark

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
METADATA_KEY = "medallion"  # our commit metadata travels as Delta's userMetadata, in JSON
MISSING_JARS = (
    "the Delta Lake JARs are not on Spark's classpath, so the delta-spark engine cannot start",
    "provide them one of three ways: use a cluster that ships Delta (e.g. Databricks); put the "
    "delta-spark and delta-storage JARs in a folder and name it as delta_jars in the profile's "
    "target; or, where Maven is reachable, set spark.jars.packages to "
    "io.delta:delta-spark_2.13:<version> in the target's spark conf")


def spark_settings(target: Target) -> dict[str, str]:
    """Spark conf for Delta: the extension and catalog, and the JAR folder if the profile has one."""
    conf = dict(DELTA_CONF)
    if target.delta_jars:
        jars = sorted(str(p) for p in Path(target.delta_jars).glob("*.jar"))
        if not jars:
            raise MedallionError(f"delta_jars names {target.delta_jars}, which has no .jar files",
                                 hint=MISSING_JARS[1])
        conf["spark.jars"] = ",".join(jars)
    return conf


class NativeEngine:
    name = "delta-spark"

    def __init__(self, target: Target):
        self.target = target

    @cached_property
    def spark(self):
        spark = start_spark(self.target, spark_settings(self.target))
        try:
            spark._jvm.java.lang.Class.forName("io.delta.tables.DeltaTable")
        except Exception as exc:
            raise MedallionError(MISSING_JARS[0], hint=MISSING_JARS[1]) from exc
        return spark

    def _table(self, path: str):
        from delta.tables import DeltaTable

        return DeltaTable.forPath(self.spark, str(path))

    def table_exists(self, path: str) -> bool:
        from delta.tables import DeltaTable

        return DeltaTable.isDeltaTable(self.spark, str(path))

    def read_table(self, path: str):
        return self.spark.read.format("delta").load(str(path))

    follows_commit_log = False  # Delta's own streaming source reads the tables

    def read_stream(self, path: str):
        return self.spark.readStream.format("delta").load(str(path))

    def table_version(self, path: str) -> int:
        return self.history(path, 1)[0]["version"]

    def last_commit_value(self, path: str, key: str) -> str | None:
        for commit in self.history(path, 10):
            if commit.get("operation") in ("OPTIMIZE", "VACUUM START", "VACUUM END"):
                continue
            return json.loads(commit.get("userMetadata") or "{}").get(key)
        return None

    def committed_version(self, path: str, app_id: str) -> int | None:
        # Delta skips a write whose txnAppId has this version or a later one, so a replayed
        # batch is a no-op here without asking; the app transaction is not exposed to read.
        return None

    def _writer(self, df, metadata, txn):
        writer = df.write.format("delta")
        if metadata:
            writer = writer.option("userMetadata", json.dumps(metadata))
        if txn:
            writer = writer.option("txnAppId", txn[0]).option("txnVersion", str(txn[1]))
        return writer

    def write(self, df, path: str, mode: str, partition_by: tuple[str, ...] = (),
              metadata: dict | None = None, merge_schema: bool = False,
              txn: tuple[str, int] | None = None) -> WriteResult:
        writer = self._writer(df, metadata, txn).mode(mode)
        if mode == "overwrite":
            writer = writer.option("overwriteSchema", "true")
        if merge_schema:
            writer = writer.option("mergeSchema", "true")
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        writer.save(str(path))
        return self._result(path)

    def merge(self, df, path: str, spec: MergeSpec, metadata: dict | None = None,
              merge_schema: bool = False, txn: tuple[str, int] | None = None) -> WriteResult:
        view = "_medallion_merge_source"
        df.createOrReplaceTempView(view)
        conf = {"spark.databricks.delta.schema.autoMerge.enabled": str(merge_schema).lower()}
        if metadata:
            conf["spark.databricks.delta.commitInfo.userMetadata"] = json.dumps(metadata)
        if txn:  # idempotent DML: Delta skips the MERGE if this app id already has this version
            conf["spark.databricks.delta.write.txnAppId"] = txn[0]
            conf["spark.databricks.delta.write.txnVersion"] = str(txn[1])
        for key, value in conf.items():
            self.spark.conf.set(key, value)
        try:
            self.spark.sql(merge_sql(str(path), view, df.columns, spec))
        finally:
            for key in conf:
                self.spark.conf.unset(key)
        return self._result(path)

    def _result(self, path: str) -> WriteResult:
        last = self.history(path, 1)[0]
        metrics = last.get("operationMetrics") or {}
        rows = metrics.get("numOutputRows") or sum(
            int(metrics.get(k, 0)) for k in ("numTargetRowsInserted", "numTargetRowsUpdated",
                                             "numTargetRowsDeleted"))
        return WriteResult(version=last["version"], rows=int(rows or 0),
                           files_added=int(metrics.get("numFiles", metrics.get(
                               "numTargetFilesAdded", 0)) or 0))

    def optimize(self, path: str) -> dict:
        metrics = self._table(path).optimize().executeCompaction().first()["metrics"]
        return {"files_removed": metrics["numFilesRemoved"], "files_added": metrics["numFilesAdded"]}

    def vacuum(self, path: str, retain_hours: float, enforce_retention: bool = True) -> list[str]:
        self.spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled",
                            str(enforce_retention).lower())
        self._table(path).vacuum(retain_hours)
        return []  # delta-spark does not list what it deleted

    def file_count(self, path: str) -> int:
        return int(self._table(path).detail().first()["numFiles"])

    def row_count(self, path: str) -> int | None:
        return self.read_table(path).count()  # Delta answers a bare count from its log

    def history(self, path: str, limit: int | None = None) -> list[dict]:
        rows = self._table(path).history(limit).collect()
        return [{**row.asDict(recursive=True),
                 "timestamp": int(row["timestamp"].timestamp() * 1000)} for row in rows]

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
        return read_text(self.spark, location)

    def remove_folder(self, location: str) -> None:
        remove_folder(self.spark, location)
