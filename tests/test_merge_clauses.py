"""A merge model's own MERGE clauses: conditional `when_matched` updates and deletes applied
in order, `when_not_matched_by_source` updates and deletes of stored rows a batch lacks, and
dbt's merge_update_columns / merge_exclude_columns. Both engines: each evaluates the clauses
inside its own MERGE (Spark SQL on delta-spark, delta-rs's DataFusion on the embedded engine),
which is why a clause may use only what both read alike; a clause outside that is refused at
load, as are clauses in the wrong shape."""

import os
import time

import pytest
from conftest import at, read_delta
from helpers import land

from medallion_cli import commands
from medallion_cli.core.errors import MedallionError

SOURCES = """\
sources:
  - name: landing
    path: landing
    tables:
      - name: orders
        format: json
        schema: "id bigint, amount int, status string, seq int"
        options: {maxFilesPerTrigger: 1}
"""

CLAUSES = """\
merge_exclude_columns=['first_seq'],
when_matched=[
  {'condition': "s.status = 'cancelled' and t.status <> 'shipped'", 'then': 'delete'},
  {'condition': "t.status = 'shipped'", 'then': 'update',
   'set': {'note': "'changed after shipping'", 'seq': 's.seq'}},
  {'condition': "s.amount <> t.amount or lower(s.status) <> t.status", 'then': 'update'}],
when_not_matched_by_source=[
  {'condition': "t.status in ('placed')", 'then': 'update', 'set': {'status': "'stale'"}}]"""


def model(clauses: str = CLAUSES) -> str:
    return f"""\
{{{{ config(materialized='streaming', strategy='merge', unique_key='id', sequence_by='seq',
{clauses}) }}}}
select id, amount, status, seq, seq as first_seq, cast(null as string) as note
from {{{{ source('landing', 'orders') }}}} where _corrupt_record is null
"""


def order(id, amount, status, seq):
    return {"id": id, "amount": amount, "status": status, "seq": seq}


def rows(root):
    return [(r["id"], r["amount"], r["status"], r["seq"], r["first_seq"], r["note"])
            for r in sorted(read_delta(at(root, "silver/orders")), key=lambda r: r["id"])]


def test_matched_rows_take_the_first_clause_that_holds_and_missing_rows_theirs(
        project, build, engine_name):
    root = project({"models/sources.yml": SOURCES, "models/silver/orders.sql": model()})
    land(root, "000.json", [order(1, 10, "placed", 1), order(2, 20, "shipped", 1),
                            order(3, 30, "placed", 1), order(4, 40, "placed", 1),
                            order(6, 60, "paid", 1)])
    assert build(root)["orders"].status == "success"
    land(root, "001.json", [
        order(1, 10, "cancelled", 2),  # cancelled before shipping: deleted
        order(2, 20, "cancelled", 2),  # shipped: the second clause notes it, status kept
        order(3, 35, "placed", 2),  # changed: updated, but first_seq is excluded
        order(6, 60, "paid", 2),  # nothing changed but seq: no clause holds, row kept as is
        order(5, 50, "placed", 2)])  # new: inserted; 4 is missing and placed: stale
    result = build(root)["orders"]
    assert result.status == "success", result.message
    assert rows(root) == [(2, 20, "shipped", 2, 1, "changed after shipping"),
                          (3, 35, "placed", 2, 1, None), (4, 40, "stale", 1, 1, None),
                          (5, 50, "placed", 2, 2, None), (6, 60, "paid", 1, 1, None)]
    # an event older than the stored row changes nothing, whatever the clauses say
    land(root, "002.json", [order(3, 35, "cancelled", 1)])
    assert build(root)["orders"].status == "success"
    assert rows(root) == [(2, 20, "shipped", 2, 1, "changed after shipping"),
                          (3, 35, "placed", 2, 1, None), (4, 40, "stale", 1, 1, None),
                          (5, 50, "stale", 2, 2, None), (6, 60, "paid", 1, 1, None)]


def test_merge_update_columns_update_only_those_and_missing_rows_can_be_deleted(
        project, build, engine_name):
    clauses = """merge_update_columns=['amount', 'seq'],
when_not_matched_by_source=[{'condition': "t.status = 'placed'", 'then': 'delete'}]"""
    root = project({"models/sources.yml": SOURCES, "models/silver/orders.sql": model(clauses)})
    land(root, "000.json", [order(1, 10, "placed", 1), order(2, 20, "paid", 1)])
    assert build(root)["orders"].status == "success"
    land(root, "001.json", [order(2, 25, "refunded", 2)])
    assert build(root)["orders"].status == "success"
    assert rows(root) == [(2, 25, "paid", 2, 1, None)]  # status not updated; 1 deleted


@pytest.mark.unit
@pytest.mark.parametrize("clauses, said", [
    ("when_matched={'then': 'delete'}", "config 'when_matched' must be a list of clauses"),
    ("when_matched=[{'then': 'merge'}]", "when_matched clause 1 needs then: update or delete"),
    ("when_matched=[{'then': 'update', 'when': 's.a = 1'}]", "unknown: when"),
    ("when_matched=[{'then': 'delete'}, {'then': 'update'}]",
     "when_matched clause 1 has no condition but is not the last"),
    ("when_matched=[{'condition': 'status = 1', 'then': 'delete'}]",
     "when_matched clause 1: column 'status' must name its row, as s.status or t.status"),
    ("when_not_matched_by_source=[{'condition': 's.seq > 1', 'then': 'delete'}]",
     "when_not_matched_by_source clause 1: column 's.seq' must name its row, as t.seq"),
    ("when_not_matched_by_source=[{'then': 'update'}]", "which needs it here: the batch has no "
                                                         "row"),
    ("when_matched=[{'then': 'delete', 'set': {'a': '1'}}]", "only an update has one"),
    ("when_matched=[{'condition': 'date_sub(t.d, 3) < s.d', 'then': 'delete'}]",
     "uses date_sub(), which both engines' MERGE do not read alike"),
    ("when_matched=[{'condition': 's.a in (select 1)', 'then': 'delete'}]", "uses a subquery"),
    ("when_matched=[{'condition': 's.a = = 1', 'then': 'delete'}]", "is not SQL"),
    ("merge_update_columns=['a'], merge_exclude_columns=['b']",
     "set merge_update_columns or merge_exclude_columns, not both"),
    ("merge_update_columns=['a'], scd_type=2",
     "merge_update_columns is for strategy 'merge' with scd_type 1"),
])
def test_clauses_in_the_wrong_shape_are_refused_in_one_line_naming_the_file(project, clauses,
                                                                           said):
    root = project({"models/sources.yml": SOURCES, "models/silver/orders.sql": model(clauses)})
    with pytest.raises(MedallionError) as caught:
        commands.invocation.load(commands.Invocation(project_dir=str(root)))
    message = str(caught.value)
    assert message.startswith("models/silver/orders.sql") and said in message, message


@pytest.mark.unit
def test_a_column_the_clauses_name_and_the_select_lacks_is_a_static_finding(project):
    from medallion_cli.commands.invocation import load
    from medallion_cli.report.static_checks import check_models

    clauses = """merge_exclude_columns=['frist_seq'],
when_matched=[{'condition': "s.stauts = 'cancelled'", 'then': 'delete'}],
when_not_matched_by_source=[{'then': 'update', 'set': {'nte': "'gone'"}}]"""
    root = project({"models/sources.yml": SOURCES, "models/silver/orders.sql": model(clauses)})
    loaded = load(commands.Invocation(project_dir=str(root)))
    found = check_models(loaded.project, loaded.graph, ["orders"], lambda path: None).findings
    assert [str(f).splitlines()[0] for f in found] == [
        "models/silver/orders.sql:2:25: merge_exclude_columns names column 'frist_seq', which "
        "the SELECT does not give; did you mean 'first_seq'?",
        "models/silver/orders.sql:3:30: when_matched names column 's.stauts', which the SELECT "
        "does not give; did you mean 'status'?",
        "models/silver/orders.sql:4:57: when_not_matched_by_source names column 'nte', which "
        "the SELECT does not give; did you mean 'note'?"]
    # the correct clauses raise nothing
    root = project({"models/sources.yml": SOURCES, "models/silver/orders.sql": model()})
    loaded = load(commands.Invocation(project_dir=str(root)))
    assert check_models(loaded.project, loaded.graph, ["orders"], lambda path: None).findings == []


def test_snapshots_landed_one_per_batch_are_applied_in_turn(project, build, engine_name):
    """A source that sends whole snapshots: what a snapshot lacks is deleted, what changed is
    updated, what is new is inserted, each snapshot once and in its turn."""
    clauses = "when_not_matched_by_source=[{'then': 'delete'}]"
    root = project({"models/sources.yml": SOURCES, "models/silver/orders.sql": model(clauses)})
    snapshots = [[order(1, 10, "placed", 1), order(2, 20, "placed", 1), order(3, 30, "paid", 1)],
                 [order(1, 15, "paid", 2), order(3, 30, "paid", 2)],
                 [order(3, 30, "shipped", 3), order(4, 40, "placed", 3)]]
    land(root, "000.json", snapshots[0])
    assert build(root)["orders"].status == "success"
    for number, snapshot in enumerate(snapshots[1:], 1):
        land(root, f"{number:03d}.json", snapshot)
        landed = root / f"landing/orders/{number:03d}.json"
        os.utime(landed, (time.time() + number, time.time() + number))  # read in this order
    assert build(root)["orders"].status == "success"  # two snapshots, in two micro-batches
    assert rows(root) == [(3, 30, "shipped", 3, 3, None), (4, 40, "placed", 3, 3, None)]
