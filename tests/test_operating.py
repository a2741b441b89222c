"""What an operator sees: secrets kept off command lines and out of artifacts, loopback listeners,
one-line errors with Spark's log in target/spark.log, edited streaming models flagged, YAML typos
caught, and nulls, integers and commit counts printed as they are."""

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DELTA_SPARK_IN_SLOW_TIER, read_delta
from helpers import BATCH_1, BATCH_2, MODELS, land

from medallion_cli import commands
from medallion_cli.cli.group import main
from medallion_cli.commands import maintain as maintenance
from medallion_cli.core.errors import ProjectError
from medallion_cli.load.project import load_project
from medallion_cli.run.scheduler import NOT_STARTED, STOPPED

pytestmark = DELTA_SPARK_IN_SLOW_TIER


def test_secret_settings_stay_off_the_command_line_and_spark_binds_to_loopback(tmp_path):
    """One engine only: both engines start Spark with the same start_spark(), and a fresh JVM
    (a subprocess) is what has a command line to look at."""
    script = textwrap.dedent(f"""
        import json
        from medallion_cli.spark.start import start_spark
        from medallion_cli.core.project import Target
        target = Target("t", "embedded", {str(tmp_path)!r}, "local[1]", {{
            "spark.hadoop.fs.s3a.secret.key": "hunter2-secret",
            "spark.sql.shuffle.partitions": "3"}}, 1)
        spark = start_spark(target)
        jvm = spark.sparkContext._jvm
        print(json.dumps({{
            "command": jvm.System.getProperty("sun.java.command"),
            "hadoop": spark.sparkContext._jsc.hadoopConfiguration().get("fs.s3a.secret.key"),
            "shuffle": spark.conf.get("spark.sql.shuffle.partitions"),
            "host": spark.conf.get("spark.driver.host"),
            "bind": spark.conf.get("spark.driver.bindAddress"),
        }}))
        spark.stop()
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert "hunter2" not in seen["command"] and "spark.sql.shuffle.partitions=3" in seen["command"]
    assert seen["hadoop"] == "hunter2-secret"  # where Hadoop's file systems read it
    assert seen["shuffle"] == "3"
    assert (seen["host"], seen["bind"]) == ("127.0.0.1", "127.0.0.1")


@pytest.mark.one_engine("masking is done in rendering and artifacts, not by an engine")
def test_secret_env_vars_are_masked_in_artifacts_but_used(project, build, monkeypatch):
    monkeypatch.setenv("MEDALLION_SECRET_TOKEN", "s3cr3t-value")
    monkeypatch.setenv("PLAIN_VALUE", "plain-value")
    root = project({"models/a.sql": "select '{{ env_var(\"MEDALLION_SECRET_TOKEN\") }}' as token, "
                                    "'{{ env_var(\"PLAIN_VALUE\") }}' as plain"})
    assert build(root)["a"].status == "success"
    assert read_delta(root / "warehouse/models/a") == [
        {"token": "s3cr3t-value", "plain": "plain-value"}]
    written = "".join(p.read_text() for p in (root / "target").rglob("*")
                      if p.is_file() and p.suffix in (".sql", ".json"))
    assert "s3cr3t-value" not in written and "*****" in written and "plain-value" in written
    compiled = CliRunner().invoke(main, ["compile", "-s", "a", "--project-dir", str(root)])
    assert "s3cr3t-value" not in compiled.output and "*****" in compiled.output


def test_runtime_errors_are_one_line_and_spark_logs_to_a_file(project, engine_name):
    root = project({**MODELS, "models/silver/typed.sql": """\
        {{ config(materialized='streaming') }}
        select cast(status as int) as status_code from {{ ref('bronze_orders') }}
    """})
    land(root, "001.json", BATCH_1)
    command = subprocess.Popen([sys.executable, "-m", "medallion_cli.cli", "build",
                                "--project-dir", str(root)], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
    code = command.wait(timeout=600)
    # Once the command has ended, no process it started (the JVM shuts down for a while
    # after it) holds its output: a reader of it is done when the command is.
    os.set_blocking(command.stdout.fileno(), False)
    said = b""
    try:
        while chunk := os.read(command.stdout.fileno(), 65536):  # b"": no writer is left
            said += chunk
    except BlockingIOError:
        pytest.fail("a process the command started still holds its output")
    command.stdout.close()
    text = said.decode()
    assert code == 1, text
    lines = text.splitlines()
    error = lines[next(i for i, line in enumerate(lines) if "ERROR" in line and "typed" in line)
                  + 1].strip()
    assert error.startswith("models/silver/typed.sql: [CAST_INVALID_INPUT]"), text
    assert "'placed'" in error, text
    assert "Traceback" not in text and "\tat " not in text and "WARN" not in text
    assert len(lines) < 20, text
    assert (root / "target/spark.log").stat().st_size > 0


@pytest.mark.unit
def test_a_java_error_a_foreach_batch_call_raises_is_said_by_its_class():
    """Engine-independent (the text of an error, no engine runs): a Delta error without a
    Python class of its own (here delta-spark's MERGE refusing its source, inside a streaming
    model's batch) reaches Python as py4j's wrapper line over the Java exception; the user's
    line is the exception's error class and message, not the wrapper."""
    from medallion_cli.core.error_text import error_message

    raised = Exception(
        "An error occurred while calling o533.sql.\n"
        ": org.apache.spark.sql.delta.DeltaRuntimeException: "
        "[DELTA_MERGE_SOURCE_CACHED_DURING_EXECUTION] The MERGE operation failed because (part "
        "of) the source plan was cached while the MERGE operation was running.\n"
        "\tat org.apache.spark.sql.delta.DeltaErrorsBase.mergeConcurrentOperationCachedSource"
        "Exception(DeltaErrors.scala:1629)\n"
        "\tSuppressed: org.apache.spark.util.Utils$OriginalTryStackTraceException: Full "
        "stacktrace of original doTryWithCallerStacktrace caller\n")
    assert error_message(raised) == (
        "[DELTA_MERGE_SOURCE_CACHED_DURING_EXECUTION] The MERGE operation failed because (part "
        "of) the source plan was cached while the MERGE operation was running.")


def test_a_java_error_without_an_error_class_is_said_by_its_message(spark, tmp_path):
    """Engine-independent (a Hadoop call through py4j, no Delta): a Java exception with neither
    an error class nor a Python class of its own (here Hadoop's FileNotFoundException) is said
    by its message, not by py4j's wrapper line, which names only the Java object called."""
    from medallion_cli.core.error_text import error_message

    missing = spark._jvm.org.apache.hadoop.fs.Path(f"file:{tmp_path}/missing.json")
    with pytest.raises(Exception, match="An error occurred while calling") as raised:
        missing.getFileSystem(spark._jsc.hadoopConfiguration()).open(missing)
    assert error_message(raised.value) == f"File file:{tmp_path}/missing.json does not exist"


def test_an_edited_streaming_model_is_flagged_with_what_to_run(project, build):
    root = project(MODELS)
    land(root, "001.json", BATCH_1)
    build(root)
    silver = root / "models/silver/silver_orders.sql"
    silver.write_text(silver.read_text().replace("select order_id, status",
                                                 "select order_id, upper(status) as status"))
    land(root, "002.json", BATCH_2)
    result = build(root)["silver_orders"]
    assert result.status == "warn"
    assert "its SQL or config changed since its table was last written" in result.message
    assert "medallion build --full-refresh -s silver_orders+" in result.message
    results = json.loads((root / "target/run_results.json").read_text())["results"]
    assert next(r for r in results if r["name"] == "silver_orders")["status"] == "warn"
    assert build(root, full_refresh=True, select=("silver_orders+",))[
        "silver_orders"].status == "success"
    assert build(root)["silver_orders"].status == "up_to_date"


def test_an_edit_that_adds_columns_fails_at_once_not_at_the_next_file(project, build):
    """An edited streaming model that now returns columns its table lacks (on_schema_change
    fail, silver's default) fails when the edit is first built, saying what to do, rather than
    warning that the edit applies from now on and then failing on the next landed file."""
    root = project(MODELS)
    land(root, "001.json", BATCH_1)
    build(root)
    silver = root / "models/silver/silver_orders.sql"
    silver.write_text(silver.read_text().replace("select order_id, status",
                                                 "select order_id, status, seq * 10 as rank"))
    result = build(root)["silver_orders"]  # nothing new landed
    assert result.status == "error", result.message
    assert result.message.startswith("models/silver/silver_orders.sql: the model now returns new "
                                     "columns rank that its table lacks"), result.message
    assert "on_schema_change='append_new_columns'" in result.message
    assert "--full-refresh -s silver_orders+" in result.message
    silver.write_text(silver.read_text().replace(
        "delete_when=", "on_schema_change='append_new_columns', delete_when="))
    land(root, "002.json", BATCH_2)
    result = build(root)["silver_orders"]
    assert result.status == "warn" and "from now on" in result.message
    ranks = {r["order_id"]: r["rank"] for r in read_delta(root / "warehouse/silver/silver_orders")}
    assert (ranks[1], ranks[5]) == (30, None)  # new rows have it; rows written before do not


@pytest.mark.unit
@pytest.mark.parametrize("yml, said, line", [
    ("models:\n  - name: a\n    colums: []\n", "models[a]: unknown key 'colums'. did you mean "
     "'columns'?", 3),
    ("models:\n  - name: a\n    columns:\n      - name: id\n        tets: [unique]\n",
     "models[a].columns[id]: unknown key 'tets'. did you mean 'tests'", 5),
    ("models:\n  - name: a\n    descripton: x\n", "unknown key 'descripton'. did you mean "
     "'description'?", 3),
])
def test_unknown_yaml_keys_are_errors_with_file_line_and_closest_key(project, yml, said, line):
    root = project({"models/a.sql": "select 1 as id", "models/props.yml": yml})
    with pytest.raises(ProjectError) as error:
        load_project(root)
    assert said in str(error.value)
    assert (error.value.path, error.value.line) == ("models/props.yml", line)


@pytest.mark.unit
def test_a_second_entry_for_a_model_is_an_error_naming_both_files(project):
    root = project({"models/a.sql": "select 1 as id",
                    "models/one.yml": "models:\n  - name: a\n    description: first\n",
                    "models/two.yml": "models:\n  - name: a\n    columns: [{name: id}]\n"})
    with pytest.raises(ProjectError) as error:
        load_project(root)
    text = str(error.value)
    assert "'a'" in text and "models/one.yml" in text and "models/two.yml" in text


def test_show_prints_nulls_as_null_and_integers_as_integers(project, build):
    root = project({"models/a.sql": "select * from values (1, cast(null as bigint), "
                                    "cast(null as timestamp)), (2, 1008, null) as t(id, n, at)"})
    build(root)
    result = CliRunner().invoke(main, ["show", "a", "--project-dir", str(root)])
    assert result.exit_code == 0, result.output
    assert "NaN" not in result.output and "NaT" not in result.output
    assert "1008.0" not in result.output and "1008" in result.output
    assert "null" in result.output


def test_history_counts_what_a_merge_inserted_updated_and_deleted(project, build):
    root = project(MODELS)
    land(root, "001.json", BATCH_1)
    build(root)
    land(root, "002.json", BATCH_2)  # 2 updates, 1 delete, 1 insert
    build(root)
    inv = commands.Invocation(project_dir=str(root))
    last = maintenance.history(inv, "silver_orders")[0]
    assert last.operation == "MERGE"
    assert {k: last.rows.get(k) for k in ("inserted", "updated", "deleted")} == {
        "inserted": 1, "updated": 2, "deleted": 1}
    result = CliRunner().invoke(main, ["history", "silver_orders", "--project-dir", str(root)])
    assert "MERGE" in result.output and "inserted=1 updated=2 deleted=1" in result.output, \
        result.output


@pytest.mark.one_engine("a unit test runs the SQL on given rows: no table is read or written")
def test_unit_test_differences_say_expected_and_actual(project, engine_name):
    root = project({"models/a.sql": "select id, id * 2 as doubled from {{ ref('b') }}",
                    "models/b.sql": "select 1 as id",
                    "tests/unit/a.yml": textwrap.dedent("""\
                        unit_tests:
                          - name: doubles
                            model: a
                            given:
                              - input: ref('b')
                                rows: [{id: 2}]
                            expect:
                              rows: [{id: 2, doubled: 5}]
                    """)})
    result = commands.unit_test(commands.Invocation(project_dir=str(root)))
    assert result[0].status == "error"
    assert "expected" in result[0].message and "actual" in result[0].message
    assert "df1" not in result[0].message and "df2" not in result[0].message


def target_script(cwd: Path, java_options: str, then: str) -> str:
    return textwrap.dedent(f"""
        import json
        from medallion_cli.core.project import Target
        target = Target("t", "embedded", {str(cwd)!r}, "local[1]",
                        {{"spark.driver.extraJavaOptions": {java_options!r}}}, 1)
    """) + textwrap.dedent(then)


def run_script(script: str, cwd: Path, archives: Path) -> str:
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         input="", timeout=600, cwd=cwd,
                         env={**os.environ, "MEDALLION_CLASS_ARCHIVE_DIR": str(archives)})
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


def driver_jvm_arguments(cwd: Path, archives: Path, java_options: str = "") -> list[str]:
    """The Java options of a driver JVM start_spark started in a fresh process (which exits
    without stopping Spark, as a command does)."""
    return json.loads(run_script(target_script(cwd, java_options, """
        from medallion_cli.spark.start import start_spark
        jvm = start_spark(target).sparkContext._jvm
        print(json.dumps(list(
            jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())))
    """), cwd, archives))


CHOOSE_ARCHIVE = """
import sys
from medallion_cli.spark.class_archive import class_archive
from medallion_cli.spark.conf import spark_conf
archive = class_archive(spark_conf(target))
print("none" if archive is None else "record" if archive.recording else "map", flush=True)
sys.stdin.read()  # a command's life: its claim lasts until it ends
"""


def archive_choice(cwd: Path, archives: Path, java_options: str = "") -> str:
    """What the next driver JVM of that target would be given, with no JVM started: an archive
    to record or to map, or none."""
    return run_script(target_script(cwd, java_options, CHOOSE_ARCHIVE), cwd, archives)


def test_one_command_of_a_kind_records_its_class_archive_at_a_time(tmp_path):
    """Engine-independent (which archive a JVM gets, decided before any JVM starts): builds
    killed one after another must not each record one more archive as their JVMs exit."""
    env = {**os.environ, "MEDALLION_CLASS_ARCHIVE_DIR": str(tmp_path)}

    def command():
        return subprocess.Popen([sys.executable, "-c", target_script(tmp_path, "", CHOOSE_ARCHIVE)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def choice(process, end=True):
        said = process.stdout.readline().strip()
        if end:
            process.communicate("", timeout=60)
        return said

    recording = command()
    assert choice(recording, end=False) == "record"
    assert choice(command()) == "none"  # while it runs
    recording.communicate("", timeout=60)
    assert choice(command()) == "none"  # a minute for its JVM to write the recording
    claim, = tmp_path.glob("*.claim")
    long_ago = time.time() - 120
    os.utime(claim, (long_ago, long_ago))
    young = claim.with_name(f"{claim.stem}.1.recording")
    young.write_bytes(b"being written")
    assert choice(command()) == "none"  # a killed command's JVM is writing its recording
    young.unlink()  # (a settled one is taken or removed: the test below)
    assert choice(command()) == "record"


@pytest.mark.unit
def test_each_installation_of_pyspark_has_an_archive_of_its_own(tmp_path, monkeypatch):
    """A JVM ignores an archive recorded with another class path: a second virtual environment
    (another project, a fresh clone) keyed like the first never used one, nor recorded its own."""
    from medallion_cli.spark import class_archive as archives

    monkeypatch.setenv(archives.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(archives, "java_binary", lambda: Path(sys.executable))  # no Java needed
    first = archives.class_archive({})
    monkeypatch.setattr(archives, "pyspark_home", lambda: "/elsewhere/site-packages/pyspark")
    second = archives.class_archive({})
    assert first is not None and second is not None
    assert first.path != second.path


def wait_for_archive(archives: Path) -> list[Path]:
    """The archive once the keeper has put it in place (and removed the recording)."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if list(archives.glob("*.jsa")) and not list(archives.glob("*.recording")):
            kept = list(archives.glob("*.jsa"))
            assert kept[0].stat().st_size > 10**6, kept
            return kept
        time.sleep(0.5)
    raise AssertionError(f"no archive in {archives}: {list(archives.iterdir())}")


@pytest.mark.slow("four fresh JVMs for how fast a JVM starts; every process the default tier "
                  "starts maps the archive as users' commands do")
def test_the_driver_jvm_records_its_classes_once_and_maps_them_from_then_on(tmp_path):
    """One engine only: both engines start the driver JVM with the same start_spark() (the
    archive's key includes the Delta JARs, so each engine records its own). One JVM records an
    archive here: what later starts are given is asked of class_archive, with no JVM (a
    recording took a minute of a slow machine; this test once made three)."""
    archives = tmp_path / "classes"
    first = driver_jvm_arguments(tmp_path, archives)
    assert any(a.startswith("-XX:ArchiveClassesAtExit=") for a in first), first
    # a local driver's JIT and its code cache, and its time zone (test_engine_start)
    assert {"-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m",
            "-Duser.timezone=UTC"} <= set(first)
    # a keeper process puts the archive in place once the JVM has exited (the command does not
    # wait for it to record: seconds, minutes under load; not asserted, as a loaded machine can
    # let the keeper finish before the test looks, which made this test fail once)
    kept = wait_for_archive(archives)
    assert f"-XX:SharedArchiveFile={kept[0]}" in driver_jvm_arguments(tmp_path, archives)
    whole = kept[0].read_bytes()

    # An archive a JVM cannot map (cut short: a JVM given one crashes) is removed and Spark
    # starts without it; the next start records a new one.
    kept[0].chmod(0o644)
    os.truncate(kept[0], 4096)
    third = driver_jvm_arguments(tmp_path, archives)
    assert not any("Archive" in a for a in third), third
    assert not kept[0].exists()
    assert archive_choice(tmp_path, archives) == "record"

    # A command killed while its JVM recorded leaves the recording to the JVM: once settled, a
    # whole one becomes the archive and one cut short is removed.
    settled = time.time() - 120
    recording = kept[0].with_name(f"{kept[0].stem}.1.recording")
    recording.write_bytes(whole)
    os.utime(recording, (settled, settled))
    assert f"-XX:SharedArchiveFile={kept[0]}" in driver_jvm_arguments(tmp_path, archives)
    assert not recording.exists() and kept[0].read_bytes() == whole
    cut = kept[0].rename(recording)
    cut.chmod(0o644)
    os.truncate(cut, 10**6)
    os.utime(cut, (settled, settled))
    assert archive_choice(tmp_path, archives) == "record"
    assert not cut.exists() and not kept[0].exists()

    # a target that says anything about class sharing decides alone
    assert archive_choice(tmp_path, archives, "-Xshare:off") == "none"


def test_ctrl_c_stops_a_build_with_a_summary_of_what_was_committed(project, engine_name):
    """SIGINT while a node runs: its Spark jobs are cancelled, nothing more starts, and the
    command ends (exit 130) saying what was committed and what is left for `retry`."""
    import signal

    root = project({"models/a.sql": "select 1 as id",
                    # after `a`: a query on every core would hold up a's write
                    "models/slow.sql": "select count(*) as n from range(100000000000), "
                                       "{{ ref('a') }}",
                    "models/after_slow.sql": "select n from {{ ref('slow') }}"})
    command = [str(Path(sys.executable).parent / "medallion"), "build", "--project-dir",
               str(root), "--threads", "2"]
    # PYTHONFAULTHANDLER: a build that does not stop is made to say where its threads are
    build = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    lines = []
    try:
        for line in build.stdout:
            lines.append(line)
            if " model a " in line:
                break
        time.sleep(2)  # slow's query runs
        build.send_signal(signal.SIGINT)
        rest, _ = build.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        signals = [line for line in Path(f"/proc/{build.pid}/status").read_text().splitlines()
                   if line.startswith("Sig")]
        build.send_signal(signal.SIGABRT)
        pytest.fail(f"the build did not stop: {signals}\n{''.join(lines)}"
                    f"{build.communicate(timeout=30)[0]}")
    finally:
        build.kill()  # never left running a query without end, whatever failed
    output = "".join(lines) + rest
    assert build.returncode == 130, output
    assert "Stopped by Ctrl-C. 1 success, 0 up to date, 0 warn, 1 error, 1 skipped" in output
    assert "  committed: a v0\n" in output
    assert "2 node(s) stopped or not started, their tables as they were: medallion retry" in output
    assert "Traceback" not in output
    statuses = {r["name"]: (r["status"], r["message"]) for r in json.loads(
        (root / "target/run_results.json").read_text())["results"]}
    assert statuses == {"a": ("success", ""), "slow": ("error", STOPPED),
                        "after_slow": ("skipped", NOT_STARTED)}
    assert not list((root / "warehouse/models").glob("slow/_delta_log/*.json"))  # no version


@pytest.mark.unit
def test_ctrl_c_while_a_result_is_said_still_cancels_what_runs():
    """Ctrl-C lands wherever the main thread is; when it was saying a finished node's result
    (printing, the event log), the run stopped there, leaving a running query uncancelled: the
    build waited on it for ever (the full suite saw it). Engine-free: the runner's loop."""
    import signal
    import threading

    from medallion_cli.run.runner import NodeResult
    from medallion_cli.run.scheduler import execute

    cancelled = threading.Event()

    def run(name):
        if name == "slow":  # a Spark job that runs until it is cancelled
            return NodeResult(name, "model", "table",
                              "error" if cancelled.wait(20) else "success")
        return NodeResult(name, "model", "table", "success")

    def said(result):
        if result.name == "a":
            signal.raise_signal(signal.SIGINT)  # as the user presses Ctrl-C

    try:
        results = execute(["a", "slow"], {}, run, {"a": ("model", "table"),
                                                   "slow": ("model", "table")},
                          threads=2, on_result=said, on_interrupt=cancelled.set)
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C left the run with its query running")
    assert cancelled.is_set()
    assert [(r.name, r.status) for r in results] == [("a", "success"), ("slow", "error")]
