"""Building on real Delta tables with the embedded engine: each materialization's result."""

import datetime as dt
import json

import pytest
from chispa import assert_df_equality
from conftest import DELTA_SPARK_IN_SLOW_TIER, read_delta
from deltalake import DeltaTable

from medallion_cli import commands
from medallion_cli.core.errors import MedallionError
from medallion_cli.run.runner import NodeResult
from medallion_cli.run.scheduler import execute

pytestmark = DELTA_SPARK_IN_SLOW_TIER


def land(root, rel, rows):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def version(path):
    return DeltaTable(str(path)).version()


EVENTS = """\
sources:
  - name: landing
    path: landing
    tables:
      - name: events
        format: json
        schema: "id bigint, kind string, amount int, seq int"
"""


def test_table_view_and_refs(project, build, spark):
    root = project({
        "models/bronze/numbers.sql": "select id, id * 10 as value from range(1, 5)",
        "models/silver/evens.sql": "{{ config(materialized='view') }}"
                                   "select * from {{ ref('numbers') }} where id % 2 = 0",
        "models/gold/total.sql": "select sum(value) as total, count(*) as n from {{ ref('evens') }}",
    })
    results = build(root)
    assert {n: r.status for n, r in results.items()} == {
        "numbers": "success", "evens": "success", "total": "success"}
    assert results["numbers"].rows == 4 and results["numbers"].version == 0
    assert not (root / "warehouse/silver/evens").exists()  # a view is compiled SQL, no table
    assert read_delta(root / "warehouse/gold/total") == [{"total": 60, "n": 2}]
    # nothing changed: nothing is rewritten
    again = build(root)
    assert again["numbers"].status == again["total"].status == "up_to_date"
    assert version(root / "warehouse/bronze/numbers") == 0
    # a changed model replaces its table atomically in one new version, and so do its dependents
    (root / "models/bronze/numbers.sql").write_text("select id, id * 10 as value from range(1, 7)")
    build(root)
    assert version(root / "warehouse/bronze/numbers") == 1
    assert read_delta(root / "warehouse/gold/total") == [{"total": 120, "n": 3}]


def test_incremental_append_with_is_incremental(project, build):
    root = project({"models/sources.yml": EVENTS, "models/events_log.sql": """\
        {{ config(materialized='incremental', strategy='append') }}
        select id, kind, amount from {{ source('landing', 'events') }}
        {% if is_incremental() %}
        where id > (select max(id) from {{ this }})
        {% endif %}
    """})
    land(root, "landing/events/1.json", [{"id": 1, "kind": "a", "amount": 5}])
    build(root)
    land(root, "landing/events/2.json", [{"id": 2, "kind": "b", "amount": 7}])
    result = build(root)["events_log"]
    assert result.rows == 1 and result.version == 1
    build(root)  # nothing new: appends no rows
    assert read_delta(root / "warehouse/models/events_log") == [
        {"id": 1, "kind": "a", "amount": 5}, {"id": 2, "kind": "b", "amount": 7}]


MERGE_MODEL = """\
{{ config(materialized='incremental', strategy='merge', unique_key='id', sequence_by='seq',
          delete_when="kind = 'delete'") }}
select id, kind, amount, seq from {{ source('landing', 'events') }}
"""


def test_merge_latest_wins_out_of_order_and_deletes(project, build):
    root = project({"models/sources.yml": EVENTS, "models/state.sql": MERGE_MODEL})
    land(root, "landing/events/1.json", [
        {"id": 1, "kind": "new", "amount": 10, "seq": 1},
        {"id": 2, "kind": "new", "amount": 20, "seq": 1},
        {"id": 2, "kind": "upd", "amount": 21, "seq": 2},  # same batch: latest wins
        {"id": 3, "kind": "new", "amount": 30, "seq": 1},
        {"id": 9, "kind": "delete", "amount": 0, "seq": 1},  # delete of an unknown key: no row
    ])
    build(root)
    table = root / "warehouse/models/state"
    assert read_delta(table) == [
        {"id": 1, "kind": "new", "amount": 10, "seq": 1},
        {"id": 2, "kind": "upd", "amount": 21, "seq": 2},
        {"id": 3, "kind": "new", "amount": 30, "seq": 1}]
    (root / "landing/events/1.json").unlink()
    land(root, "landing/events/2.json", [
        {"id": 1, "kind": "upd", "amount": 11, "seq": 2},
        {"id": 2, "kind": "old", "amount": 0, "seq": 1},  # out of order: older than the table's
        {"id": 3, "kind": "delete", "amount": 0, "seq": 2},
        {"id": 4, "kind": "new", "amount": 40, "seq": 1},
    ])
    build(root)
    expected = [{"id": 1, "kind": "upd", "amount": 11, "seq": 2},
                {"id": 2, "kind": "upd", "amount": 21, "seq": 2},
                {"id": 4, "kind": "new", "amount": 40, "seq": 1}]
    assert read_delta(table) == expected
    build(root)  # rebuilding with nothing new changes no row: merge is idempotent
    assert read_delta(table) == expected


def test_merge_on_composite_key(project, build):
    root = project({"models/sources.yml": EVENTS, "models/m.sql": """\
        {{ config(materialized='incremental', strategy='merge', unique_key=['id', 'kind']) }}
        select id, kind, amount from {{ source('landing', 'events') }}
    """})
    land(root, "landing/events/1.json", [{"id": 1, "kind": "a", "amount": 1},
                                         {"id": 1, "kind": "b", "amount": 2}])
    build(root)
    land(root, "landing/events/1.json", [{"id": 1, "kind": "b", "amount": 3},
                                         {"id": 2, "kind": "a", "amount": 4}])
    build(root)
    assert read_delta(root / "warehouse/models/m") == [
        {"id": 1, "kind": "a", "amount": 1}, {"id": 1, "kind": "b", "amount": 3},
        {"id": 2, "kind": "a", "amount": 4}]


def test_merge_with_duplicate_keys_fails_clearly_and_keeps_table(project, build):
    root = project({"models/sources.yml": EVENTS, "models/m.sql": """\
        {{ config(materialized='incremental', strategy='merge', unique_key='id') }}
        select id, amount from {{ source('landing', 'events') }}
    """})
    land(root, "landing/events/1.json", [{"id": 1, "amount": 1}])
    build(root)
    land(root, "landing/events/1.json", [{"id": 1, "amount": 2}, {"id": 1, "amount": 3}])
    result = build(root)["m"]
    assert result.status == "error" and "same unique_key (id)" in result.message
    assert read_delta(root / "warehouse/models/m") == [{"id": 1, "amount": 1}]
    assert version(root / "warehouse/models/m") == 0


def test_full_refresh_rebuilds_incremental(project, build):
    root = project({"models/sources.yml": EVENTS, "models/m.sql": """\
        {{ config(materialized='incremental') }}
        select id from {{ source('landing', 'events') }}
    """})
    land(root, "landing/events/1.json", [{"id": 1}])
    build(root)
    land(root, "landing/events/2.json", [{"id": 2}])
    build(root)
    assert len(read_delta(root / "warehouse/models/m")) == 3  # no filter: 1 appended again
    build(root, full_refresh=True)
    assert read_delta(root / "warehouse/models/m") == [{"id": 1}, {"id": 2}]


def test_an_is_incremental_model_with_nothing_new_is_up_to_date(project, build):
    """is_incremental() changes the SQL once the table exists; what decides whether the table
    is current is what the model reads, so the second build with nothing new runs nothing, and
    new input still runs it (incrementally), and so does an edit of either branch."""
    root = project({"models/sources.yml": EVENTS, "models/m.sql": """\
        {{ config(materialized='incremental') }}
        select id from {{ source('landing', 'events') }}
        {% if is_incremental() %} where id > (select max(id) from {{ this }}) {% endif %}
    """})
    land(root, "landing/events/1.json", [{"id": 1}])
    assert build(root)["m"].status == "success"
    assert build(root)["m"].status == "up_to_date"
    land(root, "landing/events/2.json", [{"id": 2}])
    assert build(root)["m"].status == "success"
    assert read_delta(root / "warehouse/models/m") == [{"id": 1}, {"id": 2}]
    assert build(root)["m"].status == "up_to_date"
    assert version(root / "warehouse/models/m") == 1
    (root / "models/m.sql").write_text((root / "models/m.sql").read_text().replace(
        "where id >", "where id >="))
    assert build(root)["m"].status == "success"  # the incremental branch changed


def test_failed_model_keeps_its_table_and_skips_downstream(project, build):
    files = {"models/a.sql": "select 1 as id", "models/b.sql": "select id from {{ ref('a') }}",
             "models/c.sql": "select id from {{ ref('b') }}", "models/d.sql": "select 2 as id"}
    root = project(files)
    build(root)
    # ANSI mode makes a bad cast a runtime error, after the previous table version exists
    (root / "models/b.sql").write_text("select cast('x' || id as int) as id from {{ ref('a') }}")
    results = build(root, threads=2)
    assert results["b"].status == "error" and "CAST" in results["b"].message.upper()
    assert results["b"].message.startswith("models/b.sql: ")  # Spark's error, with the file
    assert results["c"].status == "skipped" and "upstream 'b' error" in results["c"].message
    assert results["d"].status == "up_to_date"
    assert version(root / "warehouse/models/b") == 0
    assert read_delta(root / "warehouse/models/b") == [{"id": 1}]
    assert version(root / "warehouse/models/c") == 0


@pytest.mark.unit
def test_the_longest_chain_of_ready_nodes_starts_first():
    started = []

    def run(name):
        started.append(name)
        return NodeResult(name, "model", "table", "success")

    # a stands alone; b -> c -> d is the longest chain, so b and c go before a, which goes
    # before d (a tie: DAG order decides)
    order, parents = ["a", "b", "c", "d"], {"c": {"b"}, "d": {"c"}}
    results = execute(order, parents, run, {n: ("model", "table") for n in order}, threads=1)
    assert started == ["b", "c", "a", "d"]
    assert [r.name for r in results] == order  # reported in DAG order


@pytest.mark.unit
def test_a_seed_counts_for_no_work_in_the_chain_below():
    started = []

    def run(name):
        started.append(name)
        return NodeResult(name, *labels[name], "success")

    # gold reads the seed and the silver model: their chains are as long, but the seed's is
    # no work, so the silver model starts first although the seed comes first in DAG order
    order, parents = ["a_seed", "silver", "gold"], {"gold": {"a_seed", "silver"}}
    labels = {"a_seed": ("seed", "seed"), "silver": ("model", "table"),
              "gold": ("model", "table")}
    execute(order, parents, run, labels, threads=1)
    assert started == ["silver", "a_seed", "gold"]


@pytest.mark.one_engine("fail-fast and retry are the scheduler's and run_results.json's")
def test_fail_fast_stops_after_the_first_failure_and_retry_runs_the_rest(project, build):
    root = project({"models/a.sql": "select cast('x' as int) as id",  # fails when it runs
                    "models/a_total.sql": "select count(*) as n from {{ ref('a') }}",
                    "models/b.sql": "select 2 as id", "models/c.sql": "select id from {{ ref('b') }}"})
    results = build(root, threads=1, fail_fast=True)
    assert results["a"].status == "error"
    assert results["a_total"].message == "upstream 'a' error"
    assert {results[n].status for n in "bc"} == {"skipped"}
    assert results["b"].message == "--fail-fast: stopped after 'a' failed"
    assert not (root / "warehouse/models/b").exists()
    unchecked = build(root, threads=1)  # without it, what does not depend on `a` is built
    assert [unchecked[n].status for n in "abc"] == ["error", "success", "success"]
    build(root, threads=1, fail_fast=True)
    (root / "models/a.sql").write_text("select 1 as id")
    retried = {r.name: r for r in commands.retry(commands.Invocation(project_dir=str(root)))}
    assert {n: r.status for n, r in retried.items()} == {
        "a": "success", "a_total": "success", "b": "up_to_date", "c": "up_to_date"}
    assert commands.retry(commands.Invocation(project_dir=str(root))) == []  # nothing failed last


@pytest.mark.unit
def test_retry_errors(project):
    root = project({"models/a.sql": "select 1 as id"})
    with pytest.raises(MedallionError, match="nothing to retry: no run results yet"):
        commands.retry(commands.Invocation(project_dir=str(root)))


def test_schema_change_fail_and_append_new_columns(project, build):
    model = """\
        {{{{ config(materialized='incremental', unique_key='id', strategy='merge',
                  on_schema_change='{policy}') }}}}
        select id {extra} from {{{{ source('landing', 'events') }}}}
    """
    root = project({"models/sources.yml": EVENTS,
                    "models/m.sql": model.format(policy="fail", extra="")})
    land(root, "landing/events/1.json", [{"id": 1, "amount": 5}])
    build(root)
    (root / "models/m.sql").write_text(model.format(policy="fail", extra=", amount"))
    result = build(root)["m"]
    assert result.status == "error" and "new columns amount" in result.message
    (root / "models/m.sql").write_text(model.format(policy="append_new_columns", extra=", amount"))
    assert build(root)["m"].status == "success"
    assert read_delta(root / "warehouse/models/m") == [{"id": 1, "amount": 5}]


def test_partitioned_table_reads_back(project, build, spark):
    from medallion_cli.engines.embedded.engine import EmbeddedEngine
    from medallion_cli.load.project import load_project

    root = project({
        "models/p.sql": "{{ config(partition_by='day') }}"
                        "select id, date_add(date'2024-01-01', cast(id % 2 as int)) as day "
                        "from range(4)",
        "models/q.sql": "select day, count(*) as n from {{ ref('p') }} group by day",
    })
    build(root)
    assert sorted(p.name for p in (root / "warehouse/models/p").iterdir()
                  if p.name.startswith("day=")) == ["day=2024-01-01", "day=2024-01-02"]
    engine = EmbeddedEngine(load_project(root).target)
    expected = spark.createDataFrame([(dt.date(2024, 1, 1), 2), (dt.date(2024, 1, 2), 2)],
                                     "day date, n long")
    assert_df_equality(engine.read_table(root / "warehouse/models/q"), expected,
                       ignore_row_order=True, ignore_nullable=True)


def test_seed_types_reload_and_bad_seed(project, build, spark):
    root = project({
        "seeds/prices.csv": "sku,price,added\nA,1.50,2024-01-01\nB,2.25,2024-01-02\n",
        "seeds/props.yml": "seeds:\n  - name: prices\n    config:\n"
                           "      column_types: {price: 'decimal(6,2)', added: date}\n",
        "models/m.sql": "select sku, price * 2 as double_price from {{ ref('prices') }}",
    })
    first = build(root)
    assert first["prices"].rows == 2
    rows = read_delta(root / "warehouse/seeds/prices")
    assert rows[0]["price"].__class__.__name__ == "Decimal" and str(rows[0]["price"]) == "1.50"
    assert rows[1]["added"] == dt.date(2024, 1, 2)
    again = build(root, kinds=("seed",))
    assert again["prices"].status == "up_to_date"
    assert version(root / "warehouse/seeds/prices") == 0
    (root / "seeds/prices.csv").write_text("sku,price,added\nA,1.75,2024-01-01\n")
    assert build(root, kinds=("seed",))["prices"].version == 1
    assert [str(r["price"]) for r in read_delta(root / "warehouse/seeds/prices")] == ["1.75"]
    (root / "seeds/prices.csv").write_text("sku,price,added\nA,1.75\nB,2,2024-01-01,extra\n")
    bad = build(root, kinds=("seed",))["prices"]
    assert bad.status == "error"
    assert "seeds/prices.csv, line 2: row has 2 fields but the header has 3" in bad.message
    assert version(root / "warehouse/seeds/prices") == 1


@pytest.mark.one_engine("landing files are read by Spark before any engine writes")
def test_file_sources_carry_source_file_and_keep_bad_rows(project, build):
    root = project({"models/sources.yml": EVENTS,
                    "models/raw.sql": "select * from {{ source('landing', 'events') }}"})
    (root / "landing/events").mkdir(parents=True)
    (root / "landing/events/1.json").write_text('{"id": 1, "amount": 3}\n{"id": "oops"\n')
    build(root)
    rows = read_delta(root / "warehouse/models/raw")
    good = [r for r in rows if r["_corrupt_record"] is None]
    bad = [r for r in rows if r["_corrupt_record"] is not None]
    assert [r["id"] for r in good] == [1] and bad[0]["_corrupt_record"] == '{"id": "oops"'
    assert all(r["_source_file"].endswith("landing/events/1.json") for r in rows)


@pytest.mark.one_engine("the missing table is found before any read or write")
def test_ref_to_unbuilt_model_says_what_to_run(project, build):
    root = project({"models/a.sql": "select 1 as id", "models/b.sql": "select * from {{ ref('a') }}"})
    result = build(root, select=("b",))["b"]
    assert result.status == "error"
    assert "'a' has not been built yet" in result.message and "medallion build -s +a" in result.message


@pytest.mark.one_engine("raised while loading the project, before an engine is made")
def test_project_errors_stop_before_anything_runs(project, build):
    root = project({"models/a.sql": "select 1 as id", "models/b.sql": "select * from {{ ref('x') }}"})
    with pytest.raises(MedallionError):
        build(root)
    assert not (root / "warehouse").exists()


def test_batch_models_skip_when_inputs_sql_and_config_are_unchanged(project, build):
    root = project({"models/sources.yml": EVENTS,
                    "seeds/kinds.csv": "kind,label\na,Alpha\n",
                    "models/raw.sql": "select id, kind from {{ source('landing', 'events') }}",
                    "models/labelled.sql": "{{ config(materialized='view') }}"
                                           "select r.id, k.label from {{ ref('raw') }} r "
                                           "join {{ ref('kinds') }} k using (kind)",
                    "models/report.sql": "select label, count(*) as n from {{ ref('labelled') }} "
                                         "group by label"})
    land(root, "landing/events/1.json", [{"id": 1, "kind": "a"}])
    build(root)
    report = root / "warehouse/models/report"
    statuses = {n: r.status for n, r in build(root).items()}
    assert statuses == {"kinds": "up_to_date", "raw": "up_to_date", "labelled": "success",
                        "report": "up_to_date"}
    # compaction commits do not count as changes
    DeltaTable(str(root / "warehouse/models/raw")).optimize.compact()
    assert build(root)["report"].status == "up_to_date"
    # a new landing file changes raw, and through the view, the report
    land(root, "landing/events/2.json", [{"id": 2, "kind": "a"}])
    results = build(root)
    assert results["raw"].status == results["report"].status == "success"
    assert read_delta(report) == [{"label": "Alpha", "n": 2}]
    # a seed change reaches the report through the view
    (root / "seeds/kinds.csv").write_text("kind,label\na,A\n")
    assert build(root)["report"].status == "success"
    assert read_delta(report) == [{"label": "A", "n": 2}]
    # a config change rebuilds too, and --full-refresh always does
    (root / "models/report.sql").write_text("{{ config(tags=['x']) }}" + (
        root / "models/report.sql").read_text())
    assert build(root)["report"].status == "success"
    assert build(root, full_refresh=True)["report"].status == "success"


@pytest.mark.one_engine("a source's files are fingerprinted in Python, whatever the engine")
def test_a_source_that_is_one_file_is_watched_like_a_folder(project, build):
    """A source table's `path` may name one file: a build with that file unchanged skips the
    model, and an edit to it (same name, new rows) builds the model again."""
    root = project({"models/sources.yml": EVENTS.replace("- name: events",
                                                        "- name: events\n        path: events.json"),
                    "models/raw.sql": "select id, kind from {{ source('landing', 'events') }}"})
    land(root, "landing/events.json", [{"id": 1, "kind": "a"}])
    assert build(root)["raw"].rows == 1
    assert build(root)["raw"].status == "up_to_date"
    land(root, "landing/events.json", [{"id": 1, "kind": "a"}, {"id": 2, "kind": "b"}])
    again = build(root)["raw"]
    assert (again.status, again.rows) == ("success", 2)
    assert sorted(r["id"] for r in read_delta(root / "warehouse/models/raw")) == [1, 2]
