"""A micro-batch's DataFrames are built in few calls into the JVM (materialize/).

Under --watch, a one-row silver batch of the sample spent a third of its 0.85 s building its
DataFrames: each pyspark Column object is a few py4j round trips (about 1,000 in that batch).
Built as SQL text, a step is a few calls whatever its columns. Each test counts the calls and
checks the rows. No engine is involved (the steps take and give DataFrames), so these run once.
"""

import datetime as dt
from contextlib import ExitStack, contextmanager
from types import SimpleNamespace

import pytest
from chispa import assert_df_equality
from py4j.clientserver import ClientServerConnection
from py4j.protocol import MEMORY_COMMAND_NAME
from pyspark.errors import ParseException

from medallion_cli.core.config import NodeConfig
from medallion_cli.materialize.checks import checked_rows
from medallion_cli.materialize.context import DELETE_COLUMN, Phases
from medallion_cli.materialize.writing.tombstones import TOMBSTONED, without_superseded
from medallion_cli.materialize.writing.writes import distinct_events

EVENTS = "order_id long, status string, op string, updated_at timestamp"
CONFIG = NodeConfig(materialized="streaming", strategy="merge", unique_key=("order_id",),
                    sequence_by=("updated_at",), delete_when="op = 'D'", except_columns=("op",))


@pytest.fixture
def jvm_calls(monkeypatch):
    """counted() -> [calls into the JVM] made inside the block."""
    original = ClientServerConnection.send_command

    @contextmanager
    def counted():
        made = [0]

        def counting(self, command):
            # not py4j's own releases of Java objects, which come when Python collects them
            made[0] += not command.startswith(MEMORY_COMMAND_NAME)
            return original(self, command)

        monkeypatch.setattr(ClientServerConnection, "send_command", counting)
        try:
            yield made
        finally:
            monkeypatch.setattr(ClientServerConnection, "send_command", original)
    return counted


def events(spark, rows):
    return spark.createDataFrame(rows, EVENTS)


def ts(text):
    return dt.datetime.fromisoformat(text)


def test_a_merge_batch_is_deduplicated_and_checked_against_tombstones_in_few_calls(
        spark, jvm_calls):
    batch = events(spark, [
        (1, "placed", "I", ts("2031-01-01 10:00:00")),
        (1, "shipped", "U", ts("2031-01-01 11:00:00")),
        (1, "shipped", "U", ts("2031-01-01 11:00:00")),  # delivered twice: kept once
        (2, "placed", "D", ts("2031-01-02 10:00:00")),   # a delete
        (3, "placed", "I", ts("2031-01-01 09:00:00")),   # older than its remembered delete
        (4, "placed", "I", ts("2031-01-03 09:00:00"))])  # newer than its remembered delete
    now = spark.sql("select current_timestamp() as t").first()["t"]
    tombstones = spark.createDataFrame(
        [(3, ts("2031-01-01 12:00:00"), now), (4, ts("2031-01-01 12:00:00"), now)],
        "order_id long, updated_at timestamp, _deleted_at timestamp")
    without_superseded(distinct_events(batch, CONFIG), CONFIG, tombstones)  # (lookups made once)
    with jvm_calls() as made:
        kept = without_superseded(distinct_events(batch, CONFIG), CONFIG, tombstones)
    expected = spark.createDataFrame([
        (1, "shipped", ts("2031-01-01 11:00:00"), False, False),
        (2, "placed", ts("2031-01-02 10:00:00"), True, False),
        (4, "placed", ts("2031-01-03 09:00:00"), False, True)],
        f"order_id long, status string, updated_at timestamp, {DELETE_COLUMN} boolean, "
        f"{TOMBSTONED} boolean")
    assert_df_equality(kept, expected, ignore_row_order=True, ignore_nullable=True)
    # 151 as SQL text; 544 as Column objects (the code before)
    assert made[0] <= 200


def test_rows_that_share_a_key_and_sequence_but_differ_still_stop_the_batch(spark):
    batch = events(spark, [(1, "placed", "I", ts("2031-01-01 10:00:00")),
                           (1, "shipped", "I", ts("2031-01-01 10:00:00"))])
    with pytest.raises(Exception, match=r"rows with the same unique_key \(order_id\) and "
                                        r"sequence_by \(updated_at\) differ, e\.g\. "
                                        r"\{\"order_id\":1,\"updated_at\":"):
        distinct_events(batch, CONFIG).collect()


def test_a_batch_is_checked_against_its_expectations_in_few_calls(spark, jvm_calls, tmp_path):
    rules = {"known_status": {"expect": "status in ('placed', 'shipped') -- the two we sell",
                              "on_violation": "drop"},
             "has order id": {"expect": "order_id is not null", "on_violation": "warn"},
             "recent": {"expect": "updated_at > '2030-01-01'", "on_violation": "fail"}}
    node = SimpleNamespace(name="silver_orders", config=NodeConfig(expectations=rules),
                           file=SimpleNamespace(rel_path="models/silver_orders.sql"))
    quarantined = []
    ctx = SimpleNamespace(
        project=SimpleNamespace(quarantine_path=lambda file: str(tmp_path / "quarantine")),
        phases=Phases(),
        engine=SimpleNamespace(write=lambda df, *args, **kwargs: quarantined.append(df),
                               capabilities=SimpleNamespace(observes_rows=True)))
    batch = events(spark, [(1, "placed", "I", ts("2031-01-01 10:00:00")),
                           (None, "lost", "I", ts("2031-01-01 10:00:00"))])
    with checked_rows(ctx, node, batch, replace=False, settled=False):
        pass  # (lookups made once)
    with ExitStack() as held:
        with jvm_calls() as made:
            checks = held.enter_context(checked_rows(ctx, node, batch, replace=False,
                                                     settled=False))
        # 40 as SQL text; 256 as Column objects (the code before)
        assert made[0] <= 60
        assert_df_equality(checks.rows, events(
            spark, [(1, "placed", "I", ts("2031-01-01 10:00:00"))]), ignore_nullable=True)
        checks.settle()
        assert checks.counts == {"known_status": 1, "has order id": 1, "recent": 0}
        assert checks.checked == 2
        (bad,) = quarantined
        assert [(r["status"], list(r["_failed_rules"])) for r in bad.collect()] == [
            ("lost", ["known_status", "has order id"])]


def test_a_rule_that_is_not_sql_fails_with_its_text(spark, tmp_path):
    node = SimpleNamespace(name="m", config=NodeConfig(expectations={
        "broken": {"expect": "status in (", "on_violation": "warn"}}),
        file=SimpleNamespace(rel_path="models/m.sql"))
    ctx = SimpleNamespace(project=SimpleNamespace(quarantine_path=lambda file: str(tmp_path)),
                          engine=SimpleNamespace(capabilities=SimpleNamespace(observes_rows=True)))
    with pytest.raises(ParseException, match=r"status in \("):
        with checked_rows(ctx, node, events(spark, []), replace=False, settled=False):
            pass
