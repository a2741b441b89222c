"""Starting the one SparkSession an invocation uses, and files on any storage Spark can reach."""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import MedallionError
from ..locations import is_remote, join
from ..project import Target

LOG_CONFIG = Path(__file__).resolve().parent.parent / "log4j2.properties"


def spark_conf(target: Target) -> dict[str, str]:
    """Defaults that make local runs deterministic and quiet; the profile's conf wins."""
    return {
        # Python workers must run the driver's interpreter, or UDFs and Arrow break.
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        # Staged Parquet is read back by Arrow: standard microsecond timestamps, not INT96.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.sql.warehouse.dir": join(target.warehouse, "_spark"),
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG_CONFIG}",
        **target.spark_conf,
    }


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[")


# Where each object store's Hadoop file system comes from, for the error when it is missing.
CONNECTORS = {"s3a": "hadoop-aws (and the AWS SDK bundle it names)", "abfss": "hadoop-azure",
              "abfs": "hadoop-azure", "wasbs": "hadoop-azure", "gs": "Google's gcs-connector"}


def check_master_reachable(target: Target) -> None:
    """A standalone master that does not answer fails here, in one line, instead of after a
    minute of Spark retrying and a page of Java traces."""
    master = target.spark_master
    if not master.startswith("spark://"):
        return  # local, yarn, k8s://...: Spark reports those itself
    problems = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.partition(":")
        try:
            socket.create_connection((host, int(port or 7077)), timeout=5).close()
            return
        except (OSError, ValueError) as exc:
            problems.append(f"{address}: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}")
    raise MedallionError(
        f"target '{target.name}': the Spark master {master} is not reachable "
        f"({'; '.join(problems)})", path=target.profiles_file,
        hint="start the cluster or fix spark: master in the target; to build on this machine "
             "instead, use a target with master local[*]")


def check_file_system(spark, target: Target) -> None:
    """The warehouse's store has a Hadoop file system on the classpath (hadoop-aws for s3a://)."""
    if not is_remote(target.warehouse):
        return
    scheme = urlsplit(target.warehouse).scheme
    jvm = spark._jvm
    try:
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(
            scheme, spark._jsc.hadoopConfiguration())
    except Exception as exc:
        hadoop = jvm.org.apache.hadoop.util.VersionInfo.getVersion()
        raise MedallionError(
            f"target '{target.name}': Spark has no file system for {scheme}:// (the warehouse "
            f"{target.warehouse}); its Hadoop connector is not on the classpath",
            path=target.profiles_file,
            hint=f"add {CONNECTORS.get(scheme, 'the connector for ' + scheme)} built for Hadoop "
                 f"{hadoop} to the target's spark.jars or spark.jars.packages, or run on a "
                 "cluster that has it") from exc


def start_spark(target: Target, extra_conf: dict[str, str] | None = None):
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        raise MedallionError("Java was not found; Spark needs Java 17",
                             hint="install a JDK 17 (e.g. apt-get install openjdk-17-jre-headless) "
                                  "or set JAVA_HOME")
    check_master_reachable(target)
    # Set before the JVM starts: some Python worker launches read only the environment.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(target.spark_master).appName("medallion")
    for key, value in {**spark_conf(target), **(extra_conf or {})}.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # the JVM failed to start: say so plainly
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise MedallionError(f"target '{target.name}': Spark did not start: {reason}",
                             path=target.profiles_file,
                             hint="check Java 17 and the target's spark settings (--debug shows "
                                  "the whole error)") from exc
    spark.sparkContext.setLogLevel("ERROR")
    _quiet_python_error_log()
    check_file_system(spark, target)
    return spark


def _quiet_python_error_log() -> None:
    # pyspark logs every captured SQL error as JSON on stderr; medallion reports errors itself.
    from pyspark.logger import PySparkLogger

    PySparkLogger.getLogger("SQLQueryContextLogger").disabled = True


# Files beside the tables (streaming checkpoints) and landing files on object storage, through
# Hadoop's FileSystem API in the JVM: it reaches every location Spark itself reads and writes
# (s3a://, abfss://, hdfs://, file://), with the credentials of the target's spark conf, so
# nothing here needs a Python client per store.

def _hadoop_file(spark, location: str):
    """(Hadoop Path, its FileSystem) for a location."""
    path = spark._jvm.org.apache.hadoop.fs.Path(location)
    return path, path.getFileSystem(spark._jsc.hadoopConfiguration())


def read_text(spark, location: str) -> str:
    """A (small) file's content as UTF-8 text; FileNotFoundError when there is none."""
    jvm = spark._jvm
    path, fs = _hadoop_file(spark, location)
    if not fs.exists(path):
        raise FileNotFoundError(location)
    out = jvm.java.io.ByteArrayOutputStream()
    jvm.org.apache.hadoop.io.IOUtils.copyBytes(fs.open(path), out, 65536, True)  # closes both
    return out.toString("UTF-8")


def write_text(spark, location: str, text: str) -> None:
    """Write a (small) UTF-8 file, replacing one that is there."""
    path, fs = _hadoop_file(spark, location)
    out = fs.create(path, True)
    try:
        out.write(bytearray(text.encode()))
    finally:
        out.close()


def remove_folder(spark, location: str) -> None:
    """Delete a folder and everything under it; a location with nothing there is fine."""
    path, fs = _hadoop_file(spark, location)
    fs.delete(path, True)


def list_files(spark, location: str) -> list[tuple[str, int, int]]:
    """(path under the location, size, modification time) of every file below it, sorted."""
    path, fs = _hadoop_file(spark, location)
    if not fs.exists(path):
        return []
    root = fs.makeQualified(path).toString().rstrip("/") + "/"
    files, it = [], fs.listFiles(path, True)
    while it.hasNext():
        status = it.next()
        files.append((status.getPath().toString().removeprefix(root), status.getLen(),
                      status.getModificationTime()))
    return sorted(files)
