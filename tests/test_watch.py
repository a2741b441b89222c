"""`medallion build --watch`: streaming models keep running, gold follows, Ctrl-C stops cleanly."""

import json
import re
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import replace
from types import SimpleNamespace

import pytest
from conftest import DELTA_SPARK_IN_SLOW_TIER, read_delta
from helpers import MODELS, land, medallion

from medallion_cli.commands.watch import stop_gracefully
from medallion_cli.engines import engine_class
from medallion_cli.materialize.streaming.tally import BatchReport, StreamTally

pytestmark = DELTA_SPARK_IN_SLOW_TIER

WATCHED = {**MODELS, "models/gold/order_count.sql": """\
    select status, count(*) as n from {{ ref('silver_orders') }} group by status
"""}
PROJECT = "name: w\nprofile: test\nmodels:\n  trigger: 1 second\n"


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


# A failed node's first retry after this many seconds (then 1 s, 2 s...), not 2 s: a test sees
# three tries in SEVERAL_TRIES where it would wait 14 s (nothing outside the process tells a
# try that failed the same way, which is the point: it is not said again)
BACKOFF = {"MEDALLION_WATCH_BACKOFF": "0.5"}
SEVERAL_TRIES = 4


@contextmanager
def watching(root, env=None):
    """`medallion build --watch` in a subprocess: yields (output lines so far, a function that
    gives (exit code, whole output) once it stopped); Ctrl-C (SIGINT) stops it at the end."""
    proc = medallion(root, "build", "--watch", wait=False, env=env)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")))
    reader.start()
    ended = {}
    try:
        yield lines, lambda: (ended["code"], "".join(lines))
    finally:
        proc.send_signal(signal.SIGINT)
        ended["code"] = proc.wait(timeout=120)
        reader.join()


def test_watch_keeps_gold_fresh_and_stops_cleanly_on_ctrl_c(project, engine_name):
    root = project(WATCHED, project_yml=PROJECT)
    land(root, "001.json", [{"order_id": 1, "status": "placed", "op": "I", "seq": 1}])
    with watching(root) as (lines, stopped):
        wait_for(lambda: any("3 of 3" in line for line in lines), 180, "the first pass")
        gold = root / "warehouse/gold/order_count"
        assert read_delta(gold) == [{"status": "placed", "n": 1}]
        land(root, "002.json", [{"order_id": 1, "status": "paid", "op": "U", "seq": 2},
                                {"order_id": 2, "status": "placed", "op": "I", "seq": 1}])
        wait_for(lambda: read_delta(gold) == [{"status": "paid", "n": 1},
                                              {"status": "placed", "n": 1}], 120, "gold to update")
    code, output = stopped()
    assert code == 0, output
    # Under --watch, every micro-batch and every refresh of gold is in the event log.
    log = sorted((r for r in read_delta(root / "warehouse/_medallion/events")
                  if r["command"] == "build --watch"), key=lambda r: r["event_time"])
    bronze = [r for r in log if r["event_type"] == "batch" and r["node"] == "bronze_orders"]
    assert sorted(r["rows_written"] for r in bronze) == [1, 2]
    refreshed = [r for r in log if r["event_type"] == "node" and r["node"] == "order_count"]
    assert len(refreshed) >= 2 and {r["status"] for r in refreshed} == {"success"}
    assert [r["event_type"] for r in log][-1] == "run_finished"
    assert "STREAM     silver_orders batch 1" in output
    batch_line = next(line for line in output.splitlines() if "silver_orders batch 1" in line)
    assert re.search(r"\d+ rows, v\d+, [\d.]+s \(\d+ rows/s\)", batch_line), batch_line
    assert re.search(r"\d\d:\d\d:\d\d   \(watch\)  OK         model order_count", output)
    assert "Done." in output and "Watched for " in output


@pytest.mark.one_engine("the tie check is on the model's rows (writes.py); the backoff and "
                        "its message are the watch loop's, the same for any engine")
def test_a_failing_query_under_watch_is_retried_with_backoff_said_once_and_exits_non_zero(
        project, engine_name):
    root = project(WATCHED, project_yml=PROJECT)
    land(root, "001.json", [{"order_id": 1, "status": "placed", "op": "I", "seq": 1}])
    with watching(root, env=BACKOFF) as (lines, stopped):
        wait_for(lambda: any("3 of 3" in line for line in lines), 180, "the first pass")
        # Two different rows with one key and sequence in one batch: silver's batch fails, and
        # fails again each time the query starts over on it.
        land(root, "002.json", [{"order_id": 1, "status": "paid", "op": "U", "seq": 2},
                                {"order_id": 1, "status": "lost", "op": "U", "seq": 2}])
        wait_for(lambda: any("ERROR" in line and "silver_orders" in line for line in lines),
                 180, "the failure")
        time.sleep(SEVERAL_TRIES)  # tried again: the same error, not said again
    code, output = stopped()
    assert code == 1, output
    errors = [i for i, line in enumerate(lines) if "ERROR" in line and "silver_orders" in line]
    assert len(errors) == 1, output
    said = lines[errors[0] + 1]  # the failure's one line, under its result line
    assert "order_id" in said and "breaks such ties" in said
    assert "tried again after a backoff of 0.5 s, doubling to 15 s" in lines[errors[0] + 2]
    assert re.match(r"\d\d:\d\d:\d\d ", lines[errors[0]])  # when, on every line
    assert "Traceback" not in output and "\tat " not in output
    assert re.search(r"Watched for \d+m \d+s: 0 refresh\(es\), \d+ micro-batch\(es\), \d+ data "
                     r"test run\(s\) \(\d+ passed, 0 warned, 0 failed\), 1 node\(s\) failed "
                     r"\(silver_orders\)", output), output


TESTED = {**WATCHED, "models/gold/order_count.yml": """\
    models:
      - name: order_count
        columns:
          - name: status
            tests: [not_null]
"""}


def test_watch_retries_a_broken_model_once_fixed_and_tests_what_it_refreshes(project, build,
                                                                          engine_name):
    """The first pass needs no Spark (all up to date), so the watch starts Spark itself; an
    edit that breaks silver fails it once (said once), gold waits for it, and the fix is picked
    up by the next try: silver streams again, gold refreshes and its data test runs after it.
    Ctrl-C then ends the session at once with its summary."""
    root = project(TESTED, project_yml=PROJECT)
    land(root, "001.json", [{"order_id": 1, "status": "placed", "op": "I", "seq": 1}])
    build(root)
    silver = root / "models/silver/silver_orders.sql"
    good = silver.read_text()
    silver.write_text(good.replace("select order_id, status", "select order_id, statuz as status"))
    with watching(root, env=BACKOFF) as (lines, stopped):
        wait_for(lambda: any("ERROR" in line and "silver_orders" in line for line in lines), 180,
                 "silver to fail")
        # refused by the static checks, before its query starts, with the name it meant
        assert any("models/silver/silver_orders.sql:" in line and "unknown column 'statuz'; "
                   "did you mean 'status'?" in line for line in lines), lines
        land(root, "002.json", [{"order_id": 2, "status": "paid", "op": "I", "seq": 1}])
        time.sleep(SEVERAL_TRIES)  # tried again, and failed the same way: not said again
        assert sum("ERROR" in line and "silver_orders" in line for line in lines) == 1
        assert read_delta(root / "warehouse/gold/order_count") == [{"status": "placed", "n": 1}]
        silver.write_text(good)
        wait_for(lambda: read_delta(root / "warehouse/gold/order_count") == [
            {"status": "paid", "n": 1}, {"status": "placed", "n": 1}], 180, "gold to follow")
        wait_for(lambda: any("PASS" in line and "not_null_order_count_status" in line
                             and "(watch)" in line for line in lines), 60, "gold's data test")
    code, output = stopped()
    assert code == 1, output  # silver failed during the session
    assert "Traceback" not in output and "reentrant" not in output
    assert "Watched for " in output and "1 node(s) failed (silver_orders)" in output


@pytest.mark.one_engine("start_spark keeps Ctrl-C from pyspark for either engine; streaming "
                        "under --watch on both: test_watch_keeps_gold_fresh_and_stops_...")
def test_ctrl_c_ends_a_watch_that_started_spark_itself(project, build, engine_name):
    """Nothing new at first: the first pass starts no Spark, so the watch starts it on its
    main thread, where pyspark would install its own Ctrl-C handler (calling the JVM from the
    signal breaks py4j, and the watch then looped on restarts). Ctrl-C ends it cleanly."""
    root = project(WATCHED, project_yml=PROJECT)
    land(root, "001.json", [{"order_id": 1, "status": "placed", "op": "I", "seq": 1}])
    build(root)
    with watching(root) as (lines, stopped):
        wait_for(lambda: any("3 of 3" in line for line in lines), 180, "the first pass")
        assert all("UP TO DATE" in line for line in lines if " of 3 " in line)
        land(root, "002.json", [{"order_id": 2, "status": "paid", "op": "I", "seq": 1}])
        wait_for(lambda: len(read_delta(root / "warehouse/gold/order_count")) == 2, 180,
                 "gold to follow")
    code, output = stopped()
    assert code == 0, output
    assert "Watched for " in output and "0 node(s) failed" in output
    assert "reentrant" not in output and "Traceback" not in output and "Aborted" not in output


def test_a_model_stopped_right_after_its_commit_is_reported_with_it(project, build,
                                                                   engine_name, monkeypatch):
    """Ctrl-C under --watch cancels Spark's jobs; one that came as gold had just committed
    turned its refresh into "stopped", so the event log missed a commit the table has (CI
    saw it on delta-spark, whose input row count was a Spark job after the commit)."""
    root = project(WATCHED, project_yml=PROJECT)
    land(root, "001.json", [{"order_id": 1, "status": "placed", "op": "I", "seq": 1}])
    build(root)
    land(root, "002.json", [{"order_id": 2, "status": "paid", "op": "I", "seq": 1}])
    engine = engine_class(engine_name)
    committed, write = [], engine.write

    def write_then_cancel(self, df, path, *args, **kwargs):
        result = write(self, df, path, *args, **kwargs)
        committed.append(str(path).endswith("order_count"))
        return result

    def cancelled_once_gold_committed(method):
        def job(self, *args, **kwargs):
            if any(committed):
                raise RuntimeError("[SPARK_JOB_CANCELLED] Job 61 cancelled as part of "
                                   "cancellation of all jobs")
            return method(self, *args, **kwargs)
        return job

    monkeypatch.setattr(engine, "write", write_then_cancel)
    for name in ("row_count", "read_table"):
        monkeypatch.setattr(engine, name, cancelled_once_gold_committed(getattr(engine, name)))
    gold = build(root)["order_count"]
    assert (gold.status, gold.version, gold.rows) == ("success", 1, 2), gold.message
    assert gold.rows_read == 2


class StoppedQuery:
    """A query stopped after a batch whose progress Spark's event bus had not yet brought to
    the listener: the query itself has it."""
    isActive = False
    status = {"isTriggerActive": False}
    recentProgress = [SimpleNamespace(json=json.dumps(
        {"batchId": 1, "durationMs": {"triggerExecution": 1500}}))]

    def stop(self):
        pass


@pytest.mark.unit
def test_a_batch_whose_progress_had_not_arrived_at_the_stop_is_reported_with_its_duration():
    # Engine-free: the race is between Spark's event bus and the stop, not in an engine.
    reported = []
    tally = StreamTally(on_batch=reported.append, detach_listener=lambda: None)
    tally.add(BatchReport("m", 1, rows=2, version=3, malformed=0, rescued=0, expectations={},
                          files_added=1, rows_read=2))
    assert reported == []  # under --watch, reported once its progress is in
    stop_gracefully(StoppedQuery(), tally)
    assert [(r.batch_id, r.seconds) for r in reported] == [(1, 1.5)]
    assert tally.pending == {}


class RunningQuery:
    isActive = True
    status = {"isTriggerActive": False}
    recentProgress = []

    def stop(self):
        self.isActive = False


@pytest.mark.unit
def test_a_commit_that_a_batch_model_reads_wakes_the_refresh_before_the_next_poll(monkeypatch):
    """Gold follows silver's commit at once, not at the next poll (here 10 minutes away) nor
    when Spark's progress for the batch comes (here never); a commit that only a streaming
    model reads (bronze's) does not wake it. Engine-free: the wake-up is the watch loop's,
    whatever the engine."""
    from medallion_cli.commands import watch as watch_module
    from medallion_cli.dag.graph import Graph
    from medallion_cli.materialize.context import BuildContext

    def node(materialized):
        return SimpleNamespace(file=SimpleNamespace(kind="model"), config=SimpleNamespace(
            materialized=materialized, strategy="append", incremental_by=(), once=False))

    graph = Graph({"bronze": node("streaming"), "silver": node("streaming"), "gold": node("table")},
                  ("bronze", "silver", "gold"), {"bronze": ("silver",), "silver": ("gold",)})
    ctx = BuildContext(project=None, graph=graph, engine=None)
    monkeypatch.setattr(watch_module, "POLL_SECONDS", 600)
    monkeypatch.setattr(watch_module, "own_session", lambda ctx: ctx)
    monkeypatch.setattr(watch_module, "refusals", lambda project, graph, names: {})
    commits = {}
    monkeypatch.setattr(watch_module, "start_query", lambda ctx, node, into, continuous, on_batch,
                        on_commit: (commits.setdefault(len(commits), on_commit), RunningQuery(),
                                    StreamTally(), None)[1:])
    refreshes = []
    stops = watch_module.Stops(threading.Event(), threading.Event())

    def refresh(ctx, held, told, stop):
        refreshes.append(time.monotonic())
        if len(refreshes) == 1:  # bronze commits (nothing refreshes), then silver
            report = BatchReport("bronze", 1, rows=1, version=1, malformed=0, rescued=0,
                                 expectations={}, files_added=1, rows_read=1)
            threading.Timer(0.5, commits[0], [report]).start()
            threading.Timer(3, commits[1], [replace(report, model="silver")]).start()
        else:  # as Ctrl-C does
            stops.gently.set(), stops.woken.set()

    batches = []
    watching = threading.Thread(target=watch_module.watch, args=(
        ctx, ["bronze", "silver"], [], lambda: graph, refresh, lambda r: None, batches.append,
        stops), daemon=True)
    started = time.monotonic()
    watching.start()
    watching.join(60)
    stops.gently.set(), stops.woken.set()  # whatever happened, the thread ends
    assert len(refreshes) == 2
    assert batches == []  # their progress never came
    assert refreshes[1] - started >= 3  # not woken by bronze's commit


@pytest.mark.unit
def test_under_watch_a_model_streaming_from_one_streaming_model_follows_its_commits():
    """Not on the next whole second of its own trigger (Spark fires them all on the same
    seconds): every 0.1 s, which with one input on a trigger no shorter than its own still
    runs it at most once per its interval. Any other model keeps its own trigger. Engine-free:
    the trigger is chosen before either engine's query starts."""
    from medallion_cli.dag.graph import Graph
    from medallion_cli.materialize.streaming.driver import (
        FOLLOW_INTERVAL,
        watch_trigger,
    )

    def node(materialized="streaming", trigger="1 second", refs=(), sources=(), once=False,
             change_refs=()):
        return SimpleNamespace(config=SimpleNamespace(materialized=materialized,
                                                      trigger=trigger, once=once),
                               refs=refs, sources=sources, change_refs=change_refs,
                               feed_only=())

    nodes = {"bronze": node(sources=(("raw", "orders"),)), "other": node(),
             "hourly": node(trigger="1 hour"), "once": node(once=True),
             "products": node(materialized="table"), "default": node(trigger="available_now"),
             "silver": node(refs=("bronze", "products")),
             "slow_silver": node(trigger="1 minute", refs=("bronze",)),
             "after_hourly": node(refs=("hourly",)), "two": node(refs=("bronze", "other")),
             "after_once": node(refs=("once",)), "feed": node(change_refs=("bronze",)),
             "unset": node(trigger="available_now", refs=("default",))}
    graph = Graph(nodes, tuple(nodes), {})
    trigger = {name: watch_trigger(graph, n) for name, n in nodes.items()}
    assert trigger == {
        "bronze": "1 second",  # landing files: its own trigger
        "other": "1 second", "hourly": "1 hour", "once": "1 second", "products": "1 second",
        "default": "10 seconds",
        "silver": FOLLOW_INTERVAL,  # a batch table it joins is not streamed
        "slow_silver": "1 minute",  # its own trigger is the longer one
        "after_hourly": FOLLOW_INTERVAL,  # follows an input that commits hourly at most
        "two": "1 second", "after_once": "1 second", "feed": "1 second",
        "unset": FOLLOW_INTERVAL}  # both on the watch's default of 10 seconds
    assert FOLLOW_INTERVAL == "100 milliseconds"


@pytest.mark.unit
def test_under_watch_a_warning_recalled_on_unchanged_inputs_is_not_said_again():
    """A data test that warned is not run again on the same inputs; a build says its warning
    again (once), but under --watch it was said when reached, not at every poll."""
    from medallion_cli.commands.watch import Stops, watch
    from medallion_cli.dag.graph import Graph
    from medallion_cli.materialize.context import BuildContext
    from medallion_cli.run.runner import NodeResult

    graph = Graph({}, (), {})
    stops = Stops(threading.Event(), threading.Event())

    def refresh(ctx, held, told, stop):
        told(NodeResult("t", "test", "test", "warn", rows=3, message="warned: 3 failing rows"))
        told(NodeResult("t", "test", "test", "warn", rows=3, message="warned at ...",
                        recalled=True))
        stops.gently.set(), stops.woken.set()

    said = []
    watch(BuildContext(project=None, graph=graph, engine=None), [], [], lambda: graph, refresh,
          said.append, lambda report: None, stops)
    assert [(r.name, r.message) for r in said if r.kind == "test"] == [
        ("t", "warned: 3 failing rows")]


@pytest.mark.unit
def test_the_watch_backoff_doubles_to_30_times_its_first_wait_which_a_variable_sets(monkeypatch):
    from medallion_cli.commands.watch import restart_backoff, retried
    from medallion_cli.core.errors import MedallionError

    monkeypatch.delenv("MEDALLION_WATCH_BACKOFF", raising=False)
    assert restart_backoff() == (2, 4, 8, 16, 32, 60)
    assert "after a backoff of 2 s, doubling to 60 s" in retried(restart_backoff())
    monkeypatch.setenv("MEDALLION_WATCH_BACKOFF", "0.5")
    assert restart_backoff() == (0.5, 1, 2, 4, 8, 15)
    for setting in ("soon", "0", "-1"):
        monkeypatch.setenv("MEDALLION_WATCH_BACKOFF", setting)
        with pytest.raises(MedallionError,
                           match=f"MEDALLION_WATCH_BACKOFF='{setting}' is not a number"):
            restart_backoff()
