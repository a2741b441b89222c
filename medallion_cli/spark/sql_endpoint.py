"""Spark's Thrift JDBC/ODBC server (HiveServer2's protocol) in a running driver, for `medallion
serve --sql`: BI tools, beeline, PyHive and dbt-spark's thrift method query the tables by their
catalog names, in the JVM that builds them, so each query reads the latest committed version.

The server is pyspark's own (spark-hive-thriftserver ships in the wheel), started in the driver
with HiveThriftServer2.startWithContext. It reads its settings from the Spark conf the JVM
started with (spark.hadoop.hive.server2.*, set at runtime they are not seen), so endpoint_conf
goes into the target's Spark settings before the start.

On loopback it asks for no credentials (NOSASL) unless MEDALLION_SQL_PASSWORD is set. Bound
beyond loopback it needs that password: HiveServer2's CUSTOM authentication with our check
(java/PasswordAuthentication.java, compiled at first need), which reads the password from the
JVM's environment, never from Spark's settings (Spark's UI and log show those). SASL PLAIN
sends it as it is: beyond a trusted network, TLS (hive.server2.use.SSL) belongs in front.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import MedallionError
from . import jars
from .java_build import compiled_jar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HOST = "127.0.0.1"
SECONDS = 60  # for the server's listener, which starts in a thread of its own
PORT_KEY = "spark.hadoop.hive.server2.thrift.port"
PASSWORD_ENV = "MEDALLION_SQL_PASSWORD"
CHECK_SOURCE = Path(__file__).resolve().parent / "java" / "PasswordAuthentication.java"
CHECK_CLASS = "io.medallion.sql.PasswordAuthentication"
CHECK_CLASS_KEY = "spark.hadoop.hive.server2.custom.authentication.class"


def password_set() -> bool:
    return bool(os.environ.get(PASSWORD_ENV))


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def endpoint_conf(port: int, host: str = HOST,
                  own_class_path: str | None = None) -> dict[str, str]:
    """The endpoint's settings; with a password, its check on the JVM's class path, before
    the target's own class path."""
    conf = {PORT_KEY: str(port), "spark.hadoop.hive.server2.thrift.bind.host": host}
    if not password_set():
        return {**conf, "spark.hadoop.hive.server2.authentication": "NOSASL"}
    hive_service = next((jars.pyspark_folder() / "jars").glob("spark-hive-thriftserver_*.jar"))
    check = compiled_jar(CHECK_SOURCE, [hive_service], "the SQL endpoint's password check")
    return {**conf, "spark.hadoop.hive.server2.authentication": "CUSTOM",
            CHECK_CLASS_KEY: CHECK_CLASS,
            "spark.driver.extraClassPath": os.pathsep.join(
                [str(check), *filter(None, [own_class_path])])}


def serving_driver_conf(conf: dict[str, str]) -> dict[str, str]:
    """What a driver serving SQL needs beyond endpoint_conf, from its whole conf: spark.jars
    (Delta's catalog) on its JVM's class path too, as a client's session is opened in Hive's
    code, on the class loader of Hive's classes, which does not see spark.jars (beeline's
    opening failed on DeltaCatalog's ClassNotFoundException); and the password check's class
    as a system property, as Hive's CUSTOM provider reads a HiveConf of its own (system
    properties and hive-site.xml, not Spark's settings)."""
    if PORT_KEY not in conf:
        return conf
    local_jars = [jar for jar in conf.get("spark.jars", "").split(",")
                  if jar and "://" not in jar]
    own = conf.get("spark.driver.extraClassPath")
    served = {**conf, "spark.driver.extraClassPath": os.pathsep.join(
        local_jars + ([own] if own else []))} if local_jars else dict(conf)
    check = conf.get(CHECK_CLASS_KEY)
    if check:
        served["spark.driver.extraJavaOptions"] = " ".join(filter(None, [
            conf.get("spark.driver.extraJavaOptions"),
            f"-D{CHECK_CLASS_KEY.removeprefix('spark.hadoop.')}={check}"]))
    return served


def jdbc_url(port: int, host: str = HOST) -> str:
    return f"jdbc:hive2://{host}:{port}/default" + ("" if password_set() else ";auth=noSasl")


def check_endpoint_address(host: str, port: int) -> None:
    """Before Spark starts: an address beyond loopback only with a password, and a port free
    (the server's listener fails in its own thread, saying nothing)."""
    if not is_loopback(host) and not password_set():
        raise MedallionError(
            f"--sql-host {host} lets other machines query every table, and {PASSWORD_ENV} "
            "is not set for the endpoint to ask them for",
            hint=f"set {PASSWORD_ENV} in serve's environment (clients then give it with any "
                 "user name), or leave --sql-host at 127.0.0.1")
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise MedallionError(f"--sql-port {port}: {host}:{port} is in use "
                                     f"({exc.strerror})",
                                     hint="give another port with --sql-port") from exc
            raise MedallionError(f"--sql-host {host}: cannot listen there ({exc.strerror})",
                                 hint="give an address of this machine") from exc


def start_sql_endpoint(spark: SparkSession, port: int, host: str = HOST) -> None:
    """Start the server on the session's Spark and wait until it listens."""
    jvm: Any = spark.sparkContext._jvm
    jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2.startWithContext(
        spark._jsparkSession.sqlContext())
    deadline = time.monotonic() + SECONDS
    while True:
        try:
            socket.create_connection((HOST if host in ("0.0.0.0", "::") else host, port),
                                     timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise MedallionError(
                    f"Spark's Thrift server did not listen on {host}:{port} in {SECONDS} s",
                    hint="its reason is in target/spark.log (--debug shows it here)") from None
            time.sleep(0.2)
