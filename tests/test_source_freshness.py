"""`medallion source freshness`: dbt's source freshness, from a loaded_at_field (read with
Spark) or the source's own metadata (newest file, last Delta commit)."""

import datetime as dt
import json
import os
import time

import pyarrow as pa
import pytest
from click.testing import CliRunner
from conftest import DELTA_SPARK_IN_SLOW_TIER
from deltalake import write_deltalake

from medallion_cli.cli.group import main

pytestmark = DELTA_SPARK_IN_SLOW_TIER

SOURCES = """\
sources:
  - name: landing
    path: landing
    freshness: {warn_after: '1 hour', error_after: {count: 1, period: day}}
    tables:
      - name: orders
        format: json
      - name: events
        format: json
        schema: "id int, loaded_at timestamp"
        loaded_at_field: loaded_at
        freshness: {error_after: '2 hours'}
      - name: customers
        format: json
        freshness: null
  - name: lake
    path: lake
    freshness: {warn_after: '1 hour'}
    tables:
      - name: accounts
        format: delta
"""


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.one_engine("levels come from file times, delta-rs's history and a Spark read of "
                        "JSON; no engine writes")
def test_source_freshness_levels_bases_and_exit_code(project, spark, engine_name):
    root = project({"models/sources.yml": SOURCES, "models/m.sql": "select 1 as id"})
    hours_ago = lambda h: dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=h)  # noqa: E731
    orders = root / "landing/orders/1.json"
    orders.parent.mkdir(parents=True)
    orders.write_text('{"id": 1}\n')
    old = time.time() - 2 * 3600
    os.utime(orders, (old, old))  # landed two hours ago: past warn_after
    events = root / "landing/events/1.json"
    events.parent.mkdir(parents=True)
    events.write_text("".join(json.dumps({"id": i, "loaded_at": hours_ago(h).isoformat()}) + "\n"
                              for i, h in ((1, 5), (2, 3))))  # newest loaded 3 hours ago
    write_deltalake(str(root / "lake/accounts"), pa.table({"id": [1]}))  # committed just now

    result = invoke("source", "freshness", "--project-dir", root)
    assert result.exit_code == 1, result.output  # events is past its error_after
    lines = {line.split()[1]: line.split()[0] for line in result.output.splitlines()}
    assert lines == {"landing.orders": "WARN", "landing.events": "ERROR", "lake.accounts": "PASS"}
    report = {r["source"]: r for r in json.loads((root / "target/sources.json").read_text())[
        "results"]}
    assert report["landing.events"]["basis"] == "newest loaded_at"
    assert 3 * 3600 - 60 < report["landing.events"]["age_seconds"] < 3 * 3600 + 600
    assert report["landing.orders"]["basis"] == "newest file"
    assert report["lake.accounts"]["basis"] == "last commit"

    only = invoke("source", "freshness", "--project-dir", root, "-s", "source:landing.orders",
                  "source:lake")
    assert only.exit_code == 0, only.output
    assert [line.split()[1] for line in only.output.splitlines()] == [
        "landing.orders", "lake.accounts"]


@pytest.mark.unit
def test_source_freshness_errors(project):
    root = project({"models/sources.yml": SOURCES.replace("{count: 1, period: day}", "'soon'")})
    bad = invoke("source", "freshness", "--project-dir", root)
    assert bad.exit_code == 2 and "freshness error_after is 'soon'" in bad.output
    assert "models/sources.yml, source landing.orders" in bad.output
    root = project({"models/sources.yml": SOURCES})
    wrong = invoke("source", "freshness", "--project-dir", root, "-s", "orders")
    assert wrong.exit_code == 2 and "source:NAME or source:NAME.TABLE" in wrong.output
    unknown = invoke("source", "freshness", "--project-dir", root, "-s", "source:landing.order")
    assert unknown.exit_code == 2 and "did you mean 'landing.orders'" in unknown.output


def test_loaded_at_field_freshness_starts_spark_itself(project, engine_name):
    """In a process of its own (no Spark running yet, as a user runs it), a loaded_at_field is
    read once Spark has started: one line per source, no traceback."""
    import subprocess
    import sys
    from pathlib import Path

    root = project({"models/sources.yml": SOURCES})
    events = root / "landing/events/1.json"
    events.parent.mkdir(parents=True)
    loaded = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=30)
    events.write_text(json.dumps({"id": 1, "loaded_at": loaded.isoformat()}) + "\n")
    run = subprocess.run([str(Path(sys.executable).parent / "medallion"), "source", "freshness",
                          "--project-dir", str(root), "-s", "source:landing.events"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.split()[:2] == ["PASS", "landing.events"], run.stdout
    assert "Traceback" not in run.stdout + run.stderr
    report = json.loads((root / "target/sources.json").read_text())["results"]
    assert 25 * 60 < report[0]["age_seconds"] < 35 * 60
