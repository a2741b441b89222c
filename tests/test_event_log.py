"""The event log (<warehouse>/_medallion/events): what builds, tests and failures record, that
models can read it as a source, and `medallion status` gating on freshness from it."""

import datetime as dt
import json
import re
import shutil
import subprocess

import pytest
from click.testing import CliRunner
from conftest import DELTA_SPARK_IN_SLOW_TIER
from deltalake import DeltaTable
from helpers import CHROMIUM, page_data

from medallion_cli import cli, commands
from medallion_cli.commands import inspect
from medallion_cli.report.eventlog import EVENT_COLUMNS
from medallion_cli.report.status import node_runs

pytestmark = DELTA_SPARK_IN_SLOW_TIER

FILES = {
    "models/silver/fresh_orders.sql": """\
        {{ config(event_time='ordered_at', freshness={'warn_after': '1 hour',
                                                      'error_after': {'count': 1, 'period': 'day'}},
                  expectations={'positive': 'amount > 0'}) }}
        select order_id, amount, cast(ordered_at as timestamp) as ordered_at
        from {{ ref('orders') }}
    """,
    "models/silver/stale_orders.sql": """\
        {{ config(event_time='ordered_at', freshness={'error_after': '1 day'}) }}
        select * from {{ ref('fresh_orders') }} where ordered_at < current_timestamp() - interval 1 day
    """,
    "models/gold/broken.sql":
        "select cast(raise_error('the upstream system sent nonsense') as string) as x",
    "models/gold/after_broken.sql": "select * from {{ ref('broken') }}",
    "models/schema.yml": """\
        models:
          - name: fresh_orders
            columns:
              - name: amount
                tests: [not_null, {accepted_values: {values: [10], severity: warn}}]
    """,
}


def orders_as_of_now() -> tuple[dict[str, str], dt.datetime]:
    """The project's files with its orders seed, one order 3 days old and one 5 minutes old as
    of now (as the test writes them: a run may reach a test an hour after collecting it), and
    the fresh order's time."""
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    fresh, stale = now - dt.timedelta(minutes=5), now - dt.timedelta(days=3)
    seed = ("order_id,amount,ordered_at\n"
            f"1,10,{stale:%Y-%m-%d %H:%M:%S}\n2,-5,{fresh:%Y-%m-%d %H:%M:%S}\n")
    return {**FILES, "seeds/orders.csv": seed}, fresh


def events(root, **where):
    rows = DeltaTable(str(root / "warehouse/_medallion/events")).to_pyarrow_table().to_pylist()
    return [r for r in sorted(rows, key=lambda r: r["event_time"]) if all(r[k] == v for k, v in where.items())]


def test_a_build_records_runs_nodes_tests_and_failures(project, build):
    files, fresh_order = orders_as_of_now()
    root = project(files)
    results = build(root)
    assert results["broken"].failed and results["after_broken"].status == "skipped"
    run_id = {r["run_id"] for r in events(root)}
    assert len(run_id) == 1
    assert [r["event_type"] for r in events(root) if r["event_type"].startswith("run")] == [
        "run_started", "run_finished"]
    finished = events(root, event_type="run_finished")[0]
    assert finished["status"] == "error" and "broken" in finished["message"]
    assert finished["command"] == "build" and finished["seconds"] > 0

    by_node = {r["node"]: r for r in events(root, event_type="node")}
    assert set(by_node) == {"orders", "fresh_orders", "stale_orders", "broken", "after_broken",
                            "not_null_fresh_orders_amount",
                            "accepted_values_fresh_orders_amount"}
    fresh = by_node["fresh_orders"]
    assert (fresh["status"], fresh["rows_written"], fresh["kind"]) == ("success", 2, "model")
    assert fresh["version"] == DeltaTable(str(root / "warehouse/silver/fresh_orders")).version()
    assert fresh["expectations"] == [("positive", 1)]  # pyarrow gives a map as pairs
    assert fresh["rows_checked"] == 2  # of which 1 failed: a pass rate of 50%
    assert fresh["newest_event_time"] == fresh_order
    assert fresh["started_at"] <= fresh["event_time"] and fresh["seconds"] > 0
    assert by_node["orders"]["kind"] == "seed" and by_node["orders"]["newest_event_time"] is None
    assert by_node["broken"]["status"] == "error"
    assert "the upstream system sent nonsense" in by_node["broken"]["message"]
    assert by_node["after_broken"]["status"] == "skipped"
    test = by_node["accepted_values_fresh_orders_amount"]
    assert (test["kind"], test["status"], test["failing_rows"]) == ("test", "warn", 1)

    # The docs page shows each node's last runs, with its expectations' pass rates, and marks
    # the nodes whose last run failed.
    page = commands.docs(commands.Invocation(project_dir=str(root)))
    nodes = {n["name"]: n for n in page_data(page)["nodes"]}
    last = nodes["fresh_orders"]["status"]["runs"][0]
    assert (last["status"], last["rows"], last["pass_rates"]) == ("success", 2, {"positive": 0.5})
    if CHROMIUM:
        dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                              f"--user-data-dir={root / 'chrome'}", "--dump-dom",
                              f"{page.as_uri()}#fresh_orders"], capture_output=True, text=True,
                             timeout=120).stdout
        assert '<span class="pass-rate">positive 50.0%</span>' in dom
        assert re.findall(r'<g class="node [^"]*failed[^"]*" data-name="([^"]+)"', dom) == [
            "broken"]

    # A second command is a second run; what did not change says so.
    commands.test(commands.Invocation(project_dir=str(root)))
    tests = events(root, command="test", event_type="node")
    assert {r["node"] for r in tests} == {"not_null_fresh_orders_amount",
                                         "accepted_values_fresh_orders_amount"}
    assert len({r["run_id"] for r in events(root)}) == 2
    # Its schema is the documented one, readable by any Delta reader.
    log = DeltaTable(str(root / "warehouse/_medallion/events"))
    assert [f.name for f in log.schema().fields] == EVENT_COLUMNS.names
    # On a local warehouse delta-rs appends the events, on either engine: no Spark job.
    assert {c["clientVersion"].split(".")[0] for c in log.history()} == {"delta-rs"}


def test_models_read_the_event_log_as_a_source(project, build):
    root = project({
        "seeds/numbers.csv": "n\n1\n2\n",
        "models/sources.yml": """\
            sources:
              - name: medallion
                path: warehouse/_medallion
                tables:
                  - name: events
                    format: delta
        """,
        "models/gold/builds_per_node.sql": """\
            select node, count(*) as builds from {{ source('medallion', 'events') }}
            where event_type = 'node' and status = 'success' group by node
        """,
    })
    build(root, select=("numbers",))
    build(root, select=("builds_per_node",))
    rows = DeltaTable(str(root / "warehouse/gold/builds_per_node")).to_pyarrow_table().to_pylist()
    assert rows == [{"node": "numbers", "builds": 1}]


def status(root, *args):
    return CliRunner().invoke(cli.main, ["status", "--project-dir", str(root), *args])


@pytest.mark.one_engine("status and docs read the event log with no engine; what each "
                        "engine records there: test_a_build_records_runs_nodes_...")
def test_status_gates_on_freshness_without_starting_spark(project, build, monkeypatch):
    root = project(orders_as_of_now()[0])
    before = status(root)
    assert before.exit_code == 1  # nothing built: past every error limit
    assert "not built yet" in before.output
    build(root)

    monkeypatch.setattr(inspect, "engine_of", lambda *a: 1 / 0)  # status makes no engine
    shown = status(root)
    lines = {line.split()[0]: line for line in shown.output.splitlines() if line[:1].strip()}
    assert "PASS" in lines["fresh_orders"] and "v0, 2 rows" in lines["fresh_orders"]
    assert "ERROR: 3d old, over error limit 1d" in lines["stale_orders"]
    assert "no freshness limits declared" in lines["orders"]
    assert "broken" in lines and "last failure" in shown.output
    assert "the upstream system sent nonsense" in shown.output
    assert shown.exit_code == 1  # stale_orders is past its error limit

    # The docs page shows the same, per table.
    monkeypatch.undo()
    page = page_data(commands.docs(commands.Invocation(project_dir=str(root))))
    shown_status = {n["name"]: n["status"] for n in page["nodes"]}
    assert shown_status["stale_orders"]["freshness"] == "error"
    assert [r["status"] for r in shown_status["broken"]["runs"]] == ["error"]
    assert shown_status["fresh_orders"]["runs"][0]["rows"] == 2

    fine = status(root, "-s", "fresh_orders", "--output", "json")
    assert fine.exit_code == 0, fine.output
    [table] = json.loads(fine.output)
    assert table["freshness"] == "pass" and table["rows"] == 2
    assert table["last_success"]["status"] == "success" and table["age_seconds"] < 3600


@pytest.mark.unit
def test_freshness_config_mistakes_name_the_file(project):
    root = project({"models/a.sql": "{{ config(freshness={'warn_after': 'soon'}, "
                                    "event_time='t') }}select 1 as t"})
    result = status(root)
    assert result.exit_code == 2
    assert "models/a.sql" in result.output and "freshness warn_after is 'soon'" in result.output
    root = project({"models/a.sql": "{{ config(freshness={'warn_after': '1 hour'}) }}select 1"})
    assert "freshness needs event_time" in status(root).output


@pytest.mark.one_engine("status reads the event log with no engine: its header, columns "
                        "and exit code")
def test_status_has_a_header_tells_writes_from_checks_and_fails_on_a_failed_table(project,
                                                                                 build):
    root = project({"models/a.sql": "select 1 as id", "models/b.sql": "select 2 as id"})
    build(root)
    build(root)  # nothing new: both up to date, nothing written
    first = status(root)
    assert first.exit_code == 0, first.output
    header, *rows = first.output.splitlines()
    assert header.split() == ["TABLE", "TABLE", "NOW", "LAST", "WRITTEN", "LAST", "RUN",
                              "FRESHNESS"]
    written = {line.split()[0]: line for line in rows}
    assert "up to date" in written["a"] and "v0, 1 rows" in written["a"]
    runs = node_runs(str(root / "warehouse"))["a"]
    assert [r.status for r in runs] == ["up_to_date", "success"]
    assert f"{runs[1].when:%Y-%m-%d %H:%M:%S}  {runs[0].when:%Y-%m-%d %H:%M:%S} up to date" \
        in written["a"]  # written by the first build, checked by the second
    (root / "models/b.sql").write_text("select nope")
    build(root)
    failed = status(root)
    assert failed.exit_code == 1, failed.output  # b's latest run failed
    assert "FAILED" in next(line for line in failed.output.splitlines() if line.startswith("b "))
    assert "last failure" in failed.output and "nope" in failed.output
    assert status(root, "-s", "a").exit_code == 0
    [b] = json.loads(status(root, "-s", "b", "--output", "json").output)
    assert b["failed"] and b["last_run"]["status"] == "error" and b["version"] == 0
    # a table deleted after a build wrote it is missing, not up to date
    [table_a] = root.glob("warehouse/*/a")
    shutil.rmtree(table_a)
    gone = status(root, "-s", "a")
    assert gone.exit_code == 1, gone.output
    [line] = [line for line in gone.output.splitlines() if line.startswith("a ")]
    assert "MISSING" in line and "its table is gone: the next build rebuilds it" in line
    [a] = json.loads(status(root, "-s", "a", "--output", "json").output)
    assert a["missing"] and a["version"] is None and a["last_written"]["version"] == 0
