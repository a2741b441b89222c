"""Nothing lost, nothing doubled: one writer per warehouse, commits that lost a race add nothing,
a killed refresh is finished, names cannot escape their folder, dead staging is removed."""

import os
import subprocess
import sys
import time

import pytest
from conftest import DELTA_SPARK_IN_SLOW_TIER, read_delta
from helpers import BATCH_1, BATCH_2, MODELS, expected_state, land, medallion, silver

from medallion_cli import commands
from medallion_cli.core.error_text import CONCURRENT_COMMIT, error_message
from medallion_cli.core.errors import MedallionError
from medallion_cli.core.project import Target
from medallion_cli.engines import make_engine

pytestmark = DELTA_SPARK_IN_SLOW_TIER

WATCHED = "name: w\nprofile: test\nmodels:\n  trigger: 1 second\n"


def test_a_second_build_is_refused_while_one_holds_the_warehouse(project, build, engine_name):
    root = project(MODELS, project_yml=WATCHED)
    land(root, "001.json", BATCH_1)
    watching = medallion(root, "build", "--watch", wait=False)
    try:
        lock = root / "warehouse/_medallion/lock"
        deadline = time.monotonic() + 120
        while not (lock.exists() and lock.read_text()):
            assert watching.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        second = medallion(root, "build")
        assert second.returncode == 2, second.stdout + second.stderr
        error = second.stderr.strip().splitlines()
        assert error[0].startswith("Error: ") and "`medallion build --watch` (pid " \
            f"{watching.pid} on " in error[0] and "is writing this warehouse" in error[0]
        assert "wait for it to finish, or stop it" in second.stderr
        waited = medallion(root, "build", "--wait-for-lock", "1")  # a scheduled run's choice
        assert waited.returncode == 2 and "(waited 1 s for it)" in waited.stderr
    finally:
        watching.terminate()
        watching.wait(timeout=120)
    again = build(root)  # the lock went with the process (in this one: a JVM start fewer)
    assert not [r.message for r in again.values() if r.failed]
    assert len(read_delta(root / "warehouse/bronze/bronze_orders")) == len(BATCH_1)


@pytest.mark.unit
def test_a_command_told_to_wait_for_the_lock_takes_it_once_free_or_says_how_long_it_waited(
        tmp_path):
    import threading

    from medallion_cli.core.errors import LockHeld
    from medallion_cli.run.locking import warehouse_lock

    warehouse = str(tmp_path / "warehouse")
    with warehouse_lock(warehouse, "build --watch"):
        with pytest.raises(LockHeld, match=r"is writing this warehouse.*\(waited 0.6 s for it\)"):
            with warehouse_lock(warehouse, "build", wait=0.6):
                pass
    holding = warehouse_lock(warehouse, "build --watch")
    holding.__enter__()
    threading.Timer(0.5, holding.__exit__, (None, None, None)).start()  # done meanwhile
    began = time.monotonic()
    with warehouse_lock(warehouse, "build", wait=60):
        assert time.monotonic() - began >= 0.4  # it waited, then took the freed lock


def committing_the_same_batch_meanwhile(spark, path, engine_name):
    """Rows whose computation commits app transaction ('app', 0) to the table first, with
    delta-rs, from Spark's Python worker: another build's commit, landing mid-write."""
    from pyspark.sql import functions as F

    @F.udf("long")
    def sneak(value):
        import pyarrow as pa
        from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

        if DeltaTable(path).transaction_version("app") is None:
            write_deltalake(path, pa.table({"id": pa.array([value], pa.int64())}), mode="append",
                            commit_properties=CommitProperties(
                                app_transactions=[Transaction("app", 0)]))
        return value

    return spark.range(1).select(sneak("id").alias("id"))


def test_a_build_whose_output_is_closed_stops_at_once_and_lets_the_warehouse_go(project,
                                                                                build):
    """`medallion build 2>&1 | head -1`: once the reader has left, the build stops as on
    Ctrl-C (nothing half-written), exits 141 as a process SIGPIPE ends, and holds no lock (a
    thread left writing, or waiting for a node at its gate, once held it for 10 minutes)."""
    root = project(MODELS)
    land(root, "001.json", BATCH_1)
    running = medallion(root, "build", wait=False)  # stderr into the same pipe
    assert running.stdout.readline().startswith("Running ")
    running.stdout.close()
    assert running.wait(timeout=300) == 141
    finished = build(root)  # the lock is free; what the stopped build left is finished
    assert not [r.message for r in finished.values() if r.failed]
    assert silver(root) == expected_state(BATCH_1)


def test_a_commit_whose_app_transaction_was_taken_meanwhile_adds_nothing(
        spark, tmp_path, engine_name):
    engine = make_engine(Target("t", engine_name, str(tmp_path / "wh"), "local[2]", {}, 1))
    path = str(tmp_path / "wh/t")
    engine.write(spark.range(0).select("id"), path, "overwrite")
    rows = committing_the_same_batch_meanwhile(spark, path, engine_name)
    with pytest.raises(Exception) as lost:
        engine.write(rows, path, "append", txn=("app", 0))
    assert CONCURRENT_COMMIT in error_message(lost.value)
    assert [r["id"] for r in read_delta(path)] == [0]  # the other build's row, once
    assert engine.committed_version(path, "app") == 0


def test_a_killed_full_refresh_is_finished_by_the_next_build(project, build):
    root = project(MODELS)
    land(root, "001.json", BATCH_1)
    land(root, "002.json", BATCH_2)
    assert not [r.message for r in build(root).values() if r.failed]  # in this process: faster
    bronze = root / "warehouse/bronze/bronze_orders"
    assert len(read_delta(bronze)) == 9
    killed = medallion(root, "build", "--full-refresh", crash_at="bronze_orders:batch_start:0")
    assert killed.returncode < 0
    plain = build(root)  # in this process: a JVM start fewer
    assert not [r.message for r in plain.values() if r.failed]
    assert "finished a refresh (--full-refresh) that an earlier build did not complete" \
        in plain["bronze_orders"].message
    assert len(read_delta(bronze)) == 9  # replaced, not appended to: 9, not 18
    assert not (root / "warehouse/_checkpoints/bronze/bronze_orders.refreshing").exists()


def test_a_refresh_says_what_its_streaming_readers_need(project, build):
    root = project(MODELS)
    land(root, "001.json", BATCH_1)
    build(root)
    result = build(root, select=("bronze_orders",), full_refresh=True)["bronze_orders"]
    assert "streaming models that read it (silver_orders) must start over too: medallion " \
        "build --full-refresh -s silver_orders (or select bronze_orders+)" in result.message
    both = build(root, select=("bronze_orders+",), full_refresh=True)
    assert "must start over" not in both["bronze_orders"].message
    assert both["silver_orders"].status == "success"


@pytest.mark.parametrize("engine_name", ["embedded"])  # refused while loading: no engine runs
@pytest.mark.parametrize("file", ["models/....sql", "models/bronze/2fast.sql",
                                  "models/my-model.sql"])
def test_only_identifier_names(project, file, engine_name):
    root = project({file: "select 1 as id"})
    with pytest.raises(MedallionError) as error:
        commands.invocation.load(commands.Invocation(project_dir=str(root)))
    assert str(error.value).startswith(f"{file}: the model name ")
    assert "letters, digits and underscores" in str(error.value)


# The embedded engine only: it stages Spark's output as Parquet before delta-rs commits it.
@pytest.mark.parametrize("engine_name", ["embedded"])
def test_staging_left_by_a_killed_build_is_removed(project, build, engine_name):
    root = project({"models/a.sql": "select 1 as id"})
    staging = root / "warehouse/_staging"
    dead, alive = staging / "999999999-0123abcd", staging / f"{os.getpid()}-4567ef"
    for folder in (dead, alive):
        folder.mkdir(parents=True)
        (folder / "part-0.parquet").write_bytes(b"PAR1")
    assert build(root)["a"].status == "success"
    assert not dead.exists() and alive.exists()


def test_a_state_file_is_written_whole_or_not_at_all(tmp_path):
    # Both engines write their local state files (checkpoint notes, test verdicts) with this
    # one function, and no Spark is involved: one run covers both. A --watch killed while a
    # query started left an empty medallion_reader.json, and every later build failed to parse
    # it; now a killed writer leaves the file as it was.
    state = tmp_path / "checkpoint/medallion_reader.json"
    state.parent.mkdir()
    state.write_text('{"reader": "delta-source"}')
    # a writer that stops halfway through its text, killed there
    writer = subprocess.Popen([sys.executable, "-c", """if True:
        import pathlib, sys, time
        from medallion_cli.storage.files import write_local_text

        def halfway(path, text):
            with open(path, "w") as out:
                out.write(text[:len(text) // 2])
                out.flush()
                time.sleep(120)

        pathlib.Path.write_text = halfway
        write_local_text(sys.argv[1], '{"reader": "commit-log"}')
        """, str(state)])
    try:
        deadline = time.monotonic() + 60
        while not any(p.stat().st_size for p in state.parent.glob("*.tmp")):
            assert writer.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        writer.kill()
        writer.wait()
    assert state.read_text() == '{"reader": "delta-source"}'


@pytest.mark.unit
@pytest.mark.parametrize("said, commit", [
    ("py4j.protocol.Py4JJavaError: An error occurred while calling o385.collectToPython.\n"
     ": org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while "
     "reading file s3a://lake/wh/t/_delta_log/00000000000000000001.json.  SQLSTATE: KD001",
     "s3a://lake/wh/t/_delta_log/00000000000000000001.json"),
    ("[MALFORMED_RECORD_IN_PARSING.WITHOUT_SUGGESTION] Malformed records are detected in "
     "record parsing: [null,null]. (Unexpected end-of-input: expected close marker for Object "
     '(start marker at [Source: (byte[])"{"add":{"path":"part-00000-21.snappy.p"; line: 1, '
     "column: 8]))", "one of its _delta_log/*.json files")])
def test_a_damaged_log_met_by_delta_for_spark_where_delta_rs_cannot_look_first_is_one_line(
        said, commit):
    """On object storage the delta-spark engine's reads go to Delta Lake for Spark, whose
    error (as captured) names no table: the line says it is a damaged commit and how to
    recover (a local table is checked by delta-rs first: test_engine_contract.py)."""
    from medallion_cli.core.error_text import DAMAGED_LOG_FIX, error_message

    assert error_message(RuntimeError(said)) == (
        f"the Delta log of a table this model reads or writes cannot be read: {commit} is "
        f"damaged or was not written whole. To recover, {DAMAGED_LOG_FIX}")
    assert error_message(RuntimeError(  # a data file that cannot be read is not the log
        "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
        "s3a://lake/wh/t/part-0.parquet.")).startswith("[FAILED_READ_FILE.NO_HINT]")


@pytest.mark.unit
def test_a_damaged_delta_log_is_one_line_naming_the_commit_and_how_to_recover(tmp_path):
    """A commit file truncated (a write cut short, a bad copy): delta-rs's 'Kernel error: Json
    error' named neither the table nor the file. The line names both, and the remedy it gives
    (moving the newest commit out) brings the table back as of the commit before."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from medallion_cli.engines.deltars import open_table

    table = tmp_path / "orders"
    write_deltalake(str(table), pa.table({"id": [1]}))
    write_deltalake(str(table), pa.table({"id": [2]}), mode="append")
    commit = table / "_delta_log/00000000000000000001.json"
    commit.write_text(commit.read_text()[:40])
    with pytest.raises(MedallionError) as damaged:
        open_table(str(table))
    said = str(damaged.value)
    assert said.startswith(f"{table}: the Delta log of this table cannot be read (Kernel error: "
                           f"Json error: "), said
    assert f"{commit} is damaged or was not written whole" in said and "\n  hint: " in said
    assert "--full-refresh" in said and "Traceback" not in said
    commit.rename(tmp_path / commit.name)  # out of _delta_log, as the hint says
    assert open_table(str(table)).to_pyarrow_table().to_pylist() == [{"id": 1}]
