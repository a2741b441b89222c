"""Starting the one SparkSession an invocation uses, and files on any storage Spark can reach."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from ..errors import MedallionError
from ..locations import join
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


def start_spark(target: Target, extra_conf: dict[str, str] | None = None):
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        raise MedallionError("Java was not found; Spark needs Java 17",
                             hint="install a JDK 17 (e.g. apt-get install openjdk-17-jre-headless) "
                                  "or set JAVA_HOME")
    # Set before the JVM starts: some Python worker launches read only the environment.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(target.spark_master).appName("medallion")
    for key, value in {**spark_conf(target), **(extra_conf or {})}.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # the JVM failed to start: say so plainly
        raise MedallionError(f"Spark did not start: {exc}",
                             hint="check Java 17 and the spark settings of the profile's target"
                             ) from exc
    spark.sparkContext.setLogLevel("ERROR")
    _quiet_python_error_log()
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
    """A (small) file's content as UTF-8 text."""
    jvm = spark._jvm
    path, fs = _hadoop_file(spark, location)
    out = jvm.java.io.ByteArrayOutputStream()
    jvm.org.apache.hadoop.io.IOUtils.copyBytes(fs.open(path), out, 65536, True)  # closes both
    return out.toString("UTF-8")


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
