"""Starting the one SparkSession an invocation uses, and files on any storage Spark can reach."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..core.errors import MedallionError
from ..core.locations import is_remote, join
from ..core.project import Target
from .class_archive import class_archive, forget, keep_when_recorded, with_archive

LOG_CONFIG = Path(__file__).resolve().parent / "log4j2.properties"


def spark_conf(target: Target, long_queries: bool = False) -> dict[str, str]:
    """Defaults that make local runs deterministic and quiet; the profile's conf wins.
    long_queries: the work ahead is long queries over many rows (driver_java_options)."""
    # A local session serves no one else: its RPC and block-manager ports listen on loopback
    # only, not on the host's network address.
    local = is_local_master(target.spark_master)
    loopback = ({"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}
                if local else {})
    # Spark lists more than 32 paths (a stream's batch of landing files, VACUUM's table) in a
    # Spark job of one task per path (10000 at most): 99 new files cost 1.5-3.4 s of both of two
    # cores. As many tasks as the target's shuffles suits a cluster; a local session's driver
    # lists them itself, not waiting for cores another node's query holds (3.3 s then).
    listing = {"spark.sql.sources.parallelPartitionDiscovery.parallelism":
               shuffle_partitions(target)}
    if local:
        listing["spark.sql.sources.parallelPartitionDiscovery.threshold"] = "100000"
    # Hadoop's local file system keeps a checksum file beside each file it writes, and without
    # Hadoop's native library (pyspark has none) it starts a chmod or readlink process for
    # each file it creates or renames: 240 processes in a 1% increment of the 300k-order feed,
    # 150 without the checksum files (that increment's wall and CPU time 2-4% less, medians of
    # 5, on 2 cores). Parquet and Delta keep checksums of their own.
    raw_files = ({"spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
                  "spark.hadoop.fs.AbstractFileSystem.file.impl":
                  "org.apache.hadoop.fs.local.RawLocalFs"} if local else {})
    return {
        **loopback,
        **listing,
        **raw_files,
        # Python workers must run the driver's interpreter, or UDFs and Arrow break.
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": shuffle_partitions(target),
        # Staged Parquet is read back by Arrow: standard microsecond timestamps, not INT96.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.sql.warehouse.dir": join(target.warehouse, "_spark"),
        **target.spark_conf,
        "spark.driver.extraJavaOptions": driver_java_options(
            target.spark_conf.get("spark.driver.extraJavaOptions", ""), local, long_queries,
            target.engine),
    }


def shuffle_partitions(target: Target):
    """The target's shuffle partitions: its own, else 4 (a laptop's few cores)."""
    return target.spark_conf.get("spark.sql.shuffle.partitions", "4")


# C2 for the hottest code alone: methods called or looping ten times more than Java's default
# thresholds before C2 compiles them (the rest stays C1's code).
HOT_CODE_ONLY = ("-XX:Tier4InvocationThreshold=50000", "-XX:Tier4MinInvocationThreshold=6000",
                 "-XX:Tier4CompileThreshold=150000", "-XX:Tier4BackEdgeThreshold=400000")


@dataclass(frozen=True)
class LongQueries:
    """From `landing_bytes` of new landing data on (new_input.py measures it before Spark
    starts), a build is long queries over many rows; a local driver then compiles with `jit`."""
    landing_bytes: int
    jit: tuple[str, ...]


# Long queries' hot loops (JSON parsing, Parquet encoding) run 2.5x faster as C2's code than as
# C1's (README: "The driver JVM"). On 2 cores: the embedded engine's first build of 47 MB of
# landing files took 36 s with C1 alone and 41-46 s with C2 for its hottest code, of 137 MB
# 57 s (median of 7) against 70 s; delta-spark's of 137 MB 75-87 s either way, of 454 MB a
# quarter less with Java's default tiers.
LONG_QUERIES = {"embedded": LongQueries(128 * 2**20, HOT_CODE_ONLY),
                "delta-spark": LongQueries(256 * 2**20, ())}


def driver_java_options(own: str, local: bool, long_queries: bool = False,
                        engine: str = "embedded") -> str:
    """Medallion's driver JVM options, then the target's own.

    Spark's log goes to target/spark.log (its traces only with --debug) whatever options the
    target adds. The JVM's time zone is UTC, as its SQL session's is (spark_conf), unless the
    target names one: Delta Lake for Spark 4.4 checks each commit's file list against a
    replay of the table's log (a Spark job per commit) where either is not UTC
    (Snapshot.allFilesInCrcVerificationForceEnabled): with TZ=Europe/Berlin a 1% increment
    of the 300k-order feed on delta-spark took 27.9-28.7 s before, 25.5-27.1 s after.
    The parallel collector, unless the target picks one: a build is a batch job on few cores,
    where G1's concurrent work competes with the queries (a fresh JVM parsing and writing 500k
    events took 2 s less of 20 s).

    A local session's JIT compiles with C1 alone unless the target says how it compiles: a
    command's JVM lives for seconds to minutes of many short queries, whose code C2 compiles
    again at a cost. On 2 cores (before such a first build took the long-query options
    below), C2 used 22 of a first build's 57 CPU-seconds (300k orders feed); with C1 alone a
    first build used 48-56 CPU-seconds instead of 55-65 and a 1% increment 19-22 instead of
    32-38, the wall time the same or less (README). C1 alone
    would also shrink the code cache from 240 MB to 48 MB, which Delta's code outgrows: Java
    then evicts compiled code and compiles it again (README has the figures). Long queries
    (a first build of a large feed: new_input.py) are the exception: their hot loops, JSON
    parsing and Parquet encoding, run 2.5x slower as C1's code. They keep Java's tiers, on
    the embedded engine with C2 for the hottest code alone (LONG_QUERIES). A cluster's
    driver, which only plans (its executors hold the rows), keeps Java's default."""
    collector = () if re.search(r"-XX:\+Use\w+GC\b", own) else ("-XX:+UseParallelGC",)
    zone = () if "-Duser.timezone=" in own else ("-Duser.timezone=UTC",)
    own_tiers = re.search(r"-XX:(TieredStopAtLevel=|[+-]TieredCompilation\b)", own)
    if not local or own_tiers:
        jit = ()
    elif not long_queries:
        jit = ("-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m")
    else:
        jit = LONG_QUERIES[engine].jit
    return " ".join((f"-Dlog4j2.configurationFile={LOG_CONFIG}", *zone, *collector, *jit,
                     *own.split()))


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


# Settings whose values are credentials: given to Spark after it starts, not on the command line
# pyspark launches the JVM with (every local user sees that in `ps`).
SECRET_WORDS = ("secret", "password", "token", "credential", "access.key", "account.key",
                "sas.", "private")


def is_secret(key: str) -> bool:
    return any(word in key.lower() for word in SECRET_WORDS)


def _set_secrets(spark, target: Target, secrets: dict[str, str]) -> None:
    """spark.hadoop.* credentials go into the Hadoop configuration (file systems, Delta and the
    executors' tasks read them from there); others are set on the session."""
    hadoop = spark._jsc.hadoopConfiguration()
    for key, value in secrets.items():
        if key.startswith("spark.hadoop."):
            hadoop.set(key.removeprefix("spark.hadoop."), value)
            continue
        try:
            spark.conf.set(key, value)
        except Exception as exc:
            raise MedallionError(
                f"target '{target.name}': {key} looks like a credential, so it is not passed on "
                "Spark's command line, but Spark takes it only at start", path=target.profiles_file,
                hint="give it as a spark.hadoop.* setting, or in the cluster's own Spark "
                     "configuration") from exc


@contextmanager
def _jvm_output(log_file: Path | None):
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
                log_file: Path | None = None, long_queries: bool = False):
    """The session for a target. log_file: where Spark's own output goes (None: the terminal,
    with tracebacks, as --debug wants). long_queries: as for spark_conf."""
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        raise MedallionError("Java was not found; Spark needs Java 17",
                             hint="install a JDK 17 (e.g. apt-get install openjdk-17-jre-headless) "
                                  "or set JAVA_HOME")
    check_master_reachable(target)
    # Set before the JVM starts: some Python worker launches read only the environment.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = {**spark_conf(target, long_queries), **(extra_conf or {})}
    archive = class_archive(conf)
    try:
        try:
            spark = _session(target, with_archive(conf, archive), log_file)
        except Exception:
            from .pyspark_api import SparkContext

            if archive is None or SparkContext._gateway is not None:
                raise  # not the archive: the JVM started
            forget(archive)  # a Java or an archive that cannot share classes
            archive = None
            spark = _session(target, conf, log_file)
    except Exception as exc:  # the JVM failed to start: say so plainly
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise MedallionError(f"target '{target.name}': Spark did not start: {reason}",
                             path=target.profiles_file,
                             hint="check Java 17 and the target's spark settings (--debug shows "
                                  "the whole error)") from exc
    keep_when_recorded(archive, spark)
    # Spark's log: warnings and errors into the log file; on the terminal only with --debug.
    spark.sparkContext.setLogLevel("WARN" if log_file else "ERROR")
    _quiet_python_error_log(quiet=log_file is not None)
    _set_secrets(spark, target, {k: v for k, v in conf.items() if is_secret(k)})
    check_file_system(spark, target)
    return spark


def _session(target: Target, conf: dict[str, str], log_file: Path | None):
    from .pyspark_api import SparkConf, SparkContext, SparkSession, launch_gateway

    # One description of the session for the JVM's start and the session (no JVM defaults
    # read into it: a second start in a process that has a JVM must not copy them back).
    settings = SparkConf(loadDefaults=False).setMaster(target.spark_master).setAppName(
        "medallion").setAll([(key, value) for key, value in conf.items() if not is_secret(key)])
    if SparkContext._gateway is None:  # no JVM yet (the test suite's session may have one)
        with _jvm_output(log_file) as popen_arguments, _own_ctrl_c():
            SparkContext(conf=settings, gateway=launch_gateway(settings, popen_arguments))
    return SparkSession.builder.config(conf=settings).getOrCreate()


@contextmanager
def _own_ctrl_c():
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


def _quiet_python_error_log(quiet: bool) -> None:
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
    """Write a (small) UTF-8 file, replacing one that is there (on object storage, where an
    object appears whole when closed; local files: engines.write_local_text)."""
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
