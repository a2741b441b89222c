"""Tables maintained per group (incremental_by): after random rounds of inserts, updates
(moving rows between groups too) and deletes on every input, each such table equals the same SQL
recomputed in full; and the build says when it recomputes in full instead."""

import json
import random

import pytest
from conftest import DELTA_SPARK_IN_SLOW_TIER, read_delta

from medallion_cli.engines import engine_class

# (the replace_groups MERGE: test_engine_contract.py)
pytestmark = DELTA_SPARK_IN_SLOW_TIER

SOURCES = """\
sources:
  - name: landing
    path: landing
    tables:
      - name: orders
        format: json
        schema: "order_id bigint, customer_id bigint, order_day int, status string, amount bigint, op string, seq int"
      - name: customers
        format: json
        schema: "customer_id bigint, country string, op string, seq int"
"""

CUSTOMER_TOTALS = """\
select c.customer_id, c.country, count(o.order_id) as orders,
       coalesce(sum(o.amount), 0) as total, max(o.status) as last_status
from {{ ref('silver_customers') }} as c
left join {{ ref('silver_orders') }} as o on o.customer_id = c.customer_id
group by c.customer_id, c.country
"""

DAY_STATUS = """\
select order_day, status, count(*) as orders, sum(amount) as amount
from {{ ref('silver_orders') }}
group by order_day, status
"""

# Sums and counts of one input, updated by adding the changes: a sum that is null where a group
# has no paid order, and sums that can come back to 0, so groups are recomputed now and then.
DAY_TOTALS = """\
select order_day, count(*) as orders, count(status) as with_status, sum(amount) as amount,
       sum(case when status = 'paid' then amount end) as paid, sum(amount % 3 - 1) as drift
from {{ ref('silver_orders') }}
where status <> 'shipped' or amount > 100
group by order_day
"""


def silver(table):
    return f"""\
{{{{ config(materialized='streaming', strategy='merge', unique_key='{table[:-1]}_id',
          sequence_by='seq', delete_when="op = 'D'") }}}}
select * from {{{{ ref('bronze_{table}') }}}}
"""


def bronze(table):
    return f"{{{{ config(materialized='streaming') }}}}select * from {{{{ source('landing', '{table}') }}}}"


# The maintained models keep their groups however few rows their inputs hold (their default
# recomputes inputs this small in full: test_small_inputs_are_recomputed_in_full).
PER_GROUP = ", incremental_min_rows=0) }}\n"
MODELS = {
    "models/sources.yml": SOURCES,
    "models/bronze/bronze_orders.sql": bronze("orders"),
    "models/bronze/bronze_customers.sql": bronze("customers"),
    "models/silver/silver_orders.sql": silver("orders"),
    "models/silver/silver_customers.sql": silver("customers"),
    "models/gold/customer_totals.sql":
        "{{ config(incremental_by='customer_id'" + PER_GROUP + CUSTOMER_TOTALS,
    "models/gold/customer_totals_full.sql": CUSTOMER_TOTALS,
    "models/gold/day_status.sql": "{{ config(incremental_by='order_day'" + PER_GROUP + DAY_STATUS,
    "models/gold/day_status_full.sql": DAY_STATUS,
    # partitioned by its groups: a file per day, so a round touching few days MERGEs them and
    # one touching most rewrites the table
    "models/gold/day_totals.sql":
        "{{ config(incremental_by='order_day', partition_by='order_day'" + PER_GROUP + DAY_TOTALS,
    "models/gold/day_totals_full.sql": DAY_TOTALS,
}
MAINTAINED = ("customer_totals", "day_status", "day_totals")


class Feed:
    """Random change events for orders and customers, landed as one JSON file per round."""

    def __init__(self, seed):
        self.random = random.Random(seed)
        self.orders, self.customers, self.seq, self.round = {}, {}, 1, 0

    def order(self, order_id):
        pick = self.random
        return {"order_id": order_id, "op": "U",
                "customer_id": pick.choice([None] + list(range(1, 13))),
                "order_day": pick.choice([None, 1, 2, 3, 4, 5, 6]),
                "status": pick.choice(["placed", "paid", "shipped"]),
                "amount": pick.randint(1, 500)}

    def next_round(self, root, new_orders, changes):
        pick, events = self.random, {"orders": [], "customers": []}
        for _ in range(new_orders):
            event = self.order(len(self.orders) + 1)
            self.orders[event["order_id"]] = event
            events["orders"].append(event)
        for _ in range(changes):
            order_id = pick.choice(list(self.orders))
            event = self.order(order_id) if pick.random() < 0.7 else {
                **self.orders[order_id], "op": "D"}
            self.orders[order_id] = event
            events["orders"].append(event)
            customer_id = pick.randint(1, 12)
            events["customers"].append({
                "customer_id": customer_id, "country": pick.choice(["DE", "FR", "NL"]),
                "op": "D" if pick.random() < 0.2 else "U"})
        self.round += 1
        for table, rows in events.items():
            folder = root / "landing" / table
            folder.mkdir(parents=True, exist_ok=True)
            lines = []
            for row in rows:
                self.seq += 1
                lines.append(json.dumps({**row, "seq": self.seq}) + "\n")
            (folder / f"{self.round:03d}.json").write_text("".join(lines))


def gold(root, name):
    return read_delta(root / "warehouse/gold" / name)


def test_groups_recomputed_from_changes_equal_a_full_recompute(project, build, engine_name):
    root = project(MODELS)
    feed = Feed(seed=15)
    feed.next_round(root, new_orders=40, changes=12)  # customers arrive with the first changes
    messages = []
    for size in (None, 8, 1, 5):
        if size is not None:
            feed.next_round(root, new_orders=2, changes=size)
        results = build(root)
        assert not [r.message for r in results.values() if r.failed]
        messages.append([results[name].message for name in MAINTAINED])
        for name in MAINTAINED:
            assert gold(root, name) == gold(root, name + "_full"), (name, messages[-1])
    assert messages[0] == ["", "", ""]  # the first build computes everything
    for totals, status, days in messages[1:]:
        assert ("group(s) recomputed from their input rows (not added up from the changes: "
                "it reads more than one relation)") in totals, totals
        assert "(not added up from the changes: it is not grouped by exactly order_day)" \
            in status, status
        assert "group(s) updated by adding their inputs' changes" in days, days
    rewritten = ["; the table rewritten, as they reach most of its" in m
                 for round_messages in messages[1:] for m in round_messages]
    if engine_class(engine_name).capabilities.merges_wide_cheaply:
        assert not any(rewritten), messages  # delta-rs's MERGE costs less than a rewrite
    else:
        assert any(rewritten) and not all(rewritten), messages  # both ways of replacing groups
    assert len(gold(root, "day_status")) > 6  # several rows per group
    assert None in [row["paid"] for row in gold(root, "day_totals")]
    # a paid sum that came back to 0 after removals: 0 or null? recomputed from its rows
    assert any("recomputed: a sum adding cannot tell from null" in days
               for _, _, days in messages)


def test_small_inputs_are_recomputed_in_full_unless_a_reader_keeps_to_the_changes(project,
                                                                                 build):
    """Inputs of fewer rows than incremental_min_rows (1M unless set): one pass over them is
    quicker than finding the changed groups (bench/incremental_bench.py), so the table is
    recomputed in full, saying so, and so is a table maintained from its changes. A table whose
    changes are read by a model kept per group at any size (incremental_min_rows=0) or by a
    stream keeps its groups: a full write's change feed has every row deleted and inserted."""
    def days(extra=""):
        return "{{ config(incremental_by='order_day'" + extra + ") }}\n" + DAY_STATUS

    def rollup(parent, extra=""):
        return ("{{ config(incremental_by='order_day'" + extra + ") }}\nselect order_day, "
                f"sum(orders) as orders from {{{{ ref('{parent}') }}}} group by order_day")

    kept = ("models/sources.yml", "models/bronze/bronze_orders.sql",
            "models/silver/silver_orders.sql", "models/gold/day_status_full.sql")
    root = project({**{k: MODELS[k] for k in kept},
                    "models/gold/small_days.sql": days(),
                    "models/gold/small_rollup.sql": rollup("small_days"),
                    # a plain table's own incremental_min_rows means nothing for small_days
                    "models/gold/small_copy.sql": "{{ config(incremental_min_rows=0) }}\n"
                    "select * from {{ ref('small_days') }}",
                    "models/gold/kept_days.sql": days(),
                    "models/gold/kept_rollup.sql": rollup("kept_days", ", incremental_min_rows=0"),
                    "models/gold/streamed_days.sql": days(),
                    "models/gold/day_changes.sql": "{{ config(materialized='streaming') }}\n"
                    "select * from {{ ref('streamed_days', changes=true) }}",
                    "models/gold/limited_days.sql": days(", incremental_min_rows=20")})
    feed = Feed(seed=7)
    feed.next_round(root, new_orders=40, changes=6)
    build(root)
    feed.next_round(root, new_orders=2, changes=3)
    results = build(root)
    assert not [r.message for r in results.values() if r.failed]
    orders = len(read_delta(root / "warehouse/silver/silver_orders"))
    full = gold(root, "day_status_full")
    assert orders > 20  # limited_days' inputs are over its limit
    said = ("recomputed in full: its inputs hold {} rows, fewer than incremental_min_rows "
            "(1000000), which one pass reads sooner than the changed groups are found")
    assert results["small_days"].message == said.format(orders)
    assert results["small_rollup"].message == said.format(len(full))
    for name in ("kept_days", "kept_rollup", "streamed_days", "limited_days"):
        assert "group(s) recomputed from their input rows" in results[name].message, name
    for name in ("small_days", "kept_days", "streamed_days", "limited_days"):
        assert gold(root, name) == full, name
    per_day = {}
    for row in full:
        per_day[row["order_day"]] = per_day.get(row["order_day"], 0) + row["orders"]
    for name in ("small_rollup", "kept_rollup"):
        assert {r["order_day"]: r["orders"] for r in gold(root, name)} == per_day, name


# The decision is made from the model's SQL and config, before either engine reads a change:
# one engine suffices for the reasons; the equivalence above runs on both.
@pytest.mark.parametrize("engine_name", ["embedded"])
def test_what_cannot_be_maintained_per_group_is_recomputed_in_full_saying_why(
        project, build, engine_name):
    ranked = ("{{ config(incremental_by='customer_id') }}\nselect customer_id, amount, "
              "rank() over (order by amount desc) as place from {{ ref('silver_orders') }}")
    by_country = "{{ config(incremental_by='country'" + PER_GROUP + CUSTOMER_TOTALS.replace(
        "c.customer_id, c.country", "c.country").replace("select c.country,", "select c.country,")
    float_days = ("{{ config(incremental_by='order_day'" + PER_GROUP
                  + "select order_day, count(*) as n, sum(amount * 1.5d) as v "
                  "from {{ ref('silver_orders') }} group by order_day")
    root = project({**MODELS, "models/gold/ranked.sql": ranked,
                    "models/gold/by_country.sql": by_country,
                    "models/gold/float_days.sql": float_days})
    feed = Feed(seed=3)
    feed.next_round(root, new_orders=10, changes=4)
    build(root)
    feed.next_round(root, new_orders=2, changes=3)
    results = build(root)
    assert results["ranked"].message == ("recomputed in full: a window function in its SQL is not "
                                         "partitioned by customer_id")
    assert results["by_country"].message == (
        "recomputed in full: silver_orders changed and has no column country")
    assert ("(not added up from the changes: the sum v is of type double, whose additions are "
            "not exact)") in results["float_days"].message
    edited = root / "models/gold/day_status.sql"
    edited.write_text(edited.read_text().replace("sum(amount)", "max(amount)"))
    feed.next_round(root, new_orders=1, changes=1)
    assert build(root)["day_status"].message == (
        "recomputed in full: its table was written by another SQL or config")


@pytest.mark.parametrize("engine_name", ["embedded"])  # refused before anything is written
def test_incremental_by_a_column_the_model_does_not_return_names_the_file(
        project, build, engine_name):
    root = project({"seeds/things.csv": "id,kind\n1,a\n",
                    "models/by_kind.sql": "{{ config(incremental_by='category') }}\n"
                                          "select kind, count(*) as n from {{ ref('things') }} "
                                          "group by kind"})
    result = build(root)["by_kind"]
    assert result.status == "error"
    assert "incremental_by names category, which the model does not return" in result.message
    assert "models/by_kind.sql" in result.message
    assert not list((root / "warehouse").rglob("by_kind"))  # nothing written
    # built before its input: says which input and how to build it
    fresh = project({"seeds/things.csv": "id,kind\n1,a\n", "models/by_kind.sql":
                     "{{ config(incremental_by='kind') }}\n"
                     "select kind, count(*) as n from {{ ref('things') }} group by kind"})
    result = build(fresh, select=("by_kind",))["by_kind"]
    assert "'things' has not been built yet" in result.message
    assert "medallion build -s +things" in result.message


@pytest.mark.unit
@pytest.mark.parametrize("sql, why_not", [
    ("select day, count(*) as n, count(x) as c, sum(x) as s from t where x > 1 group by day",
     None),
    ("select day, count(1) as n, sum(x * y) as s from t group by day", None),
    ("select day, sum(x) as s from t group by day",
     "it has no count(*), which tells when a group has no rows left"),
    ("select day, count(*) as n, avg(x) as a from t group by day", "'AVG(x) AS a' is not a sum or count"),
    ("select day, count(*) as n, sum(x) + 1 as s from t group by day",
     "'SUM(x) + 1 AS s' is not a sum or count"),
    ("select day, count(distinct x) as n from t group by day",
     "'COUNT(DISTINCT x) AS n' is not a sum or count"),
    ("select day, kind, count(*) as n from t group by day, kind",
     "it is not grouped by exactly day"),
    ("select day, count(*) as n from t group by day having count(*) > 1",
     "it has HAVING, DISTINCT or a window"),
    ("select t.day, count(*) as n from t join u on t.id = u.id group by t.day",
     "it reads more than one relation"),
    ("with w as (select * from t) select day, count(*) as n from w group by day",
     "its SQL is not one SELECT"),
])
def test_which_sql_is_added_up_from_changes(sql, why_not):
    from types import SimpleNamespace

    from medallion_cli.materialize.by_groups.aggregates import aggregates_of

    node = SimpleNamespace(sql=sql, refs=("t",), sources=(),
                           config=SimpleNamespace(incremental_by=("day",)))
    aggregates, reason = aggregates_of(node)
    assert reason == why_not
    assert (aggregates is None) == (why_not is not None)
