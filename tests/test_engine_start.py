"""Starting an engine: the Delta JARs fetched and checked, and each way a start can fail gives one
clear message naming the profiles file, the target and what to do, with no Java trace."""

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DELTA_SPARK_IN_SLOW_TIER, profile_for

from medallion_cli.cli.group import main
from medallion_cli.spark import jars

pytestmark = DELTA_SPARK_IN_SLOW_TIER

MODELS = {"models/a.sql": "select 1 as id"}


def build_output(root, *args):
    result = CliRunner().invoke(main, ["build", "--project-dir", str(root), *args])
    return result.exit_code, result.output


def assert_one_clear_error(output: str, *phrases: str) -> None:
    lines = [line for line in output.strip().splitlines() if not line.startswith("Running ")]
    assert lines[0].startswith("Error: ") and "profiles.yml" in lines[0], output
    assert len(lines) <= 2 and all(line.startswith("  hint: ") for line in lines[1:]), output
    assert "Traceback" not in output and "at org.apache" not in output
    for phrase in phrases:
        assert phrase in output, (phrase, output)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


@pytest.mark.unit
@pytest.mark.one_engine("start_spark checks the master first, before any JVM, for either engine")
def test_an_unreachable_master_is_one_line(project, engine_name):
    master = f"spark://127.0.0.1:{closed_port()}"
    # Spark starts when a node first needs it: nodes that need it at once, on two threads,
    # still stop the run with one error
    models = {**MODELS, "models/b.sql": "select 2 as id", "models/c.sql": "select 3 as id"}
    root = project(models, profile=profile_for(engine_name).replace('"local[2]"', master))
    code, output = build_output(root, "--threads", "2")
    assert code == 2
    assert_one_clear_error(output, "target 'local'", f"the Spark master {master} is not reachable",
                           "start the cluster")


@pytest.mark.unit
@pytest.mark.one_engine("start_spark looks for Java before any JVM starts, for either engine")
def test_no_java_is_one_line_saying_what_to_install(project, engine_name, monkeypatch,
                                                     tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # a folder with no java in it
    code, output = build_output(project(MODELS, profile=profile_for(engine_name)))
    assert code == 2
    lines = [line for line in output.strip().splitlines() if not line.startswith("Running ")]
    assert lines == ["Error: Java was not found; Spark needs Java 17",
                     "  hint: install a JDK 17 (e.g. apt-get install openjdk-17-jre-headless) or "
                     "set JAVA_HOME"], output


@pytest.mark.one_engine("both engines start a local Spark the same way (spark/start.py)")
def test_a_machine_whose_own_name_does_not_resolve_still_starts_a_local_spark(
        project, engine_name):
    """A machine whose name has no /etc/hosts entry (a fresh VM, a container): spark-submit
    looked the name up before anything else and the JVM died ('Spark did not start ... check
    Java 17', the UnknownHostException only in target/spark.log). A local session is told
    its address is loopback's, where it listens anyway. (A machine name of its own: a UTS
    namespace, `unshare -u`, which needs root.)"""
    import subprocess
    import sys

    if subprocess.run(["unshare", "-u", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare -u (a machine name of the test's own) needs root here")
    root = project(MODELS, profile=profile_for(engine_name))
    built = subprocess.run(
        ["unshare", "-u", "sh", "-c", 'hostname no-such-host.medallion.invalid && exec "$@"',
         "sh", sys.executable, "-m", "medallion_cli.cli", "build", "--project-dir", str(root)],
        capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    assert "1 of 1  OK         model a" in built.stdout, built.stdout


@pytest.mark.one_engine("both engines start Spark the same way (spark/start.py)")
def test_a_jvm_that_dies_at_its_start_is_one_line_with_its_java_cause(project, engine_name):
    """pyspark says only that the JVM exited; the line adds the cause the JVM logged (here an
    address that does not resolve), which was only in target/spark.log. (A JVM that dies: a
    process of its own.)"""
    from helpers import medallion

    root = project(MODELS, profile=profile_for(engine_name))
    died = medallion(root, "build", env={"SPARK_LOCAL_IP": "no-such-host.medallion.invalid"})
    assert died.returncode == 2
    assert_one_clear_error(
        died.stderr, "target 'local': Spark did not start: [JAVA_GATEWAY_EXITED] Java gateway "
        "process exited before sending its port number. (java.net.UnknownHostException: "
        "no-such-host.medallion.invalid")


@pytest.mark.unit
def test_a_local_spark_is_told_its_address_is_loopback_unless_the_user_says_otherwise(
        monkeypatch):
    from medallion_cli.core.project import Target
    from medallion_cli.spark.start import _loopback_address

    def told(master):
        return _loopback_address(Target("t", "embedded", "/w", master, {}, 1))
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    assert told("local[2]") == {"SPARK_LOCAL_IP": "127.0.0.1"}
    assert told("spark://10.0.0.5:7077") == {}  # a cluster's driver is reached by its address
    monkeypatch.setenv("SPARK_LOCAL_IP", "10.0.0.7")
    assert told("local[2]") == {}


@pytest.mark.unit
def test_nodes_that_first_need_spark_at_once_share_one_pyspark_import(project, engine_name,
                                                                       tmp_path):
    """In a fresh process, nodes that first touch pyspark at the same moment (seeds read with
    Spark, models starting the session, on four threads) each get a whole pyspark: one clear
    start error, never Python's `partially initialized module` (pyspark and pyspark.sql import
    each other). Repeated, since a race shows only some of the time (5 runs of 6 on the old
    code); no JVM starts: JAVA_HOME names no Java, so Spark's start fails at once."""
    import os
    import subprocess
    import sys

    nodes = {**{f"seeds/s{i}.csv": "id\n1\n" for i in range(3)},
             **{f"models/m{i}.sql": f"select {i} as id" for i in range(3)}}
    root = project(nodes)
    command = [str(Path(sys.executable).parent / "medallion"), "build", "--project-dir",
               str(root), "--threads", "4"]
    environment = {**os.environ, "JAVA_HOME": str(tmp_path / "no-java")}
    for _ in range(5):
        run = subprocess.run(command, capture_output=True, text=True, timeout=120,
                             env=environment)
        assert "partially initialized" not in run.stdout + run.stderr, run.stdout
        assert run.returncode == 2, run.stdout + run.stderr
        assert_one_clear_error(run.stdout + run.stderr, "Spark did not start")


# The delta-spark engine only: the embedded engine needs no JARs.
@pytest.mark.unit
def test_missing_delta_jars_say_how_to_get_them(project, monkeypatch, tmp_path):
    monkeypatch.setenv(jars.CACHE_ENV, str(tmp_path / "no-jars-yet"))
    root = project(MODELS, profile=profile_for("delta-spark"))
    code, output = build_output(root)
    assert code == 2
    assert_one_clear_error(output, "target 'local'", "Delta Lake JARs are not here",
                           "medallion jars", "delta_jars")
    empty = tmp_path / "empty"
    empty.mkdir()
    root = project(MODELS, profile=profile_for("delta-spark").replace(
        "engine: delta-spark", f"engine: delta-spark\n      delta_jars: {empty}"))
    code, output = build_output(root)
    assert code == 2 and "has no .jar files" in output


@pytest.mark.parametrize("jar,built_for", [
    ("delta-spark_2.13-4.0.0.jar", "Spark 4.0 with Scala 2.13"),
    ("delta-spark_2.12-3.2.0.jar", "Spark 3.5 with Scala 2.12"),
    ("delta-spark_4.2_2.13-4.5.0.jar", "Spark 4.2 with Scala 2.13"),
])
def test_delta_jars_for_another_spark_are_refused_before_spark_starts(project, tmp_path, jar,
                                                                      built_for):
    folder = tmp_path / "old-jars"
    folder.mkdir()
    (folder / jar).write_bytes(b"")  # the check reads the Maven file name only
    (folder / "delta-storage-4.0.0.jar").write_bytes(b"")
    root = project(MODELS, profile=profile_for("delta-spark").replace(
        "engine: delta-spark", f"engine: delta-spark\n      delta_jars: {folder}"))
    code, output = build_output(root)
    spark, scala = jars.installed_spark()
    assert code == 2
    assert_one_clear_error(output, "target 'local'", f"{jar} is built for {built_for}",
                           f"this Spark is {spark} with Scala {scala}", "medallion jars")


def test_the_fetched_delta_jars_match_this_spark(delta_jars):
    spark, scala = jars.installed_spark()
    names = sorted(p.name for p in jars.jar_files(delta_jars))
    assert [jars.built_for(Path(n)) for n in names if jars.built_for(Path(n))] == [
        ("delta-spark", scala, spark)]
    assert any(n.startswith("delta-storage-") for n in names)
    assert jars.fetch("delta") == delta_jars  # present: reused, nothing fetched again
    assert CliRunner().invoke(main, ["jars"]).output.strip() == str(delta_jars)


def test_a_missing_object_store_connector_is_one_line(project):
    # The delta-spark engine only: the embedded engine refuses object-store warehouses itself
    # (tests/test_locations.py). Google's store: S3's connector comes with medallion
    # (tests/test_s3.py), others are the target's to bring.
    root = project(MODELS, profile=profile_for("delta-spark").replace(
        "warehouse: warehouse", "warehouse: gs://no-bucket/lake"))
    code, output = build_output(root)
    assert code == 2
    assert_one_clear_error(output, "target 'local'", "no file system for gs://",
                           "gcs-connector", "Hadoop 3.")


@pytest.mark.unit
@pytest.mark.parametrize("engine", ["embedded", "delta-spark"])
def test_listing_and_log_replay_are_sized_to_the_target(engine, delta_jars):
    """Both engines list a batch of landing files in as many tasks as the target's shuffles
    (Spark's default is one task per path: 99 new files cost seconds of both cores), and in the
    driver on a local master; the delta-spark engine also rebuilds a table's state in as many
    tasks on a cluster (one on a local master). No Spark starts here."""
    from medallion_cli.core.project import Target
    from medallion_cli.engines.delta_spark.settings import spark_settings
    from medallion_cli.spark.conf import spark_conf

    def settings(conf, master="local[2]"):
        target = Target("t", engine, "/w", master, conf, 1, delta_jars=str(delta_jars))
        return {**spark_conf(target),
                **(spark_settings(target) if engine == "delta-spark" else {})}
    tasks = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
    past = "spark.sql.sources.parallelPartitionDiscovery.threshold"
    replay = "spark.databricks.delta.snapshotPartitions"
    own = settings({tasks: "10000"})
    assert settings({})[tasks] == "4"
    assert settings({"spark.sql.shuffle.partitions": "64"})[tasks] == "64"
    assert own[tasks] == "10000"  # the profile's own value wins
    assert settings({})[past] == "100000"  # a local session's driver lists them itself
    assert past not in settings({}, master="spark://127.0.0.1:7077")  # a cluster's tasks do
    if engine == "delta-spark":
        cluster = "spark://127.0.0.1:7077"
        assert settings({})[replay] == "1"  # locally one task: each compiles its code again
        assert settings({"spark.sql.shuffle.partitions": "64"})[replay] == "1"
        assert settings({}, master=cluster)[replay] == "4"
        assert settings({"spark.sql.shuffle.partitions": "64"}, master=cluster)[replay] == "64"
        assert settings({replay: "8"})[replay] == "8"  # the profile's own value wins


@pytest.mark.unit
def test_delta_on_s3_commits_through_the_conditional_log_store_unless_the_target_names_one(
        delta_jars, tmp_path, monkeypatch, caplog):
    """A delta-spark target that reaches S3 gets Medallion's log store (its JAR built once by
    javac, tests/test_s3.py runs it) for s3:// and s3a://; a local one does not need it; a
    target's own log store wins; with no javac, one warning and Delta's own store."""
    from medallion_cli.core.project import Target
    from medallion_cli.engines.delta_spark import log_store
    from medallion_cli.engines.delta_spark.settings import spark_settings

    built = tmp_path / "built.jar"
    monkeypatch.setattr(log_store, "built_jar", lambda storage: built)

    def settings(warehouse, conf=None):
        return spark_settings(Target("t", "delta-spark", warehouse, "local[2]", conf or {}, 1,
                                     delta_jars=str(delta_jars)))
    keys = ("spark.delta.logStore.s3.impl", "spark.delta.logStore.s3a.impl")
    on_s3 = settings("s3://lake/w")
    assert [on_s3[key] for key in keys] == [log_store.CLASS] * 2
    assert str(built) in on_s3["spark.jars"].split(",")
    assert not set(keys) & set(settings("/w")) and str(built) not in settings("/w")["spark.jars"]
    own = settings("s3://lake/w", {keys[0]: "com.example.Store"})
    assert keys[1] not in own and str(built) not in own["spark.jars"]  # the target's own store

    monkeypatch.undo()
    monkeypatch.setenv("MEDALLION_JARS_DIR", str(tmp_path / "jars"))  # none built here yet
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no javac
    with caplog.at_level("WARNING"):
        without_jdk = settings("s3://lake/w")
    assert not set(keys) & set(without_jdk)
    assert [record.getMessage() for record in caplog.records] == [
        "no Java compiler (javac) was found to build the S3 log store that refuses a commit "
        "over another build's; Delta's own S3 log store is used (install a JDK (not only a "
        "JRE), e.g. apt-get install openjdk-17-jdk-headless)"]


@pytest.mark.unit
def test_the_driver_uses_the_parallel_collector_unless_the_target_picks_one():
    """Both engines start the driver JVM with these options (no Spark starts here)."""
    from medallion_cli.spark.conf import LOG_CONFIG, driver_java_options

    assert driver_java_options("", local=False).split()[2:] == ["-XX:+UseParallelGC"]
    assert driver_java_options("-Xss4m -Xlog:gc*:file=gc.log", local=False).split()[2:] == [
        "-XX:+UseParallelGC", "-Xss4m", "-Xlog:gc*:file=gc.log"]
    # two collectors stop the JVM from starting: the target's choice is the only one
    for own in ("-XX:+UseG1GC", "-XX:+UseZGC -Xmx2g", "-XX:+UseShenandoahGC"):
        assert driver_java_options(own, local=False).split()[2:] == own.split()
    assert driver_java_options("", local=False).split()[:2] == [
        f"-Dlog4j2.configurationFile={LOG_CONFIG}", "-Duser.timezone=UTC"]
    # a target's own time zone is the only one
    options = driver_java_options("-Duser.timezone=Europe/Berlin", local=True).split()
    assert [o for o in options if "timezone" in o] == ["-Duser.timezone=Europe/Berlin"]


ZONE_OF_A_DRIVER = """
import json, signal, sys
from medallion_cli.engines import make_engine
from medallion_cli.core.project import Target
target = Target("t", "delta-spark", sys.argv[1], "local[1]",
                {"spark.driver.extraJavaOptions": "-Xshare:off"}, 1, delta_jars=sys.argv[2])
ctrl_c = signal.getsignal(signal.SIGINT)
spark = make_engine(target).spark
jvm = spark.sparkContext._jvm
delta_snapshot = getattr(getattr(jvm.org.apache.spark.sql.delta, "Snapshot$"), "MODULE$")
print(json.dumps([jvm.java.util.TimeZone.getDefault().getID(),
                  delta_snapshot.allFilesInCrcVerificationForceEnabled(spark._jsparkSession),
                  signal.getsignal(signal.SIGINT) is ctrl_c]))
"""


@pytest.mark.local_spark  # Spark's compile count is the driver JVM's, in this process
def test_query_stages_run_again_are_not_compiled_again(spark):
    """Both engines' drivers keep the code Spark compiled for 1000 query stages, not Spark's
    100: a watch whose every round runs more stages than that compiled each again when it came
    round. 150 stages of their own (each its own literal), run twice: the second round compiles
    next to nothing (126 with Spark's 100)."""
    compiled = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    stages = [spark.range(3).selectExpr(f"id * {n} + {n} as x") for n in range(150)]

    def compiles_to_run_them() -> int:
        before = compiled.getCount()
        for stage in stages:
            stage.collect()
        return compiled.getCount() - before

    # Spark's default, which the suite's profile changes (conftest.py: queries interpreted)
    interpreted = spark.conf.get("spark.sql.codegen.factoryMode")
    spark.conf.set("spark.sql.codegen.factoryMode", "FALLBACK")
    try:
        assert compiles_to_run_them() >= 150
        assert compiles_to_run_them() <= 5
    finally:
        spark.conf.set("spark.sql.codegen.factoryMode", interpreted)


@pytest.mark.unit
@pytest.mark.parametrize("engine", ["embedded", "delta-spark"])
def test_both_engines_keep_compiled_code_for_1000_stages_unless_the_profile_says(engine,
                                                                                 delta_jars):
    """The setting the test above runs under, in both engines' driver settings; the profile's
    own value wins. No Spark starts here."""
    from medallion_cli.core.project import Target
    from medallion_cli.engines.delta_spark.settings import spark_settings
    from medallion_cli.spark.conf import spark_conf

    def kept(conf):
        target = Target("t", engine, "/w", "local[2]", conf, 1, delta_jars=str(delta_jars))
        return {**spark_conf(target), **(spark_settings(target) if engine == "delta-spark"
                                         else {})}["spark.sql.codegen.cache.maxEntries"]
    assert kept({}) == "1000"
    assert kept({"spark.sql.codegen.cache.maxEntries": "50"}) == "50"


def test_the_driver_runs_in_utc_wherever_the_machine_is(tmp_path, delta_jars):
    """A driver started on a machine in Los Angeles runs in UTC, so Delta Lake for Spark does
    not replay a table's log at each commit to check its file list, as it does wherever the
    JVM's zone is not UTC. One engine: only Delta Lake for Spark reads the JVM's zone (the
    embedded engine's log is delta-rs's), and both engines start their driver with the same
    options (test_operating's class archive test sees them reach an embedded driver). A
    process of its own: the suite's session started long ago, in the machine's zone."""
    import json
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", ZONE_OF_A_DRIVER, str(tmp_path), str(delta_jars)],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path,
                         env={**os.environ, "TZ": "America/Los_Angeles"})
    assert out.returncode == 0, out.stderr[-3000:]
    # and Spark started on the main thread left Ctrl-C to medallion: pyspark's own handler
    # calls the JVM from inside the signal, which breaks py4j mid-call (`reentrant call`)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ["UTC", False, True]


@pytest.mark.unit
def test_a_local_driver_compiles_with_c1_unless_the_target_says_how():
    """A local session's JIT stops at C1, with the code cache Java gives C2 (C1 alone would
    get a fifth of it); a cluster's driver and a build of much new data keep the default; a
    target that names its own tiers or turns tiering off decides alone, and its own cache size
    wins, coming last (no Spark starts here; the options reaching a real JVM: test_operating's
    class archive test)."""
    from medallion_cli.engines.delta_spark.engine import DeltaSparkEngine
    from medallion_cli.engines.embedded.engine import EmbeddedEngine
    from medallion_cli.spark.conf import HOT_CODE_ONLY, driver_java_options

    c1 = ["-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m"]
    assert driver_java_options("", local=True).split()[2:] == ["-XX:+UseParallelGC", *c1]
    assert driver_java_options("-XX:ReservedCodeCacheSize=64m", local=True).split()[2:] == [
        "-XX:+UseParallelGC", *c1, "-XX:ReservedCodeCacheSize=64m"]
    remote = driver_java_options("-Xss4m", local=False)
    assert "-XX:TieredStopAtLevel=1" not in remote and "ReservedCodeCacheSize" not in remote
    for own in ("-XX:TieredStopAtLevel=4", "-XX:-TieredCompilation -Xss4m"):
        assert driver_java_options(own, local=True).split()[2:] == [
            "-XX:+UseParallelGC", *own.split()]
    own = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    assert driver_java_options(own, local=True).split()[2:] == own.split()
    # long queries over many rows (new_input.py) keep C2, whose code runs their hot loops 2.5x
    # faster: on the embedded engine for the hottest code alone (each engine's capability)
    embedded, delta_spark = (engine.capabilities.long_queries
                             for engine in (EmbeddedEngine, DeltaSparkEngine))
    assert driver_java_options("", local=True, long_queries=embedded).split()[2:] == [
        "-XX:+UseParallelGC", *HOT_CODE_ONLY]
    assert driver_java_options("", local=True, long_queries=delta_spark).split(
        )[2:] == ["-XX:+UseParallelGC"]
    assert driver_java_options("", local=False, long_queries=embedded).split()[2:] == [
        "-XX:+UseParallelGC"]


def test_a_process_whose_jvm_runs_claims_no_class_archive_for_another_kind(
        spark, tmp_path, monkeypatch):
    """Engine-independent (the archive is the driver JVM's, chosen before an engine runs): a
    start that reuses this process's JVM (the suite's session, as the daemon's or serve's)
    launches none, so it must not hold the recording claim of the target's kind, which would
    leave every other command of that kind without an archive until this process ends."""
    from conftest import target_for

    from medallion_cli.spark import class_archive
    from medallion_cli.spark.start import start_spark

    monkeypatch.setenv(class_archive.CACHE_ENV, str(tmp_path))
    held = list(class_archive._claims)
    start_spark(target_for("other_kind", "embedded", str(tmp_path / "warehouse")))
    assert class_archive._claims == held
    assert not list(tmp_path.glob("*.claim"))


HOLDS_MANY_FILES = """
import os, resource, sys
from medallion_cli import commands
root = sys.argv[1]
commands.build(commands.Invocation(project_dir=root, select=("numbers",)), "build")  # Spark runs
wanted = 1100  # past select()'s limit of 1024, as a long --watch or serve may be
resource.setrlimit(resource.RLIMIT_NOFILE, (max(wanted + 100, resource.getrlimit(
    resource.RLIMIT_NOFILE)[0]), resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
held = [os.open(os.devnull, os.O_RDONLY) for _ in range(wanted)]
results = commands.build(commands.Invocation(project_dir=root), "build")
print(sorted((r.name, r.status) for r in results))
"""


@pytest.mark.one_engine("py4j's callback server is the driver's, the same for either engine")
def test_a_stream_started_by_a_process_holding_many_files_is_not_left_waiting(project,
                                                                              tmp_path):
    """A streaming model's batches are Python functions Spark calls back through py4j's
    callback server. Started when first needed by a process holding over 1024 files, its
    accept loop (select()) died at once, and the query waited for ever; it starts with Spark."""
    import subprocess
    import sys

    root = project({
        "models/numbers.sql": "{{ config(materialized='table') }}select 1 as id",
        "models/sources.yml": "sources:\n  - name: landing\n    path: landing\n    tables:\n"
                              "      - {name: events, format: json, schema: 'id bigint'}\n",
        "models/events.sql": "{{ config(materialized='streaming') }}\n"
                             "select * from {{ source('landing', 'events') }}"})
    (root / "landing/events").mkdir(parents=True)
    (root / "landing/events/1.json").write_text('{"id": 1}\n')
    try:
        run = subprocess.run([sys.executable, "-c", HOLDS_MANY_FILES, str(root)],
                             capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail("the streaming model's query waited for ever for its first batch")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "('events', 'success')" in run.stdout, run.stdout + run.stderr[-3000:]
