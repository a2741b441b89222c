"""AUTO CDC's options on merge models: except_columns (COLUMNS * EXCEPT: columns used only to
apply the changes stay out of the table) and ignore_null_updates (IGNORE NULL UPDATES: a null in
an update keeps the stored value, within a batch and across batches) and truncate_when (APPLY AS
TRUNCATE WHEN: an event that empties the table of every row not newer than it)."""

import json

import pytest
from conftest import read_delta

from medallion_cli.core.errors import MedallionError

SOURCES = """\
sources:
  - name: landing
    path: landing
    tables:
      - {name: customers, format: json, schema: "customer_id int, name string, email string, op string, seq int"}
"""
SILVER = """\
{{ config(materialized='streaming', strategy='merge', unique_key='customer_id', sequence_by='seq',
          delete_when="op = 'D'", except_columns=['op'], ignore_null_updates=true) }}
select * from {{ source('landing', 'customers') }}
"""


def land(root, name, events):
    folder = root / "landing/customers"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(e) + "\n" for e in events))


def event(customer_id, name, email, op, seq):
    return {"customer_id": customer_id, "name": name, "email": email, "op": op, "seq": seq}


def test_changes_keep_stored_values_for_nulls_and_leave_cdc_columns_out(project, build):
    root = project({"models/sources.yml": SOURCES, "models/silver/customers.sql": SILVER})
    table = root / "warehouse/silver/customers"

    def rows():
        return [{k: r[k] for k in ("customer_id", "name", "email")} for r in read_delta(table)]

    land(root, "1.json", [event(1, "Ada", "ada@old", "I", 1), event(2, "Bob", "bob@x", "I", 2),
                          event(1, None, "ada@new", "U", 3)])  # same batch: name kept
    assert build(root)["customers"].status == "success"
    assert rows() == [{"customer_id": 1, "name": "Ada", "email": "ada@new"},
                      {"customer_id": 2, "name": "Bob", "email": "bob@x"}]
    assert "op" not in read_delta(table)[0]  # used to apply the changes, not kept
    land(root, "2.json", [event(2, "Robert", None, "U", 4), event(1, None, None, "U", 5)])
    assert build(root)["customers"].status == "success"  # across batches: the table's values
    assert rows() == [{"customer_id": 1, "name": "Ada", "email": "ada@new"},
                      {"customer_id": 2, "name": "Robert", "email": "bob@x"}]
    land(root, "3.json", [event(1, None, None, "D", 6)])
    build(root)
    assert rows() == [{"customer_id": 2, "name": "Robert", "email": "bob@x"}]


TRUNCATING = SILVER.replace("ignore_null_updates=true", "truncate_when=\"op = 'T'\"")
TRUNCATE_ROUNDS = [
    # earlier rows emptied by the truncate at 3; customer 3 comes after it
    [event(1, "Ada", "a@x", "I", 1), event(2, "Bob", "b@x", "I", 2),
     event(None, None, None, "T", 3), event(3, "Cy", "c@x", "I", 4)],
    # customer 4's event is older than the truncate remembered from the last build: it stays out
    [event(4, "Dee", "d@x", "I", 2), event(5, "Eve", "e@x", "I", 6)],
    # a late truncate at 5: stored customer 3 (4) goes, 5 (6) is newer and stays; 6 at the
    # truncate's own sequence goes with it
    [event(None, None, None, "T", 5), event(6, "Fay", "f@x", "I", 5),
     event(7, "Gus", "g@x", "I", 8), event(5, "Eve", "eve@x", "U", 9)],
]


def test_a_truncate_empties_what_came_before_it_however_events_fall_into_batches(
        project, build):
    def customers(root):
        return sorted((r["customer_id"], r["email"])
                      for r in read_delta(root / "warehouse/silver/customers"))

    files = {"models/sources.yml": SOURCES, "models/silver/customers.sql": TRUNCATING}
    in_turns = project(files)
    after = []
    for number, events in enumerate(TRUNCATE_ROUNDS):
        land(in_turns, f"{number}.json", events)
        assert build(in_turns)["customers"].status == "success"
        after.append(customers(in_turns))
    assert after == [[(3, "c@x")], [(3, "c@x"), (5, "e@x")], [(5, "eve@x"), (7, "g@x")]]
    at_once = project(files)
    land(at_once, "all.json", [e for events in TRUNCATE_ROUNDS for e in events])
    assert build(at_once)["customers"].status == "success"
    assert customers(at_once) == after[-1]
    # a full refresh forgets the truncates it remembered, and rebuilds the same from the files
    assert build(in_turns, full_refresh=True)["customers"].status == "success"
    assert customers(in_turns) == after[-1]


@pytest.mark.parametrize("engine_name", ["embedded"])  # refused when the config is read
@pytest.mark.parametrize("config, error", [
    ("except_columns=['customer_id']", "except_columns names customer_id, which the table needs"),
    ("ignore_null_updates=true, scd_type=2", "ignore_null_updates is for scd_type 1"),
    ("track_history_columns=['name']", "track_history_columns and track_history_except_columns "
                                       "are for scd_type 2"),
    ("scd_type=2, track_history_columns=['name'], track_history_except_columns=['email']",
     "set track_history_columns or track_history_except_columns, not both"),
    ("truncate_when=\"op = 'T'\", scd_type=2",
     "truncate_when needs strategy 'merge' with scd_type 1 and sequence_by"),
])
def test_cdc_options_that_cannot_work_are_refused(project, build, engine_name, config, error):
    silver = SILVER.replace("except_columns=['op'], ignore_null_updates=true", config)
    root = project({"models/sources.yml": SOURCES, "models/silver/customers.sql": silver})
    with pytest.raises(MedallionError, match=error):
        build(root)


@pytest.mark.parametrize("engine_name", ["embedded"])
def test_cdc_options_are_for_merge_models(project, build, engine_name):
    root = project({"models/sources.yml": SOURCES, "models/silver/customers.sql":
                    "{{ config(materialized='streaming', except_columns=['op']) }}"
                    "select * from {{ source('landing', 'customers') }}"})
    with pytest.raises(MedallionError, match="except_columns and ignore_null_updates are for "
                                             "strategy 'merge'"):
        build(root)
