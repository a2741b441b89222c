"""The sample project at the repository root builds, with the expected rows in every layer."""

import datetime as dt
import shutil
from decimal import Decimal

import pytest
from chispa import assert_df_equality
from conftest import model_tables, read_delta
from deltalake import DeltaTable
from helpers import PROJECT_PARTS, ROOT

from medallion_cli import commands


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """A copy of the root sample project, so tests never write into the repository."""
    dest = tmp_path_factory.mktemp("sample")
    for part in PROJECT_PARTS:
        src = ROOT / part
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / part)
    return dest


# The sample's target for each engine, and where it keeps its tables.
TARGETS = {"embedded": ("local", "warehouse"), "delta-spark": ("local-delta", "warehouse-delta")}


def test_sample_builds_every_table(sample, build, spark, monkeypatch, engine_name):
    monkeypatch.delenv("MEDALLION_WAREHOUSE", raising=False)
    target, warehouse = TARGETS[engine_name]
    results = build(sample, target=target)
    assert {r.status for r in results.values()} == {"success"}, {
        n: r.message for n, r in results.items() if r.failed}
    wh = sample / warehouse

    orders = {r["order_id"]: r["status"] for r in read_delta(wh / "silver/silver_orders")}
    # 1002 shipped (later update), 1003 kept 'placed' (the cancel is older), 1005 deleted,
    # 1007 landed twice but is one row
    assert orders == {1001: "placed", 1002: "shipped", 1003: "placed", 1004: "placed",
                      1006: "placed", 1007: "placed"}

    from medallion_cli.engines.embedded.engine import EmbeddedEngine
    from medallion_cli.load.project import load_project

    engine = EmbeddedEngine(load_project(sample).target)
    revenue = engine.read_table(wh / "gold/gold_daily_revenue")
    expected = spark.createDataFrame([
        (dt.date(2024, 5, 1), "coffee", 2, Decimal("108.30"), "EUR"),
        (dt.date(2024, 5, 1), "kitchen", 1, Decimal("29.99"), "EUR"),
        (dt.date(2024, 5, 2), "coffee", 1, Decimal("24.90"), "EUR"),
        (dt.date(2024, 5, 2), "kitchen", 2, Decimal("60.00"), "EUR"),
    ], "order_date date, category string, orders long, revenue decimal(12,2), currency string")
    assert_df_equality(revenue, expected, ignore_row_order=True, ignore_nullable=True)

    value = {r["customer_id"]: (r["orders"], str(r["lifetime_value"]))
             for r in read_delta(wh / "gold/gold_customer_value")}
    assert value == {1: (2, "79.79"), 2: (2, "36.90"), 3: (1, "58.50"), 4: (0, "0.00"),
                     5: (1, "48.00")}
    funnel = {str(r["event_date"]): (r["viewed"], r["carted"], r["purchased"])
              for r in read_delta(wh / "gold/gold_funnel_conversion")}
    assert funnel == {"2024-05-01": (4, 3, 2), "2024-05-02": (3, 1, 2)}  # duplicate e-0013 once
    history = [(r["customer_id"], r["email"], r["is_current"])
               for r in read_delta(wh / "silver/silver_customers")]
    assert len(history) == 6  # five customers, one of them changed once (SCD2 keeps both)
    assert [(e, cur) for c, e, cur in history if c == 2] == [
        ("grace.hopper@example.com", True), ("grace@example.com", False)]
    bronze = read_delta(wh / "bronze/bronze_orders")
    assert [r["_corrupt_record"] is not None for r in bronze].count(True) == 2  # kept, not dropped
    # silver's drop expectations put exactly the two malformed rows in its quarantine
    quarantine = sorted(((r["order_id"], r["_failed_rules"])
                         for r in read_delta(wh / "silver/silver_orders_quarantine")), key=str)
    assert quarantine == [(1008, ["valid_quantity"]),
                          (None, ["has_order_id", "valid_quantity", "known_status"])]
    assert results["silver_orders"].expectations == {
        "has_order_id": 1, "valid_quantity": 2, "known_status": 1}
    assert {r.kind for r in results.values()} == {"seed", "model", "test"}

    # Rebuilding with nothing changed writes nothing in any table (the event log records it).
    tables = model_tables(wh)
    versions = {p: DeltaTable(str(p)).version() for p in tables}
    again = build(sample, target=target)
    assert {n for n, r in again.items() if r.status != "up_to_date" and r.kind != "test"} == set()
    assert {p: DeltaTable(str(p)).version() for p in tables} == versions

    # A new day of orders (one moved to it, one new): gold is kept per group, and over inputs
    # this small (under incremental_min_rows) recomputed in full, saying so; the tables equal
    # a full recompute.
    new_day = sample / "landing/orders/orders_2024-05-03.json"
    new_day.write_text(
        '{"order_id": 1004, "customer_id": 3, "product_id": "P-200", "quantity": 1, '
        '"status": "shipped", "op": "U", "updated_at": "2024-05-03T08:00:00Z"}\n'
        '{"order_id": 1010, "customer_id": 2, "product_id": "P-100", "quantity": 1, '
        '"status": "placed", "op": "I", "updated_at": "2024-05-03T09:00:00Z"}\n')
    gold = ("gold_order_lines", "gold_daily_revenue", "gold_customer_value")
    try:
        changed = build(sample, target=target)
    finally:
        new_day.unlink()  # the module's other engine starts from the sample as it is
    for name in gold:
        assert changed[name].message.startswith("recomputed in full: its inputs hold "), name
        assert changed[name].message.endswith("rows, fewer than incremental_min_rows (1000000), "
                                              "which one pass reads sooner than the changed "
                                              "groups are found"), name
    maintained = {n: read_delta(wh / "gold" / n) for n in gold}
    build(sample, target=target, select=gold, full_refresh=True)
    assert {n: read_delta(wh / "gold" / n) for n in gold} == maintained


def test_sample_data_and_unit_tests_pass(sample, build, spark, engine_name, monkeypatch):
    monkeypatch.delenv("MEDALLION_WAREHOUSE", raising=False)
    target = TARGETS[engine_name][0]
    build(sample, target=target)
    inv = commands.Invocation(project_dir=str(sample), target=target)
    tested = commands.test(inv)  # the unit tests first, then the data tests (as dbt's test)
    assert [(r.kind, r.name, r.status) for r in tested[:1]] == [
        ("unit", "latest_event_wins_and_deletes_apply", "success")]
    data_tests = {r.name: r.status for r in tested[1:]}
    assert len(data_tests) == 14 and set(data_tests.values()) == {"success"}
    assert {r.kind for r in tested[1:]} == {"test"}
    assert "failing_example" not in data_tests  # kept out of the default run
    unit = {r.name: r.status for r in commands.unit_test(inv)}
    assert unit == {"latest_event_wins_and_deletes_apply": "success"}
    shown = commands.test(commands.Invocation(project_dir=str(sample), target=target,
                                        select=("failing_example",),
                                        vars={"show_failing_example": True}))
    assert [(r.name, r.status, r.rows) for r in shown] == [("failing_example", "error", 5)]


@pytest.mark.unit
def test_sample_profile_has_a_cluster_target_for_the_native_engine():
    from medallion_cli.load.project import load_project

    target = load_project(ROOT, target="cluster").target
    assert (target.engine, target.spark_master) == ("delta-spark", "spark://spark-master:7077")
    assert target.delta_jars is None  # unless MEDALLION_DELTA_JARS names a folder


@pytest.mark.unit
def test_sample_profile_has_a_local_delta_spark_target():
    from medallion_cli.load.project import load_project

    target = load_project(ROOT, target="local-delta").target
    assert (target.engine, target.spark_master, target.delta_jars) == (
        "delta-spark", "local[*]", None)  # the JARs `medallion jars` fetched


@pytest.mark.unit
def test_sample_cluster_target_puts_tables_and_checkpoints_on_s3(sample, monkeypatch):
    """The sample's cluster target lists offline (no engine), with object-store locations."""
    monkeypatch.delenv("MEDALLION_WAREHOUSE", raising=False)
    inv = commands.Invocation(project_dir=str(sample), target="cluster")
    rows = {row.name: row for row in commands.list_nodes(inv)}
    lake = "s3a://my-lakehouse/medallion"
    assert rows["silver_orders"].table == f"{lake}/silver/silver_orders"
    assert rows["bronze_orders"].checkpoint == f"{lake}/_checkpoints/bronze/bronze_orders"
