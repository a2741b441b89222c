"""MERGE gives the same table however events fall into batches: deletes stick (tombstones), a
null sequence is older than any value, and ties are refused unless a tiebreak orders them.

In a local folder: what a MERGE asks of an object store (the engine's merge and its commit) is
run on S3 by test_engine_contract.py (a merge with deletes, both engines) and by the sample built
from S3 in test_s3.py, whose silver models merge with deletes and keep SCD2 history. (These two
tests once ran on S3 too: 212 of the suite's seconds on a slow machine.)"""

import json
import time

import pytest
from conftest import at, delta_table, read_delta

SOURCES = """\
sources:
  - name: landing
    path: landing
    tables:
      - name: events
        format: json
        schema: "id bigint, v string, op string, seq int, tick int"
        options: {maxFilesPerTrigger: 1}
"""


def model(extra: str = "", scd: int = 1, sequence="'seq'") -> str:
    return f"""\
{{{{ config(materialized='streaming', strategy='merge', unique_key='id', sequence_by={sequence},
          delete_when="op = 'D'", scd_type={scd}{extra}) }}}}
select id, v, op, seq, tick from {{{{ source('landing', 'events') }}}} where _corrupt_record is null
"""


def land(root, name, events):
    folder = root / "landing/events"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps({"tick": 0, **e}) + "\n" for e in events))


def state(root, table="silver/m"):
    return sorted((r["id"], r["v"]) for r in read_delta(at(root, table)))


def build_in_batches(project, build, batches, scd=1, sequence="'seq'"):
    """One project building every batch in turn, and one building them all at once."""
    roots = []
    for split in (True, False):
        root = project({"models/sources.yml": SOURCES,
                        "models/silver/m.sql": model(scd=scd, sequence=sequence)})
        for n, batch in enumerate(batches if split else [sum(batches, [])]):
            land(root, f"{n:03d}.json", batch)
            result = build(root)["m"]
            assert result.status == "success", result.message
        roots.append(root)
    return roots


DELETE_THEN_LATE = [
    [{"id": 1, "v": "a", "op": "I", "seq": 1}, {"id": 2, "v": "b", "op": "I", "seq": 1}],
    [{"id": 1, "op": "D", "seq": 3}, {"id": 3, "op": "D", "seq": 5}],  # 3: deleted before seen
    [{"id": 1, "v": "late", "op": "U", "seq": 2},  # older than the delete: stays deleted
     {"id": 3, "v": "early", "op": "I", "seq": 4},  # older than its delete: never appears
     {"id": 2, "v": "b2", "op": "U", "seq": 2}],
]


def test_a_delete_sticks_against_a_later_older_event(project, build, engine_name):
    in_turns, at_once = build_in_batches(project, build, DELETE_THEN_LATE)
    assert state(in_turns) == state(at_once) == [(2, "b2")]
    tombstones = sorted((r["id"], r["seq"])
                        for r in read_delta(at(in_turns, "silver/m_tombstones")))
    assert tombstones == [(1, 3), (3, 5)]
    # a newer event brings a deleted key back, and forgets its tombstone
    land(in_turns, "009.json", [{"id": 1, "v": "back", "op": "I", "seq": 9}])
    build(in_turns)
    assert state(in_turns) == [(1, "back"), (2, "b2")]
    assert [r["id"] for r in read_delta(at(in_turns, "silver/m_tombstones"))] == [3]
    # Batch two's deletes match no tombstone: delta-spark appends them rather than MERGE
    # (seconds there); delta-rs merges them at an append's cost. Bringing a key back merges.
    operations = [h["operation"] for h in
                  delta_table(at(in_turns, "silver/m_tombstones")).history()][::-1]
    assert operations[1:] == ["WRITE" if engine_name == "delta-spark" else "MERGE", "MERGE"]


def test_a_delete_past_its_retention_is_forgotten_and_quiet_batches_write_no_tombstones(
        project, build):
    root = project({"models/sources.yml": SOURCES,
                    "models/silver/m.sql": model(", tombstone_retention='1 second'")})
    tombstones = at(root, "silver/m_tombstones")
    land(root, "000.json", [{"id": 1, "v": "a", "op": "I", "seq": 1},
                            {"id": 3, "v": "c", "op": "I", "seq": 1}])
    build(root)
    land(root, "001.json", [{"id": 1, "op": "D", "seq": 3}, {"id": 3, "op": "D", "seq": 3}])
    assert "tombstones" in build(root)["m"].phases  # a delete to remember
    version = delta_table(tombstones).version()
    time.sleep(1.5)  # past the retention
    land(root, "002.json", [{"id": 2, "v": "b", "op": "I", "seq": 1}])
    quiet = build(root)["m"]
    assert quiet.status == "success"
    # Nothing to remember or forget: no pass over the tombstones (the batch's own pass said
    # so), and no commit (the expired ones stay until one).
    assert "tombstones" not in quiet.phases
    assert delta_table(tombstones).version() == version
    assert sorted(r["id"] for r in read_delta(tombstones)) == [1, 3]
    # A key whose tombstone expired, deleted again: one tombstone for it (the batch's flag
    # counts expired tombstones too, so it is merged, not appended beside the old one), and the
    # MERGE forgets the other expired one.
    land(root, "003.json", [{"id": 3, "op": "D", "seq": 5}])
    build(root)
    assert [(r["id"], r["seq"]) for r in read_delta(tombstones)] == [(3, 5)]
    # an event older than the forgotten delete brings the key back, as if it never was deleted
    land(root, "004.json", [{"id": 1, "v": "late", "op": "U", "seq": 2}])
    build(root)
    assert state(root) == [(1, "late"), (2, "b")]


def test_scd2_history_is_the_same_however_events_fall_into_batches(project, build):
    in_turns, at_once = build_in_batches(project, build, DELETE_THEN_LATE, scd=2)

    def history(root):
        return sorted((r["id"], r["v"], r["valid_from"], r["valid_to"], r["is_current"])
                      for r in read_delta(at(root, "silver/m")))

    assert history(in_turns) == history(at_once) == [
        (1, "a", 1, 2, False), (1, "late", 2, 3, False),  # the late event is history
        (2, "b", 1, 2, False), (2, "b2", 2, None, True),
        (3, "early", 4, 5, False)]  # seen before its delete, closed by it


@pytest.mark.same_path_over_connect("test_a_delete_sticks_against_a_later_older_event")
def test_a_null_sequence_is_older_than_any_value(project, build):
    batches = [[{"id": 1, "v": "no-seq", "op": "I", "seq": None}],
               [{"id": 1, "v": "valid", "op": "U", "seq": 1}],
               [{"id": 1, "v": "no-seq again", "op": "U", "seq": None}]]
    in_turns, at_once = build_in_batches(project, build, batches)
    assert state(in_turns) == state(at_once) == [(1, "valid")]


def test_differing_rows_with_one_key_and_sequence_in_a_batch_are_refused(project, build):
    root = project({"models/sources.yml": SOURCES, "models/silver/m.sql": model()})
    same = {"id": 1, "v": "x", "op": "I", "seq": 1}
    older = {"id": 1, "v": "older", "op": "I", "seq": 0}  # differs, but is not the latest
    land(root, "000.json", [same, older, same, {"id": 2, "v": "y", "op": "I", "seq": 1}])
    first = build(root)["m"]
    assert first.status == "success", first.message  # identical duplicates are one row
    assert state(root) == [(1, "x"), (2, "y")]
    p = {"id": 2, "v": "p", "op": "U", "seq": 2}
    land(root, "001.json", [p, p, {"id": 2, "v": "q", "op": "U", "seq": 2}, p])
    result = build(root)["m"]
    assert result.status == "error"
    assert 'rows with the same unique_key (id) and sequence_by (seq) differ, e.g. {"id":2,"seq":2}'\
        in result.message
    assert "add a column that breaks such ties to sequence_by" in result.message
    assert state(root) == [(1, "x"), (2, "y")]  # the batch wrote nothing


@pytest.mark.same_path_over_connect("test_a_delete_sticks_against_a_later_older_event")
def test_a_second_sequence_column_breaks_ties(project, build):
    batches = [[{"id": 1, "v": "first", "op": "I", "seq": 1, "tick": 1},
                {"id": 1, "v": "second", "op": "U", "seq": 1, "tick": 2}],
               [{"id": 1, "v": "older tick", "op": "U", "seq": 1, "tick": 0}]]
    in_turns, at_once = build_in_batches(project, build, batches, sequence="['seq', 'tick']")
    assert state(in_turns) == state(at_once) == [(1, "second")]


@pytest.mark.parametrize("engine_name", ["embedded"])  # config checking needs no engine
def test_tombstone_retention_must_be_an_interval(project, engine_name):
    from medallion_cli import commands
    from medallion_cli.core.errors import MedallionError

    root = project({"models/sources.yml": SOURCES,
                    "models/silver/m.sql": model(", tombstone_retention='forever'")})
    with pytest.raises(MedallionError, match="tombstone_retention"):
        commands.invocation.load(commands.Invocation(project_dir=str(root)))


# Re-delivered unchanged rows, a change only in an untracked column, and a late event that
# starts a run the stored version was part of (that stored version is deleted).
TRACKED = [
    [{"id": 1, "v": "a", "op": "I", "seq": 1, "tick": 1}, {"id": 2, "v": "b", "op": "I", "seq": 1}],
    [{"id": 1, "v": "a", "op": "U", "seq": 2, "tick": 2},  # same v: no new version
     {"id": 2, "v": "b", "op": "U", "seq": 3}],
    [{"id": 1, "v": "c", "op": "U", "seq": 5, "tick": 5}],
    [{"id": 1, "v": "c", "op": "U", "seq": 4, "tick": 4}],  # late: c starts at 4, not 5
]


@pytest.mark.same_path_over_connect(
    "test_scd2_history_is_the_same_however_events_fall_into_batches")
def test_scd2_tracks_history_only_on_tracked_columns(project, build):
    roots = []
    for split in (True, False):
        root = project({"models/sources.yml": SOURCES, "models/silver/m.sql": model(
            ", track_history_except_columns=['op', 'tick']", scd=2)})
        for n, batch in enumerate(TRACKED if split else [sum(TRACKED, [])]):
            land(root, f"{n:03d}.json", batch)
            result = build(root)["m"]
            assert result.status == "success", result.message
        roots.append(root)

    def history(root):
        return sorted((r["id"], r["v"], r["tick"], r["valid_from"], r["valid_to"], r["is_current"])
                      for r in read_delta(at(root, "silver/m")))

    in_turns, at_once = roots
    assert history(in_turns) == history(at_once) == [
        (1, "a", 2, 1, 4, False),  # untracked tick updated in place, to its run's last value
        (1, "c", 5, 4, None, True),
        (2, "b", 0, 1, None, True)]


@pytest.mark.parametrize("materialized", ["streaming", "incremental"])
def test_rows_without_a_key_are_quarantined_and_counted_not_merged(project, build, materialized):
    """A null unique_key matches nothing and could never be updated or deleted: every MERGE
    model keeps such rows apart (unique_key_not_null, a drop rule of its own) and counts them."""
    text = model().replace("materialized='streaming'", f"materialized='{materialized}'")
    if materialized == "incremental":
        text = text.replace("where _corrupt_record", "where true or _corrupt_record")
    root = project({"models/sources.yml": SOURCES, "models/silver/m.sql": text})
    land(root, "1.json", [{"id": 1, "v": "a", "op": "I", "seq": 1},
                          {"id": None, "v": "lost", "op": "I", "seq": 1}])
    result = build(root)["m"]
    assert result.status == "success", result.message
    assert result.expectations == {"unique_key_not_null": 1}
    assert result.on_violation == {"unique_key_not_null": "drop"}
    assert state(root) == [(1, "a")]
    assert [r["v"] for r in read_delta(at(root, "silver/m_quarantine"))] == ["lost"]
