"""Spark's Thrift JDBC/ODBC server (HiveServer2's protocol) in a running driver, for `medallion
serve --sql`: BI tools, beeline, PyHive and dbt-spark's thrift method query the tables by their
catalog names, in the JVM that builds them, so each query reads the latest committed version.

The server is pyspark's own (spark-hive-thriftserver ships in the wheel), started in the driver
with HiveThriftServer2.startWithContext. It reads its settings from the Spark conf the JVM
started with (spark.hadoop.hive.server2.*, set at runtime they are not seen), so endpoint_conf
goes into the target's Spark settings before the start. It listens on loopback only and asks
for no credentials (NOSASL): nothing beyond this machine reaches it.
"""

from __future__ import annotations

import os
import socket
import time
from typing import TYPE_CHECKING, Any

from ..core.errors import MedallionError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HOST = "127.0.0.1"
SECONDS = 60  # for the server's listener, which starts in a thread of its own
PORT_KEY = "spark.hadoop.hive.server2.thrift.port"


def endpoint_conf(port: int) -> dict[str, str]:
    return {PORT_KEY: str(port),
            "spark.hadoop.hive.server2.thrift.bind.host": HOST,
            "spark.hadoop.hive.server2.authentication": "NOSASL"}


def with_jars_on_class_path(conf: dict[str, str]) -> dict[str, str]:
    """A driver serving SQL also has spark.jars (Delta's catalog) on its JVM's class path: a
    client's session is opened in Hive's code, on the class loader of Hive's classes, which
    does not see spark.jars (beeline's opening failed on DeltaCatalog's ClassNotFoundException)."""
    jars = [jar for jar in conf.get("spark.jars", "").split(",") if jar and "://" not in jar]
    if PORT_KEY not in conf or not jars:
        return conf
    own = conf.get("spark.driver.extraClassPath")
    return {**conf, "spark.driver.extraClassPath": os.pathsep.join(jars + ([own] if own else []))}


def jdbc_url(port: int) -> str:
    return f"jdbc:hive2://{HOST}:{port}/default;auth=noSasl"


def check_port_free(port: int) -> None:
    """Before Spark starts: the server's listener fails in its own thread, saying nothing."""
    with socket.socket() as probe:
        try:
            probe.bind((HOST, port))
        except OSError as exc:
            raise MedallionError(f"--sql-port {port}: {HOST}:{port} is in use ({exc.strerror})",
                                 hint="give another port with --sql-port") from exc


def start_sql_endpoint(spark: SparkSession, port: int) -> None:
    """Start the server on the session's Spark and wait until it listens."""
    jvm: Any = spark.sparkContext._jvm
    jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2.startWithContext(
        spark._jsparkSession.sqlContext())
    deadline = time.monotonic() + SECONDS
    while True:
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise MedallionError(
                    f"Spark's Thrift server did not listen on {HOST}:{port} in {SECONDS} s",
                    hint="its reason is in target/spark.log (--debug shows it here)") from None
            time.sleep(0.2)
