"""How a driver is started for Delta Lake for Spark: Delta's SQL extension and catalog, its
JARs (the target's, or those `medallion jars` fetched), the log store for a warehouse on S3
(log_store.py), a metastore's settings, the options a stream takes its inputs' changes of
columns with, and the check, once Spark runs, that Delta's classes were loaded (else one line
saying what to do).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...core.errors import MedallionError
from ...core.locations import join, on_s3
from ...core.project import Target
from ...spark import jars
from ...spark.conf import LongQueries, is_local_master, shuffle_partitions, spark_conf
from ...spark.jars import delta_jar_files, jars_fix
from .log_store import log_store_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


DELTA_CLASS = "io.delta.tables.DeltaTable"
# Reader options that let a Delta stream with a schema log go on past a column renamed,
# dropped or widened in place (the reading model's on_schema_change decides what it keeps)
TAKE_SCHEMA_CHANGES = {f"allowSourceColumn{change}": "always"
                       for change in ("Rename", "Drop", "TypeChange")}


def spark_settings(target: Target, long_queries: LongQueries | None = None) -> dict[str, str]:
    """Spark conf for Delta: the extension and catalog, and the JARs when they are here.
    long_queries: as for spark_conf."""
    conf = dict(DELTA_CONF)
    # Delta rebuilds a table's state from its log with a shuffle of 50 partitions by default,
    # which costs seconds per small table. On a cluster, as many as the target's shuffles. A
    # local session's logs are a laptop's, and each task there generates and compiles its
    # code again on the same few cores: two fifths of the JVM's samples of an increment; with
    # one task it took 15-20% fewer CPU-seconds (docs/engines-and-clusters.md). The profile's conf still wins.
    # (Listing, VACUUM's too: spark/conf.py's spark_conf.)
    replay_tasks = "1" if is_local_master(target.spark_master) else shuffle_partitions(target)
    conf["spark.databricks.delta.snapshotPartitions"] = target.spark_conf.get(
        "spark.databricks.delta.snapshotPartitions", replay_tasks)
    conf.update(metastore_settings(target, long_queries))
    found = delta_jar_files(target)
    if reaches_s3(target):
        store_jar, store_conf = log_store_settings(found, target.spark_conf)
        found += [store_jar] if store_jar else []
        conf.update(store_conf)
    own = target.spark_conf.get("spark.jars")
    if found:
        conf["spark.jars"] = ",".join([str(p) for p in found] + ([own] if own else []))
    elif is_local_master(target.spark_master) and not (
            own or target.spark_conf.get("spark.jars.packages")):
        # Nothing can bring Delta to a local Spark: say so before starting a JVM.
        raise MedallionError(f"target '{target.name}' uses the delta-spark engine, but the Delta "
                             "Lake JARs are not here", path=target.profiles_file,
                             hint=jars_fix(target))
    return conf


def reaches_s3(target: Target) -> bool:
    """Whether this Spark may commit to Delta tables on S3: its warehouse is there, or it has
    S3A's JARs (a session shared by several projects)."""
    own = " ".join(target.spark_conf.get(key, "") for key in ("spark.jars", "spark.jars.packages"))
    return on_s3(target.warehouse) or "hadoop-aws" in own


def metastore_settings(target: Target,
                       long_queries: LongQueries | None = None) -> dict[str, str]:
    """Spark conf for the target's metastore: Hive's catalog; for `local` its Derby
    database (and Derby's own log) in the warehouse, so tables stay registered between runs
    on a laptop; for a thrift:// URI that Hive Metastore service. `session` takes whatever
    catalog the cluster's Spark is set up with."""
    if target.metastore is None:
        return {}
    conf = {"spark.sql.catalogImplementation": "hive"}
    if target.metastore.startswith("thrift://"):
        conf["spark.hadoop.hive.metastore.uris"] = target.metastore
    if target.metastore == "local":
        home = join(target.warehouse, "_medallion")
        conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
            f"jdbc:derby:;databaseName={join(home, 'metastore')};create=true")
        java_options = spark_conf(target, long_queries)["spark.driver.extraJavaOptions"]
        conf["spark.driver.extraJavaOptions"] = f"{java_options} -Dderby.system.home={home}"
    # The target's own settings win, but its Java options are in java_options already.
    return {**conf, **{k: v for k, v in target.spark_conf.items()
                       if k in conf and k != "spark.driver.extraJavaOptions"}}


def check_delta_loaded(spark: SparkSession, target: Target) -> None:
    """Delta's classes load and were built for this Spark, wherever they came from."""
    jvm: Any = spark._jvm
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
            hint=jars_fix(target)) from exc
    source = cls.getProtectionDomain().getCodeSource()
    if source is not None:
        jar = Path(str(source.getLocation().getPath()))
        jars.check_spark_jars([jar], target.profiles_file or "profiles.yml", jars_fix(target),
                              f"target '{target.name}': ")


def jars_error_line(text: str) -> str:
    """The line of a Java error that names what failed to link."""
    for line in text.splitlines():
        if "NoClassDefFoundError" in line or "ClassNotFoundException" in line:
            return line.split(":", 1)[-1].strip()
    return text.strip().splitlines()[0] if text.strip() else "unknown error"
