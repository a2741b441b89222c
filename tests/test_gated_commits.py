"""A model computed beside the data tests on its inputs, its commit held for their verdict.

On an engine that computes a write's rows before committing them (capabilities.stages_writes:
the embedded engine), a table or incremental model that an error-severity test on its inputs
gates starts as soon as its inputs are built, while the tests run; its commit waits for them,
and a test that fails leaves its table as it was (the model is reported skipped, as before).
Elsewhere (delta-spark: a write is one Spark command) it starts after the tests, as dbt does.
"""

import threading
import time

import pytest
from conftest import DELTA_SPARK_IN_SLOW_TIER, at, read_delta

from medallion_cli import commands
from medallion_cli.commands.plan import Reporter
from medallion_cli.run.runner import NodeResult, timed
from medallion_cli.run.scheduler import execute

pytestmark = DELTA_SPARK_IN_SLOW_TIER

LABELS = {"silver": ("model", "table"), "t": ("test", "test"), "gold": ("model", "table"),
          "gold2": ("model", "table"), "platinum": ("model", "table")}
WAIT = 10  # seconds; a test that waits this long has found the run stalled


def scheduled(order, parents, gates, run_test, threads=2):
    """Run `order` with fake work: models succeed at once, once their gate (if any) opens;
    `run_test` runs the test. Returns (results by name, events in order, said results)."""
    events, said, lock = [], [], threading.Lock()

    def note(what):
        with lock:
            events.append(what)

    def run(name, gate=None):
        def work():
            note(f"start {name}")
            if name == "t":
                status = run_test(events)
            else:
                status = "success"
                if gate:
                    gate()
            note(f"end {name}")
            return NodeResult(name, *LABELS[name], status)
        return timed(name, *LABELS[name], work)

    results = execute(order, parents, run, LABELS, threads, on_result=said.append, gates=gates)
    return {r.name: r for r in results}, events, said


def has_started(events, name):
    for _ in range(WAIT * 100):
        if f"start {name}" in events:
            return True
        time.sleep(0.01)
    return False


ORDER = ["silver", "t", "gold", "platinum"]
PARENTS = {"t": {"silver"}, "gold": {"silver", "t"}, "platinum": {"gold"}}


@pytest.mark.unit
def test_a_gated_model_computes_while_its_test_runs_and_finishes_after_it():
    def passing(events):
        # the model started beside the test, and its gate held it until the test ended
        return "success" if has_started(events, "gold") else "error"

    results, events, _ = scheduled(ORDER, PARENTS, {"gold": {"t"}}, passing)
    assert {n: r.status for n, r in results.items()} == dict.fromkeys(ORDER, "success")
    assert events.index("start gold") < events.index("end t") < events.index("end gold")


@pytest.mark.unit
def test_a_failing_test_holds_back_the_model_computed_beside_it():
    def failing(events):
        has_started(events, "gold")
        return "error"

    results, events, said = scheduled(ORDER, PARENTS, {"gold": {"t"}}, failing)
    assert "start gold" in events and "end gold" not in events  # it stopped at its gate
    assert (results["gold"].status, results["gold"].message) == ("skipped", "upstream 't' error")
    assert (results["platinum"].status, results["platinum"].message) == (
        "skipped", "upstream 'gold' skipped")
    assert [r.name for r in said].count("gold") == 1  # said once, by itself


@pytest.mark.unit
def test_on_one_thread_a_gated_model_waits_for_its_tests():
    def passing(events):
        return "error" if "start gold" in events else "success"

    results, events, _ = scheduled(ORDER, PARENTS, {"gold": {"t"}}, passing, threads=1)
    assert results["gold"].status == "success"
    assert events.index("end t") < events.index("start gold")


@pytest.mark.unit
def test_models_waiting_at_their_gates_leave_a_thread_for_the_tests():
    """Two models gated by one test, two threads: one computes beside the test, the other waits
    to start (were both to wait at their gates, the test would have no thread)."""
    order = ["silver", "t", "gold", "gold2"]
    parents = {"t": {"silver"}, "gold": {"silver", "t"}, "gold2": {"silver", "t"}}

    def passing(events):
        return "success" if has_started(events, "gold") else "error"

    results, events, _ = scheduled(order, parents, {"gold": {"t"}, "gold2": {"t"}}, passing)
    assert {n: r.status for n, r in results.items()} == dict.fromkeys(order, "success")
    assert events.index("end t") < events.index("start gold2")


@pytest.mark.unit
def test_a_result_that_cannot_be_said_stops_the_run_and_leaves_no_thread_waiting():
    """Saying a result failed (its output closed: `medallion build | head`) while a model waited
    at the gate of two tests: the run stops, the test still running is waited for and the
    model's gate learns it, so nothing waits for ever (the process held the warehouse's lock)."""
    labels = {"silver": ("model", "table"), "t1": ("test", "test"), "t2": ("test", "test"),
              "gold": ("model", "table")}
    order = ["silver", "t1", "t2", "gold"]
    parents = {"t1": {"silver"}, "t2": {"silver"}, "gold": {"silver", "t1", "t2"}}
    said_t1, gold_waits, outcome = threading.Event(), threading.Event(), []

    def run(name, gate=None):
        def work():
            if name == "t2":  # ends once saying t1's result failed
                said_t1.wait(WAIT)
            if gate:
                gold_waits.set()
                gate()
            return NodeResult(name, *labels[name], "success")
        return timed(name, *labels[name], work)

    def say(result):
        if result.name == "t1":
            gold_waits.wait(WAIT)
            said_t1.set()
            raise BrokenPipeError(32, "Broken pipe")

    def scheduler():
        try:
            execute(order, parents, run, labels, 3, on_result=say,
                    gates={"gold": {"t1", "t2"}})
        except BrokenPipeError as exc:
            outcome.append(exc)

    running = threading.Thread(target=scheduler, daemon=True)
    running.start()
    running.join(WAIT)
    assert not running.is_alive(), "the run waits for ever for a node at its gate"
    assert outcome and isinstance(outcome[0], BrokenPipeError)


PEOPLE = {
    "models/people.sql": "select * from values (1, 'ann'), (2, 'bob') as t(id, name)",
    "models/names.sql": "select id, upper(name) as name from {{ ref('people') }}",
    "models/props.yml": "models:\n  - name: people\n    columns:\n      - name: id\n"
                        "        tests: [unique]\n",
}


def test_a_failing_test_leaves_the_table_of_what_it_gates_as_it_was(project, engine_name):
    root = project(PEOPLE)
    commands.build(commands.Invocation(project_dir=str(root)), "build")
    (root / "models/people.sql").write_text(
        "select * from values (1, 'ann'), (1, 'amy') as t(id, name)")
    events = []
    reporter = Reporter(begin=lambda name: events.append(f"start {name}"),
                        result=lambda r: events.append(f"{r.status} {r.name}"))
    results = {r.name: r for r in commands.build(
        commands.Invocation(project_dir=str(root), threads=2), "build", report=reporter)}
    assert results["unique_people_id"].status == "error"
    assert (results["names"].status, results["names"].message) == (
        "skipped", "upstream 'unique_people_id' error")
    assert read_delta(at(root, "models/names")) == [{"id": 1, "name": "ANN"},
                                                    {"id": 2, "name": "BOB"}]
    began = events.index("start names") if "start names" in events else len(events)
    tested = events.index("error unique_people_id")
    if engine_name == "embedded":  # stages its writes: computed beside the test
        assert began < tested
    else:  # a write is one command: the model waits for the test
        assert "start names" not in events
    assert not list((root / "warehouse/_staging").glob("*/*"))  # no staged files left over


def test_a_property_the_held_back_model_adds_is_not_set_either(project, engine_name):
    """A table property new in the model's config is set by a commit of its own before the
    rows': that commit waits for the verdict too."""
    from conftest import delta_table

    root = project(PEOPLE)
    commands.build(commands.Invocation(project_dir=str(root)), "build")
    (root / "models/people.sql").write_text(
        "select * from values (1, 'ann'), (1, 'amy') as t(id, name)")
    (root / "models/names.sql").write_text(
        "{{ config(table_properties={'delta.checkpointInterval': 5}) }}\n"
        + PEOPLE["models/names.sql"])
    results = commands.build(commands.Invocation(project_dir=str(root), threads=2), "build")
    assert {r.name: r.status for r in results}["names"] == "skipped"
    names = delta_table(at(root, "models/names"))
    assert "delta.checkpointInterval" not in names.metadata().configuration
    assert names.version() == 0
