"""Tables of sums and counts maintained per group (incremental_by) take their inputs' changes in
place: the write (a MERGE, or delta-spark's one-pass rewrite) adds each group's totals to its
stored row, and no stored row is read first, unless a sum may have become null; round by round,
each equals the same SQL recomputed in full."""

import json

import pytest
from conftest import DELTA_SPARK_IN_SLOW_TIER, read_delta

from medallion_cli.engines import engine_class

pytestmark = DELTA_SPARK_IN_SLOW_TIER

SOURCES = """\
sources:
  - name: landing
    path: landing
    tables:
      - name: orders
        format: json
        schema: "order_id bigint, customer_id bigint, amount decimal(10,2), tip bigint, op string, seq int"
"""
# amount is never null in these orders: a sum of it is null only in a group with no rows
TOTALS = """\
select customer_id, count(*) as orders, sum(amount) as amount, count(tip) as tips
from {{ ref('silver_orders') }}
group by customer_id
"""
# tip is null in some: a group that loses tips and gains none may have a null sum now
TIPS = """\
select customer_id, count(*) as orders, sum(tip) as tip
from {{ ref('silver_orders') }}
group by customer_id
"""
PER_GROUP = "{{ config(incremental_by='customer_id', incremental_min_rows=0) }}\n"
MODELS = {
    "models/sources.yml": SOURCES,
    "models/bronze/bronze_orders.sql":
        "{{ config(materialized='streaming') }}select * from {{ source('landing', 'orders') }}",
    "models/silver/silver_orders.sql": """\
{{ config(materialized='streaming', strategy='merge', unique_key='order_id', sequence_by='seq',
          delete_when="op = 'D'") }}
select * from {{ ref('bronze_orders') }}
""",
    "models/gold/totals.sql": PER_GROUP + TOTALS,
    "models/gold/totals_full.sql": TOTALS,
    # a file per customer: few of its files hold the groups a change touches
    "models/gold/totals_by_file.sql": PER_GROUP.replace(")", ", partition_by='customer_id')")
    + TOTALS,
    "models/gold/tips.sql": PER_GROUP + TIPS,
    "models/gold/tips_full.sql": TIPS,
}
IN_PLACE = "group(s) updated by adding their inputs' changes to their stored values"
ROUNDS = [
    # customer 1: two orders, one with no tip; customer 2; a customer not known (null); and
    # customers no change touches
    [(1, 1, "10.00", 1), (2, 1, "20.00", None), (3, 2, "5.00", 2), (4, None, "7.00", None)]
    + [(order, order, "1.00", None) for order in range(10, 16)],
    # a new customer; customer 1's order gains a tip; the null customer's only order deleted
    [(5, 3, "1.00", 3), (2, 1, "25.00", 4), (4, None, "7.00", None, "D")],
    # customer 1's order loses its tip: is the sum of tips 0 or null? (neither: 4, from order 2)
    # and customer 2 has no order left
    [(1, 1, "10.00", None), (3, 2, "5.00", 2, "D")],
    # sums that come to 0 are 0 when no value was null
    [(5, 3, "0.00", 3), (6, 4, "-2.50", None), (7, 4, "2.50", None)],
]


def land(root, number, orders, seq):
    folder = root / "landing/orders"
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"order_id": o[0], "customer_id": o[1], "amount": o[2], "tip": o[3],
                         "op": o[4] if len(o) > 4 else "U", "seq": seq + i}) + "\n"
             for i, o in enumerate(orders)]
    (folder / f"{number:03d}.json").write_text("".join(lines))


def gold(root, name):
    return read_delta(root / "warehouse/gold" / name)


def test_sums_and_counts_take_their_changes_in_place(project, build, engine_name):
    root = project(MODELS)
    messages = []
    for number, orders in enumerate(ROUNDS):
        land(root, number, orders, seq=100 * (number + 1))
        results = build(root)
        assert not [r.message for r in results.values() if r.failed]
        messages.append(tuple(results[name].message
                              for name in ("totals", "totals_by_file", "tips")))
        by_customer = {r["customer_id"]: r for r in gold(root, "totals_by_file")}
        assert by_customer == {r["customer_id"]: r for r in gold(root, "totals_full")}
        for name in ("totals", "tips"):
            assert gold(root, name) == gold(root, name + "_full"), (name, messages[-1])
    assert messages[0] == ("", "", "")  # the first build computes everything
    totals, by_file, tips = zip(*messages[1:])
    assert by_file == (f"3 {IN_PLACE}", f"2 {IN_PLACE}", f"2 {IN_PLACE}")  # one MERGE
    # delta-spark rewrites a table most of whose files hold touched groups, adding the totals
    # as it goes: its MERGE would rewrite them all, in two passes
    rewrites = not engine_class(engine_name).capabilities.merges_wide_cheaply
    for message, groups in zip(totals, (3, 2, 2)):
        assert message.startswith(f"{groups} {IN_PLACE}"), message
        assert ("; the table rewritten, as they reach most of its" in message) == rewrites
    assert tips[0].startswith(f"3 {IN_PLACE}")  # tips only gained
    assert tips[1].startswith("2 group(s) updated by adding their inputs' changes (1 recomputed")
    assert {r["customer_id"]: r["tip"] for r in gold(root, "tips") if r["customer_id"] < 10} == {
        1: 4, 3: 3, 4: None}
    assert [(r["orders"], r["amount"]) for r in gold(root, "totals")
            if r["customer_id"] in (3, 4)] == [(1, 0), (2, 0)]


@pytest.mark.unit
@pytest.mark.parametrize("sql, summed", [
    ("select day, count(*) as n, sum(x) as s, sum(o.y) as t, sum(x * y) as p from t as o "
     "group by day", (None, None, "x", "y", None)),
    ("select count(*) as n, sum(case when k = 1 then x end) as s, day from t group by day",
     (None, None, None)),
])
def test_the_input_column_each_sum_adds_up(sql, summed):
    """Only a sum of a plain input column can be shown never to turn null while its group has
    rows (its column holds no null); any other expression may be null."""
    from types import SimpleNamespace

    from medallion_cli.materialize.by_groups.aggregates import aggregates_of

    node = SimpleNamespace(sql=sql, refs=("t",), sources=(),
                           config=SimpleNamespace(incremental_by=("day",)))
    assert aggregates_of(node)[0].summed == summed
