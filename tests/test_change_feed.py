"""Change feeds: a streaming model reads the row-level changes of a table kept by MERGE
(ref('x', changes=true)): inserts, update pre/post images and deletes, each once."""

import pytest
from conftest import read_delta
from helpers import BATCH_1, BATCH_2, BATCH_3, MODELS, expected_state, land, silver

FEED = """\
{{ config(materialized='streaming') }}
select order_id, status, seq, _change_type, _commit_version, _commit_timestamp
from {{ ref('silver_orders', changes=true) }}
"""


def changes(root):
    return read_delta(root / "warehouse/gold/order_changes")


def replayed(rows):
    """The table the changes describe, applied in commit order: what silver must hold."""
    state = {}
    for row in sorted(rows, key=lambda r: (r["_commit_version"], r["_change_type"] != "delete")):
        if row["_change_type"] in ("insert", "update_postimage"):
            state[row["order_id"]] = row
        elif row["_change_type"] == "delete":
            del state[row["order_id"]]
    return sorted(((r["order_id"], r["status"], r["seq"]) for r in state.values()))


def kinds(rows, version=None):
    return sorted((r["order_id"], r["_change_type"], r["status"]) for r in rows
                  if version is None or r["_commit_version"] > version)


def test_a_streaming_model_reads_each_change_of_a_merge_table_once(project, build):
    root = project({**MODELS, "models/gold/order_changes.sql": FEED})
    land(root, "001.json", BATCH_1)
    build(root)
    first = changes(root)
    assert kinds(first) == [(i, "insert", "placed") for i in range(1, 6)]
    silver_version = max(r["_commit_version"] for r in first)
    assert {r["_commit_timestamp"] is not None for r in first} == {True}

    land(root, "002.json", BATCH_2)
    build(root)
    second = changes(root)
    assert kinds(second, silver_version) == sorted([
        (1, "update_preimage", "placed"), (1, "update_postimage", "shipped"),
        (2, "update_preimage", "placed"), (2, "update_postimage", "paid"),
        (3, "delete", "placed"), (6, "insert", "placed")])

    land(root, "003.json", BATCH_3)
    build(root)
    third = changes(root)
    silver_version = max(r["_commit_version"] for r in second)
    # order 1's older update changes nothing, so it is not a change
    assert kinds(third, silver_version) == sorted([
        (4, "update_preimage", "placed"), (4, "update_postimage", "paid"),
        (7, "insert", "placed")])
    state = [(r["order_id"], r["status"], r["seq"]) for r in silver(root)]
    assert replayed(third) == state == [
        (e["order_id"], e["status"], e["seq"]) for e in expected_state(BATCH_1 + BATCH_2 + BATCH_3)]

    assert build(root)["order_changes"].status == "up_to_date"  # nothing new: nothing twice
    assert changes(root) == third


# Refused while reading the model's inputs, before either engine reads a table: one engine.
@pytest.mark.parametrize("engine_name", ["embedded"])
@pytest.mark.parametrize("sql,error", [
    ("select * from {{ ref('silver_orders', changes=true) }}",
     "ref('silver_orders', changes=true) is read by streaming models only"),
    ("{{ config(materialized='streaming') }}select * from {{ ref('orders_view', changes=true) }}",
     "'orders_view' is a view, which has no change feed"),
])
def test_change_feed_mistakes_name_the_file(project, build, engine_name, sql, error):
    root = project({**MODELS, "models/gold/orders_view.sql":
                    "{{ config(materialized='view') }}select * from {{ ref('silver_orders') }}",
                    "models/gold/reader.sql": sql})
    land(root, "001.json", BATCH_1)
    result = build(root)["reader"]
    assert result.status == "error"
    assert error in result.message and "models/gold/reader.sql" in result.message
