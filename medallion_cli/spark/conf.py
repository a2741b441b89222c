"""How a driver starts: the Spark settings of a target (loopback, quiet, sized to the work),
the driver JVM's options, and which settings are credentials (kept off the command line).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from ..core.locations import join
from ..core.project import Target

LOG_CONFIG = Path(__file__).resolve().parent / "log4j2.properties"


def spark_conf(target: Target, long_queries: LongQueries | None = None) -> dict[str, str]:
    """Defaults that make local runs deterministic and quiet; the profile's conf wins.
    long_queries: the work ahead is long queries over many rows, compiled as the engine's
    capability says (driver_java_options); None: it is not."""
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
        # Spark keeps the code it compiled for 100 query stages: a watch (or a build) that runs
        # more in a round, as a project of many models and tests does, compiled each again when
        # it came round (126 of 150 in test_engine_start). A trial that ran 150 per landed file
        # spent 0.6 s of the driver's CPU a file on it; the sample runs fewer (17 compiles a file).
        "spark.sql.codegen.cache.maxEntries": "1000",
        **target.spark_conf,
        "spark.driver.extraJavaOptions": driver_java_options(
            target.spark_conf.get("spark.driver.extraJavaOptions", ""), local, long_queries),
    }


def shuffle_partitions(target: Target) -> str:
    """The target's shuffle partitions: its own, else 4 (a laptop's few cores)."""
    return target.spark_conf.get("spark.sql.shuffle.partitions", "4")


# C2 for the hottest code alone: methods called or looping ten times more than Java's default
# thresholds before C2 compiles them (the rest stays C1's code).
HOT_CODE_ONLY = ("-XX:Tier4InvocationThreshold=50000", "-XX:Tier4MinInvocationThreshold=6000",
                 "-XX:Tier4CompileThreshold=150000", "-XX:Tier4BackEdgeThreshold=400000")


# Long queries' hot loops (JSON parsing, Parquet encoding) run 2.5x faster as C2's code than as
# C1's (docs/engines-and-clusters.md: "The driver JVM"). On 2 cores: the embedded engine's
# first build of 47 MB of landing files took 36 s with C1 alone and 41-46 s with C2 for its
# hottest code, of 137 MB 57 s (median of 7) against 70 s; delta-spark's of 137 MB 75-87 s
# either way, of 454 MB a quarter less with Java's default tiers. Each engine declares its own
# (its capabilities' long_queries).
@dataclass(frozen=True)
class LongQueries:
    """From `landing_bytes` of new landing data on (new_input.py measures it before Spark
    starts), a build is long queries over many rows; a local driver then compiles with `jit`."""
    landing_bytes: int
    jit: tuple[str, ...]


def driver_java_options(own: str, local: bool, long_queries: LongQueries | None = None) -> str:
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
    32-38, the wall time the same or less (docs/engines-and-clusters.md). C1 alone
    would also shrink the code cache from 240 MB to 48 MB, which Delta's code outgrows: Java
    then evicts compiled code and compiles it again (docs/engines-and-clusters.md has the figures). Long queries
    (a first build of a large feed: new_input.py) are the exception: their hot loops, JSON
    parsing and Parquet encoding, run 2.5x slower as C1's code. They keep Java's tiers, on
    the embedded engine with C2 for the hottest code alone (its capabilities' long_queries).
    A cluster's
    driver, which only plans (its executors hold the rows), keeps Java's default."""
    collector = () if re.search(r"-XX:\+Use\w+GC\b", own) else ("-XX:+UseParallelGC",)
    zone = () if "-Duser.timezone=" in own else ("-Duser.timezone=UTC",)
    own_tiers = re.search(r"-XX:(TieredStopAtLevel=|[+-]TieredCompilation\b)", own)
    jit: tuple[str, ...]
    if not local or own_tiers:
        jit = ()
    elif long_queries is None:
        jit = ("-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m")
    else:
        jit = long_queries.jit
    return " ".join((f"-Dlog4j2.configurationFile={LOG_CONFIG}", *zone, *collector, *jit,
                     *own.split()))


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[")


# Settings whose values are credentials: given to Spark after it starts, not on the command line
# pyspark launches the JVM with (every local user sees that in `ps`).
SECRET_WORDS = ("secret", "password", "token", "credential", "access.key", "account.key",
                "sas.", "private")


def is_secret(key: str) -> bool:
    return any(word in key.lower() for word in SECRET_WORDS)
