"""target_lag: how fresh a model must be. Without `materialized`, its lag chooses the mode a
build runs it in (dag/lags.py), and `medallion plan` says which and why, with the lag each
model can expect to hold (commands/modes.py). Unit tests: rendering and planning start no JVM;
the build runs on the embedded engine in the default tier and on delta-spark in the slow tier,
as the chosen config is the same NodeConfig either engine builds from (the engine contract
covers both engines' modes)."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from deltalake import DeltaTable

from medallion_cli.cli import main
from medallion_cli.commands import Invocation
from medallion_cli.commands.invocation import load
from medallion_cli.core.errors import ProjectError

SOURCES = """\
sources:
  - name: landing
    path: landing
    tables:
      - name: orders
        format: json
        schema: "order_id bigint, customer_id bigint, amount double, updated_at timestamp"
      - name: refunds
        format: json
        schema: "order_id bigint, customer_id bigint, amount double, updated_at timestamp"
"""

MODELS = {
    "models/sources.yml": SOURCES,
    "seeds/customers.csv": "customer_id,country\n1,NL\n2,FR\n",
    "models/bronze/orders.sql": """\
        {{ config(target_lag='10 seconds', event_time='updated_at') }}
        select *, current_timestamp() as _loaded_at from {{ source('landing', 'orders') }}""",
    "models/silver/clean_orders.sql": """\
        {{ config(target_lag='downstream', strategy='merge', unique_key='order_id') }}
        select order_id, customer_id, amount from {{ ref('orders') }} where amount > 0""",
    "models/silver/orders_by_country.sql": """\
        {{ config(target_lag='downstream') }}
        select o.order_id, c.country, o.amount
        from {{ ref('clean_orders') }} as o join {{ ref('customers') }} as c using (customer_id)""",
    "models/gold/revenue.sql": """\
        {{ config(target_lag='1 minute', incremental_by='country') }}
        select country, sum(amount) as revenue from {{ ref('orders_by_country') }}
        group by country""",
    "models/gold/feeds_joined.sql": """\
        {{ config(target_lag='1 day') }}
        select o.order_id, r.amount as refunded
        from {{ source('landing', 'orders') }} as o
        join {{ source('landing', 'refunds') }} as r using (order_id)""",
    "models/gold/new_orders.sql": """\
        {{ config(target_lag='1 hour', materialized='streaming', trigger='2 hours') }}
        select order_id, amount from {{ ref('orders') }}""",
    "models/gold/orders_only_new.sql": """\
        {{ config(target_lag='1 hour') }}
        select order_id, max(amount) as amount from {{ ref('orders') }}
        {% if is_incremental() %} where order_id > (select max(order_id) from {{ this }})
        {% endif %} group by order_id""",
    "models/gold/latest_by_country.sql": """\
        {{ config(target_lag='1 hour', strategy='merge', unique_key='country') }}
        select country, sum(amount) as amount from {{ ref('orders_by_country') }}
        group by country""",
    "models/gold/orders_per_customer.sql": """\
        {{ config(target_lag='1 hour', incremental_by='customer_id') }}
        select order_id, customer_id from {{ source('landing', 'orders') }}""",
    "models/gold/orders_filtered_by_hand.sql": """\
        {{ config(target_lag='1 hour') }}
        select order_id, amount from {{ ref('orders') }}
        {% if is_incremental() %} where order_id > (select max(order_id) from {{ this }})
        {% endif %}""",
    "models/gold/orders_downstream_of_nothing.sql": """\
        {{ config(target_lag='downstream') }}
        select order_id from {{ ref('clean_orders') }}""",
}


def planned(root, *args):
    result = CliRunner().invoke(main, ["plan", "--output", "json", "--project-dir", str(root),
                                       *args])
    assert result.exit_code == 0, result.output
    return {p["name"]: p for p in json.loads(result.output)}


@pytest.mark.unit
def test_a_lag_without_a_mode_chooses_one_and_plan_says_why(project):
    root = project(MODELS)
    plans = planned(root)
    config = {n: c.config for n, c in load(Invocation(project_dir=str(root))).graph.nodes.items()}
    # a row-by-row select from a feed streams, its trigger half its lag
    assert (config["orders"].materialized, config["orders"].trigger) == ("streaming", "5 seconds")
    assert plans["orders"]["mode"] == "stream (append), a micro-batch every 5 s"
    assert plans["orders"]["why"] == "its rows come one by one from landing.orders"
    # downstream: the shortest lag of its readers (revenue's minute through orders_by_country)
    assert plans["clean_orders"]["lag_seconds"] == 60
    assert config["clean_orders"].materialized == "streaming"
    assert plans["clean_orders"]["mode"].startswith("stream (merge)")
    # a merge table is no feed: what reads it refreshes as a batch, and says why
    assert config["orders_by_country"].materialized == "table"
    assert plans["orders_by_country"]["why"] == (
        "downstream: the lag of revenue, 60 seconds; it reads clean_orders, updated in place (strategy merge): a stream sees appends only")
    assert plans["revenue"]["why"] == "it computes over all rows at once (an aggregate)"
    assert plans["revenue"]["mode"].startswith("per-group refresh by country, ")
    assert plans["feeds_joined"]["why"] == (
        "it joins 2 feeds (landing.orders, landing.refunds): a stream join needs watermarks")
    assert plans["feeds_joined"]["mode"].startswith("full recompute, ")
    # its SQL asks is_incremental(): it refreshes on new rows, rendered as incremental
    assert config["orders_only_new"].materialized == "incremental"
    # a feed read row by row, but refreshed per group as its config asks
    assert config["orders_per_customer"].materialized == "table"
    assert plans["orders_per_customer"]["why"] == "its incremental_by asks for a refresh per group"
    assert config["orders_filtered_by_hand"].materialized == "incremental"
    assert plans["orders_filtered_by_hand"]["why"] == (
        "its SQL asks is_incremental(): it reads new rows itself, as a batch")
    # by key: its whole SELECT merged at each refresh, as a stream would merge its rows
    assert config["latest_by_country"].materialized == "incremental"
    assert plans["latest_by_country"]["mode"].startswith("incremental refresh (merge), ")
    assert plans["orders_only_new"]["mode"].startswith("incremental refresh (append), ")
    assert plans["orders_downstream_of_nothing"]["lag_seconds"] is None
    assert plans["orders_downstream_of_nothing"]["why"].startswith(
        "downstream, and nothing reading it has a lag")
    assert plans["orders_downstream_of_nothing"]["mode"] == "full recompute, when a build runs it"
    assert all(p["chosen"] for n, p in plans.items() if n != "new_orders")


@pytest.mark.unit
def test_a_mode_set_by_hand_is_kept_and_checked_against_the_lag(project):
    root = project(MODELS)
    plans = planned(root, "-s", "new_orders")
    assert list(plans) == ["new_orders"]
    plan = plans["new_orders"]
    assert (plan["chosen"], plan["why"]) == (False, "its config sets materialized 'streaming'")
    assert plan["mode"] == "stream (append), a micro-batch every 2 h"
    assert plan["problem"].startswith("expects to fall 2 h behind its sources, over its target "
                                      "lag of 60 min")
    said = CliRunner().invoke(main, ["plan", "--project-dir", str(root), "-s", "new_orders"])
    assert "WARN expects to fall 2 h behind" in said.output
    assert said.output.splitlines()[-1] == (
        "0 of 1 models with a target lag expect to hold it; not new_orders")


@pytest.mark.unit
def test_a_chained_batch_waits_for_what_its_inputs_leave_of_its_lag(project):
    plans = planned(project(MODELS))
    # orders_by_country's input falls 35 s behind (orders' 5 s trigger, then clean_orders' own
    # 30 s: half of revenue's minute); it waits half of what the minute leaves, and revenue
    # refreshes right after it
    by_country, revenue = plans["orders_by_country"], plans["revenue"]
    assert plans["clean_orders"]["expected_seconds"] == 35
    assert by_country["mode"] == "full recompute, 12 s after new input"
    assert by_country["expected_seconds"] == pytest.approx(35 + (60 - 35) / 2)
    assert revenue["mode"] == "per-group refresh by country, right after orders_by_country"
    assert revenue["expected_seconds"] == by_country["expected_seconds"]  # no work timed yet
    assert revenue["problem"] == ""


@pytest.mark.unit
@pytest.mark.parametrize("lag", ["10 sec", "0 seconds", "soon", 10])
def test_a_target_lag_that_is_no_interval_is_refused_naming_the_file(project, lag):
    root = project({**MODELS, "models/bronze/orders.sql": f"""\
        {{{{ config(target_lag={lag!r}) }}}}
        select * from {{{{ source('landing', 'orders') }}}}"""})
    with pytest.raises(ProjectError) as raised:
        load(Invocation(project_dir=str(root)))
    assert raised.value.path == "models/bronze/orders.sql"
    assert f"config 'target_lag' is '{lag}'" in str(raised.value)
    assert "'downstream'" in raised.value.hint


@pytest.mark.one_engine("the chosen config is the NodeConfig either engine builds from; plan, "
                        "status and metrics read the Delta and event logs with delta-rs")
def test_a_project_with_lags_only_builds_in_the_chosen_modes_and_plan_counts_its_runs(
        project, build, engine_name):
    root = project(MODELS)
    (root / "landing/orders").mkdir(parents=True)
    (root / "landing/refunds").mkdir(parents=True)
    (root / "landing/orders/1.json").write_text(
        '{"order_id": 1, "customer_id": 1, "amount": 10.0, "updated_at": "2026-12-01T10:00:00"}\n'
        '{"order_id": 2, "customer_id": 2, "amount": 5.0, "updated_at": "2026-12-01T10:01:00"}\n'
        '{"order_id": 3, "customer_id": 1, "amount": 7.5, "updated_at": "2026-12-01T10:02:00"}\n')
    results = build(root)
    assert {r.status for r in results.values()} == {"success"}, results
    assert {n: r.materialized for n, r in results.items()} == {
        "customers": "table", "orders": "streaming", "clean_orders": "streaming",
        "orders_by_country": "table", "revenue": "table", "feeds_joined": "table",
        "new_orders": "streaming", "orders_only_new": "incremental",
        "latest_by_country": "incremental", "orders_per_customer": "table",
        "orders_filtered_by_hand": "incremental",
        "orders_downstream_of_nothing": "table"}
    project_file = load(Invocation(project_dir=str(root))).project
    checkpoint = Path(project_file.checkpoint_path(project_file.nodes["orders"]))
    assert checkpoint.is_dir()  # a stream's, kept for the next build to go on from
    revenue = DeltaTable(str(root / "warehouse/gold/revenue")).to_pyarrow_table()
    assert sorted(zip(*revenue.to_pydict().values())) == [("FR", 5.0), ("NL", 17.5)]
    plans = planned(root)
    # a batch model's work is its last builds'; a stream's, its micro-batches timed under
    # --watch (a build's run of a stream counts its start and whole catch-up)
    assert plans["revenue"]["cost_seconds"] > 0
    assert plans["orders"]["cost_seconds"] is None
    assert plans["revenue"]["expected_seconds"] > plans["revenue"]["cost_seconds"]
    assert {p["change"] for p in plans.values()} == {""}  # as built
    # edited since: plan says what the next build does with each edit, per mode
    for name, edit in (("bronze/orders", "current_timestamp() as _loaded_at"),
                       ("gold/revenue", "sum(amount) as revenue"),
                       ("gold/orders_only_new", "max(amount) as amount")):
        model = root / f"models/{name}.sql"
        model.write_text(model.read_text().replace(edit, edit + ", 1 as edited"))
    edited = {n: p["change"] for n, p in planned(root).items() if p["change"]}
    assert edited["orders"].startswith("edited since its table was written: its stream goes on "
                                       "from its checkpoint, so the edit applies to rows "
                                       "arriving from now on")
    assert "medallion build --full-refresh -s orders+" in edited["orders"]
    assert edited["revenue"] == ("edited since its table was written: its next build "
                                 "recomputes every group (the groups kept are the old SQL's)")
    assert edited["orders_only_new"].startswith("edited since its table was written: its next "
                                                "build applies the edit to new rows only")
    assert set(edited) == {"orders", "revenue", "orders_only_new"}
    shown = CliRunner().invoke(main, ["plan", "-s", "revenue", "--project-dir", str(root)])
    assert "CHANGED: edited since its table was written: its next build recomputes every " \
        "group" in shown.output
    from medallion_cli.report.metrics import metrics_served
    from medallion_cli.testing.loopback import free_port

    port, loaded = free_port(), load(Invocation(project_dir=str(root)))
    with metrics_served(port, lambda: (loaded.project, loaded.graph)):
        text = scraped(port)
    assert 'medallion_table_rows{table="revenue"} 2.0' in text
    assert 'medallion_table_files{table="revenue"}' in text
    assert 'medallion_table_mean_file_bytes{table="revenue"}' in text
    assert 'medallion_compactions{table="orders"} 0.0' in text  # one file: nothing to compact
    assert 'medallion_lag_breach{table="orders"} 1.0' in text
    # its newest order is days old: its one micro-batch's lag is a breach, not hidden
    status = CliRunner().invoke(main, ["status", "-s", "orders", "--project-dir", str(root)])
    assert status.exit_code == 1, status.output
    assert status.output.splitlines()[2].strip().endswith(
        "over 1 write(s) in the last day; BREACH: 1 write(s) over it")


@pytest.mark.unit
def test_under_watch_a_batch_refreshed_to_a_lag_waits_its_wait_after_each_write(project):
    """build --watch takes the waits plan says, and holds such a model that long after each
    write, so that what lands meanwhile is refreshed together; a refresh that found it up to
    date holds nothing. Engine-free: the schedule is the watch loop's, whatever the engine."""
    from medallion_cli.commands.modes import refresh_waits
    from medallion_cli.commands.watch import RefreshSchedule
    from medallion_cli.run.runner import NodeResult

    waits = refresh_waits(load(Invocation(project_dir=str(project(MODELS)))))
    assert waits["orders_by_country"] == pytest.approx(12.5)
    assert waits["revenue"] == 0  # right after orders_by_country
    assert "orders" not in waits and "new_orders" not in waits  # streams keep their triggers
    schedule = RefreshSchedule(waits)
    schedule.told(NodeResult("orders_by_country", "model", "table", "up_to_date"), now=100)
    assert schedule.held(100) == set()
    schedule.told(NodeResult("orders_by_country", "model", "table", "success"), now=100)
    schedule.told(NodeResult("revenue", "model", "table", "success"), now=100)
    schedule.told(NodeResult("customers", "model", "table", "success"), now=100)  # no lag
    assert schedule.held(112) == {"orders_by_country"}
    assert schedule.held(113) == set()


def batch_events(warehouse, model, lags, at):
    """Micro-batch events as the event log keeps them, one per lag (seconds), ending at `at`."""
    import datetime as dt

    import pyarrow as pa
    from deltalake import write_deltalake

    from medallion_cli.report.eventlog import EVENT_COLUMNS, events_path

    rows = [{"run_id": "r", "event_type": "batch", "node": model, "status": "success",
             "event_time": at - dt.timedelta(minutes=len(lags) - i),
             "newest_event_time": at - dt.timedelta(minutes=len(lags) - i, seconds=lag),
             "batch_id": i} for i, lag in enumerate(lags)]
    rows.append({**rows[-1], "event_time": at - dt.timedelta(days=2), "newest_event_time":
                 at - dt.timedelta(days=3), "batch_id": -1})  # out of the day's window
    write_deltalake(events_path(str(warehouse)), pa.Table.from_pylist(rows, schema=EVENT_COLUMNS),
                    mode="append")


@pytest.mark.unit
@pytest.mark.parametrize("lags, exit_code, said", [
    ([2, 4, 3, 30], 1, "achieved p50 3 s, p95 30 s over 4 write(s) in the last day; BREACH: 1 "
                       "write(s) over it"),
    ([2, 4, 3, 9], 0, "achieved p50 3 s, p95 9 s over 4 write(s) in the last day"),
], ids=["breach", "held"])
def test_status_shows_each_lagged_tables_achieved_lag_and_exits_1_on_a_breach(
        project, lags, exit_code, said):
    """The lag a write achieved: its time minus the newest event time it reflected, both in
    the event log; p95 over the target lag is a breach, reported and exit 1."""
    import datetime as dt

    root = project(MODELS)
    batch_events(root / "warehouse", "orders", lags, dt.datetime.now(dt.timezone.utc))
    shown = CliRunner().invoke(main, ["status", "-s", "orders clean_orders customers",
                                      "--project-dir", str(root)])
    assert shown.exit_code == exit_code, shown.output
    lines = shown.output.splitlines()
    assert lines[lines.index(next(line for line in lines if line.startswith("orders "))) + 1
                 ].strip() == f"target lag 10 s; {said}"
    assert any(line.strip().startswith("target lag 60 s; no write with an event time")
               for line in lines)  # clean_orders: downstream of revenue's minute
    assert not any("customers" in line and "target lag" in line for line in lines)
    as_json = json.loads(CliRunner().invoke(main, ["status", "--output", "json", "-s", "orders",
                                                   "--project-dir", str(root)]).output)
    assert as_json[0]["lag"]["writes"] == 4 and as_json[0]["lag"]["target_seconds"] == 10
    assert as_json[0]["lag"]["breach"] is (exit_code == 1)


def scraped(port):
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as answer:
        return answer.read().decode()


@pytest.mark.unit
def test_metrics_serve_the_tables_figures_and_lags_for_prometheus_while_the_watch_runs(project):
    """build --watch --metrics-port: what status reads, at each scrape, on loopback; the port
    is closed with the watch. Engine-free: read from the Delta logs and the event log."""
    import datetime as dt
    import socket

    from medallion_cli.core.errors import MedallionError
    from medallion_cli.report.metrics import metrics_served
    from medallion_cli.testing.loopback import free_port

    root = project(MODELS)
    batch_events(root / "warehouse", "orders", [2, 4, 3, 30], dt.datetime.now(dt.timezone.utc))
    loaded = load(Invocation(project_dir=str(root)))
    port = free_port()
    with metrics_served(port, lambda: (loaded.project, loaded.graph)):
        text = scraped(port)
        with pytest.raises(MedallionError, match=f"--metrics-port {port}: in use"):
            with metrics_served(port, lambda: (loaded.project, loaded.graph)):
                pass
    assert 'medallion_target_lag_seconds{table="orders"} 10.0' in text
    assert 'medallion_target_lag_seconds{table="clean_orders"} 60.0' in text
    assert 'medallion_achieved_lag_seconds{quantile="0.95",table="orders"} 30.0' in text
    assert 'medallion_achieved_lag_seconds{quantile="0.5",table="orders"} 3.0' in text
    assert 'medallion_lag_breach{table="orders"} 1.0' in text
    assert 'medallion_lag_writes{table="orders"} 4.0' in text
    assert "medallion_table_rows{" not in text  # nothing built
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    refused = CliRunner().invoke(main, ["build", "--metrics-port", str(port), "--project-dir",
                                        str(root)])
    assert refused.exit_code == 2 and "add --watch" in refused.output


@pytest.mark.unit
def test_plan_on_a_project_without_lags_says_how_to_give_one(project):
    root = project({"models/silver/m.sql": "select 1 as id"})
    said = CliRunner().invoke(main, ["plan", "--project-dir", str(root)])
    assert said.exit_code == 0, said.output
    assert said.output.splitlines() == [
        "m                                lag -       full recompute, when a build runs it",
        "                                 no target_lag: it refreshes when a build runs it",
        "No model has a target_lag: with one, and no materialized, the lag chooses its mode "
        "(docs/streaming-and-cdc.md, Target lags)"]


@pytest.mark.unit
@pytest.mark.parametrize("config, said", [
    ("materialized='streaming', strategy='merge', unique_key='order_id', "
     "sequence_by='updated_at', scd_type=2",
     "a full refresh rebuilds its SCD2 history from those inputs: versions whose events are "
     "gone (landing files removed, Kafka past retention) are lost"),
    ("materialized='streaming', strategy='merge', unique_key='order_id', "
     "sequence_by='updated_at', delete_when='amount < 0'",
     "a full refresh forgets its remembered deletes (tombstones)"),
    ("materialized='table'", "recomputed in full at its next build"),
])
def test_plan_says_what_an_edit_does_to_history_and_deletes(project, config, said):
    """The table's last commit records the definition it was written with (as each build's
    does, materialize/state.py): written here by delta-rs alone, no JVM."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from medallion_cli.engines.deltars import commit_properties
    from medallion_cli.materialize.state import DEFINITION_KEY

    root = project({**MODELS, "models/silver/history.sql": f"""\
        {{{{ config({config}) }}}}
        select * from {{{{ ref('orders') }}}}"""})
    assert planned(root, "-s", "history")["history"]["change"] == ""  # no table yet
    write_deltalake(str(root / "warehouse/silver/history"), pa.table({"order_id": [1]}),
                    commit_properties=commit_properties({DEFINITION_KEY: "an older one"}, None))
    assert said in planned(root, "-s", "history")["history"]["change"]
