"""Starting the one SparkSession an invocation uses: Java found, the master reachable, the
JVM's output in target/spark.log, credentials set after the start (never on the command line),
Ctrl-C left to medallion, and the warehouse's file system checked once Spark runs."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING
from urllib.parse import urlsplit

from ..core.error_text import JAVA_CAUSE, unusable_warehouse
from ..core.errors import MedallionError
from ..core.locations import is_remote
from ..core.processes import environment_set
from ..core.project import Target
from .class_archive import class_archive, forget, keep_when_recorded, with_archive
from .conf import LongQueries, is_local_master, is_secret, spark_conf
from .launch import launch
from .sql_endpoint import serving_driver_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            problems.append(f"{address}: {reason}")
    raise MedallionError(
        f"target '{target.name}': the Spark master {master} is not reachable "
        f"({'; '.join(problems)})", path=target.profiles_file,
        hint="start the cluster or fix spark: master in the target; to build on this machine "
             "instead, use a target with master local[*]")


def check_file_system(spark: SparkSession, target: Target) -> None:
    """The warehouse's store has a Hadoop file system on the classpath (hadoop-aws for s3a://)."""
    if not is_remote(target.warehouse):
        return
    scheme = urlsplit(target.warehouse).scheme
    jvm = spark._jvm
    assert jvm is not None  # a session of a JVM this process started
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
    check_store_reachable(spark, target)


def check_store_reachable(spark: SparkSession, target: Target) -> None:
    """The warehouse's bucket answers before any model runs: a missing bucket, refused keys or
    an endpoint that does not answer is one line naming the store, not a Java error from
    whichever node touched it first."""
    jvm = spark._jvm
    assert jvm is not None  # a session of a JVM this process started
    hadoop = spark._jsc.hadoopConfiguration()
    root = jvm.org.apache.hadoop.fs.Path(target.warehouse)
    try:
        root.getFileSystem(hadoop).exists(root)
    except Exception as exc:
        text = str(exc)
        store = hadoop.get("fs.s3a.endpoint") or urlsplit(target.warehouse).scheme + "://"
        refused = unusable_warehouse(target, text, store)
        if refused:
            raise refused from exc
        raise MedallionError(
            f"target '{target.name}': the warehouse {target.warehouse} cannot be read "
            f"(store: {store}): {java_reason(text)}", path=target.profiles_file,
            hint="--debug shows the store's whole answer") from exc


def java_reason(text: str) -> str:
    """The first line of a Java error that says something (py4j puts 'An error occurred while
    calling ...' first)."""
    lines = [ln.strip(": \t") for ln in text.splitlines() if ln.strip()]
    useful = [ln for ln in lines if not ln.startswith(("An error occurred", "at "))]
    return (useful or lines or ["unknown error"])[0][:300]


def _set_after_start(spark: SparkSession, target: Target, conf: dict[str, str]) -> None:
    """spark.hadoop.* settings go into the Hadoop configuration (file systems, Delta and the
    executors' tasks read them there): credentials only this way, never on the JVM's command
    line; and all of them for a JVM that was already running (the test suite's), whose Hadoop
    configuration is from its own start. Other credentials are set on the session."""
    hadoop = spark._jsc.hadoopConfiguration()
    for key, value in conf.items():
        if key.startswith("spark.hadoop."):
            hadoop.set(key.removeprefix("spark.hadoop."), value)
            continue
        if not is_secret(key):
            continue
        try:
            spark.conf.set(key, value)
        except Exception as exc:
            raise MedallionError(
                f"target '{target.name}': {key} looks like a credential, so it is not passed on "
                "Spark's command line, but Spark takes it only at start", path=target.profiles_file,
                hint="give it as a spark.hadoop.* setting, or in the cluster's own Spark "
                     "configuration") from exc


def _last_java_cause(log_file: Path, offset: int) -> str | None:
    """The deepest Java cause the JVM wrote to its log since `offset`: why it died at its start
    (e.g. java.net.UnknownHostException: <name>), which pyspark's error does not say."""
    try:
        with open(log_file, "rb") as log:
            log.seek(offset)
            written = log.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    causes = [line.removeprefix("Caused by: ").strip() for line in written
              if JAVA_CAUSE.match(line.strip())]
    return causes[-1][:300] if causes else None


@contextmanager
def _jvm_output(log_file: Path | None) -> Iterator[dict[str, IO[bytes]]]:
    """How to start the JVM (Popen's arguments) so that its output (its banner, Spark's log)
    goes to log_file. The JVM then holds neither of this process's stdout and stderr: a
    caller reading them (a scheduler, a CI job, `| tee`) is done when the command is, not
    when the JVM has shut down after it (0.4-0.5 s). None: leave it on the terminal (--debug)."""
    if log_file is None:
        yield {}
        return
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as output:
        yield {"stdout": output, "stderr": output}


def start_spark(target: Target, extra_conf: dict[str, str] | None = None,
                log_file: Path | None = None,
                long_queries: LongQueries | None = None) -> SparkSession:
    """The session for a target. log_file: where Spark's own output goes (None: the terminal,
    with tracebacks, as --debug wants). long_queries: as for spark_conf."""
    # The master first: a cluster that is not up is said as such on a client with no Java too
    check_master_reachable(target)
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        raise MedallionError("Java was not found; Spark needs Java 17",
                             hint="install a JDK 17 (e.g. apt-get install openjdk-17-jre-headless) "
                                  "or set JAVA_HOME")
    # Set before the JVM starts: some Python worker launches read only the environment.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = serving_driver_conf(
        {**spark_conf(target, long_queries), **(extra_conf or {})})
    from .pyspark_api import SparkContext

    # Only a start that launches a JVM claims its kind's archive: a process whose JVM runs
    # already (the daemon, serve, a test worker) held the claim of every other kind it was
    # asked for until it ended, and every other command of that kind started without one.
    archive = class_archive(conf) if SparkContext._gateway is None else None
    logged_before = log_file.stat().st_size if log_file and log_file.is_file() else 0
    try:
        try:
            spark = _session(target, with_archive(conf, archive), log_file)
        except Exception:
            if archive is None or SparkContext._gateway is not None:
                raise  # not the archive: the JVM started
            forget(archive)  # a Java or an archive that cannot share classes
            archive = None
            spark = _session(target, conf, log_file)
    except Exception as exc:  # the JVM failed to start: say so plainly
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        cause = log_file and _last_java_cause(log_file, logged_before)
        reason += f" ({cause})" if cause else ""
        raise MedallionError(f"target '{target.name}': Spark did not start: {reason}",
                             path=target.profiles_file,
                             hint="check Java 17 and the target's spark settings (--debug shows "
                                  "the whole error)") from exc
    keep_when_recorded(archive, spark)
    # Spark's log: warnings and errors into the log file; on the terminal only with --debug.
    spark.sparkContext.setLogLevel("WARN" if log_file else "ERROR")
    quiet_python_error_log(quiet=log_file is not None)
    _set_after_start(spark, target, conf)
    _callbacks_ready()
    check_file_system(spark, target)
    return spark


def _callbacks_ready() -> None:
    """py4j's callback server (foreachBatch functions, query listeners) started now, from one
    thread, rather than by pyspark when first needed: two queries starting at once could both
    start it, and its accept loop uses select(), which fails on a socket numbered past 1023, as
    a long-lived process (--watch, serve) may open it by then: every query would then wait
    for ever for its first batch's function."""
    from .pyspark_api import SparkContext, ensure_callback_server_started

    ensure_callback_server_started(SparkContext._gateway)


def _session(target: Target, conf: dict[str, str], log_file: Path | None) -> SparkSession:
    from .pyspark_api import SparkConf, SparkContext, SparkSession

    # One description of the session for the JVM's start and the session (no JVM defaults
    # read into it: a second start in a process that has a JVM must not copy them back).
    settings = SparkConf(loadDefaults=False).setMaster(target.spark_master).setAppName(
        "medallion").setAll([(key, value) for key, value in conf.items() if not is_secret(key)])
    with _own_ctrl_c():  # getOrCreate makes a SparkContext too, where one was stopped
        if SparkContext._gateway is None:  # no JVM yet (the test suite's session may have one)
            with _jvm_output(log_file) as popen_arguments, environment_set(
                    _loopback_address(target)):
                SparkContext(conf=settings, gateway=launch(settings, popen_arguments))
        return SparkSession.builder.config(conf=settings).getOrCreate()


def _loopback_address(target: Target) -> dict[str, str]:
    """A local session's JVM told its address is loopback's (as spark_conf binds it there),
    unless the user says otherwise: else spark-submit looks up the machine's own name first,
    and where it does not resolve (no /etc/hosts entry) the JVM dies before it starts."""
    if not is_local_master(target.spark_master) or "SPARK_LOCAL_IP" in os.environ:
        return {}
    return {"SPARK_LOCAL_IP": "127.0.0.1"}


@contextmanager
def _own_ctrl_c() -> Iterator[None]:
    """Keep medallion's Ctrl-C handling: a SparkContext made on the main thread installs a
    handler of pyspark's that calls the JVM from inside the signal, which breaks py4j when
    the main thread is in a JVM call itself (`reentrant call`)."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else None
    try:
        yield
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)


def quiet_python_error_log(quiet: bool) -> None:
    # pyspark logs every captured SQL error as JSON on stderr, and py4j the traceback of every
    # failed callback (a foreachBatch function); medallion reports errors itself.
    import logging

    from .pyspark_api import PySparkLogger

    PySparkLogger.getLogger("SQLQueryContextLogger").disabled = True
    logging.getLogger("py4j").setLevel(logging.CRITICAL if quiet else logging.ERROR)


# Files beside the tables (streaming checkpoints) and landing files on object storage, through
# Hadoop's FileSystem API in the JVM: it reaches every location Spark itself reads and writes
# (s3a://, abfss://, hdfs://, file://), with the credentials of the target's spark conf, so
# nothing here needs a Python client per store.


