"""Run artifacts (manifest.json, run_results.json) and progress output (live, plain, JSON)."""

import json
import time

import pytest
from click.testing import CliRunner
from conftest import DELTA_SPARK_IN_SLOW_TIER
from helpers import BATCH_1, MODELS, land

from medallion_cli import commands
from medallion_cli.cli.console import Console
from medallion_cli.cli.group import main
from medallion_cli.run.runner import NodeResult

pytestmark = DELTA_SPARK_IN_SLOW_TIER


def test_manifest_and_run_results(project, engine_name):
    root = project({**MODELS, "models/gold/counts.sql":
                    "select status, count(*) as n from {{ ref('silver_orders') }} group by status",
                    "models/props.yml": "models:\n  - name: counts\n    columns:\n"
                                        "      - {name: status, tests: [unique]}\n"})
    land(root, "001.json", BATCH_1)
    result = CliRunner().invoke(main, ["build", "--project-dir", str(root)])
    assert result.exit_code == 0, result.output
    manifest = json.loads((root / "target/manifest.json").read_text())
    silver = manifest["nodes"]["silver_orders"]
    assert silver["depends_on"] == {"refs": ["bronze_orders"], "sources": []}
    assert silver["config"]["unique_key"] == ["order_id"]
    assert silver["checkpoint"].endswith("_checkpoints/silver/silver_orders")
    assert "from `bronze_orders`" in silver["compiled_sql"]
    assert manifest["tests"]["unique_counts_status"]["depends_on"] == ["counts"]
    run_results = json.loads((root / "target/run_results.json").read_text())
    runs = {r["name"]: r for r in run_results["results"]}
    # the tests share one session: it was running already, so starting it took next to nothing
    assert 0 <= run_results["spark_start_seconds"] < run_results["elapsed_seconds"]
    bronze = runs["bronze_orders"]
    assert (bronze["status"], bronze["rows"], bronze["rows_read"], bronze["version"]) == (
        "success", 5, 5, 0)
    assert bronze["files_added"] >= 1 and bronze["seconds"] > 0
    assert runs["unique_counts_status"]["status"] == "success"
    # a batch model reads silver's 5 rows, counted from the Delta log's file statistics
    assert (runs["silver_orders"]["rows_read"], runs["counts"]["rows_read"]) == (5, 5)
    # where each node's time went, step by step, within its own seconds
    assert set(runs["counts"]["phases"]) == {"fingerprint", "write"}
    assert set(bronze["phases"]) == {"fingerprint", "query_start", "write"}
    assert set(runs["unique_counts_status"]["phases"]) == {"fingerprint", "query"}
    for run in runs.values():
        assert 0 < sum(run["phases"].values()) <= run["seconds"] + 0.01, run
    # Built again with nothing new: every node is up to date and none asked for Spark
    again = CliRunner().invoke(main, ["build", "--project-dir", str(root)])
    assert again.exit_code == 0, again.output
    rerun = json.loads((root / "target/run_results.json").read_text())
    assert {r["status"] for r in rerun["results"]} == {"up_to_date"}
    assert rerun["spark_start_seconds"] is None


@pytest.mark.one_engine("the JSON log lines are the console's, from the run's results")
def test_json_log_format(project, engine_name):
    root = project({"models/a.sql": "select 1 as id"})
    result = CliRunner().invoke(main, ["run", "--project-dir", str(root), "--log-format", "json"])
    events = [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]
    assert [e["event"] for e in events] == ["start", "result", "done"]
    assert events[1]["name"] == "a" and events[1]["status"] == "success"
    assert events[2]["counts"]["success"] == 1


@pytest.mark.unit
def test_live_status_line_on_a_terminal_and_plain_lines_otherwise():
    def run(live: bool) -> str:
        runner = CliRunner()
        with runner.isolation() as (out, _, _):
            console = Console(live=live)
            console.start(1, "local")
            console.begin("slow_model")
            time.sleep(1.2)
            console.result(NodeResult("slow_model", "model", "table", "success", 1.2, rows=3))
            console.finish([NodeResult("slow_model", "model", "table", "success")])
            return out.getvalue().decode()

    live = run(True)
    assert "[0/1] running: slow_model (1s)" in live
    assert "\r\x1b[K" in live and "1 of 1" in live
    plain = run(False)
    assert "running:" not in plain and "\x1b[K" not in plain
    assert "1 of 1" in plain and "[3 rows, 1.2s]" in plain


@pytest.mark.unit
def test_expectation_lines_say_where_failing_rows_went_and_the_summary_names_the_models():
    """drop and warn both count failing rows; their lines say the rows went apart to the
    quarantine, or into the table all the same. The models succeeded (their rows went where
    their rules said), so the summary's "0 warn" is followed by a line naming them."""
    result = NodeResult("orders", "model", "table", "success", 0.5,
                        expectations={"has_id": 1, "small": 2, "sane": 0},
                        on_violation={"has_id": "drop", "small": "warn", "sane": "drop"},
                        quarantine="warehouse/silver/orders_quarantine")
    dropped_only = NodeResult("customers", "model", "table", "success", 0.5,
                              expectations={"has_id": 3}, on_violation={"has_id": "drop"})
    clean = NodeResult("gold", "model", "table", "success", 0.5,
                       expectations={"sane": 0}, on_violation={"sane": "warn"})
    runner = CliRunner()
    with runner.isolation() as (out, _, _):
        console = Console(live=False)
        console.start(3, "local")
        console.result(result)
        console.finish([result, dropped_only, clean])
        text = out.getvalue().decode()
    assert text.splitlines()[-5:] == [
        "      expectation has_id: 1 row(s) failed, kept apart in "
        "warehouse/silver/orders_quarantine",
        "      expectation small: 2 row(s) failed (on_violation warn: written to the table all "
        "the same)",
        "      expectation sane: 0 row(s) failed",
        "Done. 3 success, 0 up to date, 0 warn, 0 error, 0 skipped",
        "Expectations not met in 2 model(s): orders (rows kept apart, rows written with a "
        "warning); customers (rows kept apart)"]


@pytest.mark.unit
def test_every_kind_of_node_prints_in_every_status():
    """A no-op build reports data tests up to date: the console has a word for each status."""
    from medallion_cli.cli.console import ORDER

    results = [NodeResult(f"{kind}_{status}", kind, kind, status, 0.5, message="why")
               for kind in ("seed", "model", "test", "unit") for status in ORDER]
    runner = CliRunner()
    with runner.isolation() as (out, _, _):
        console = Console(live=False)
        console.start(len(results), "local")
        for result in results:
            console.result(result)
        console.finish(results)
        text = out.getvalue().decode()
    assert "UP TO DATE test test_up_to_date" in text and "PASS       test test_success" in text
    assert "Done. 4 success, 4 up to date, 4 warn, 4 error, 4 skipped" in text


@pytest.mark.unit
def test_the_status_line_says_starting_spark_while_the_engine_starts():
    runner = CliRunner()
    with runner.isolation() as (out, _, _):
        console = Console(live=True)
        console.start(1, "local")
        console.phase("starting Spark")
        time.sleep(1.2)
        console.phase(None)
        console.begin("first_model")
        time.sleep(1.2)
        console.finish([])
        text = out.getvalue().decode()
    assert "starting Spark (1s)" in text
    assert text.index("starting Spark") < text.index("running: first_model")


@pytest.mark.one_engine("plan_start, shared by both engines, reports the phase")
def test_a_build_reports_when_the_engine_starts(project, engine_name):
    root = project({"models/a.sql": "select 1 as id"})
    phases = []
    commands.build(commands.Invocation(project_dir=str(root)), "build",
                report=commands.Reporter(phase=phases.append))
    assert phases == ["starting Spark", None]
