"""Landing files read with nothing lost or silently wrong: long values, invalid UTF-8, JSON fields
outside the schema, CSV headers that do not match, old mtimes, files that grow after a read."""

import base64
import json
import os
import time

import pytest
from conftest import DELTA_SPARK_IN_SLOW_TIER, read_delta

pytestmark = DELTA_SPARK_IN_SLOW_TIER

SOURCES = """\
sources:
  - name: landing
    path: landing
    tables:
      - name: events
        format: json
        schema: "id bigint, kind string"
{extra}
      - name: rows
        format: csv
        schema: "id bigint, kind string"
"""

MODELS = {
    "models/bronze/bronze_events.sql": """\
        {{ config(materialized='streaming') }}
        select * from {{ source('landing', 'events') }}
    """,
    "models/bronze/bronze_rows.sql": """\
        {{ config(materialized='streaming') }}
        select * from {{ source('landing', 'rows') }}
    """,
}


def landing_project(project, extra=""):
    root = project({**MODELS, "models/sources.yml": SOURCES.format(extra=extra)})
    for table in ("events", "rows"):
        (root / "landing" / table).mkdir(parents=True)
    return root


def land(root, table, name, content: bytes | str):
    path = root / "landing" / table / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def lines(*events):
    return "".join(json.dumps(e) + "\n" for e in events)


def events(root):
    return read_delta(root / "warehouse/bronze/bronze_events")


def test_long_values_and_invalid_utf8_are_kept_readable_and_counted(project, build):
    root = landing_project(project)
    land(root, "events", "1.json", lines({"id": 1, "kind": "k" * 5000}))
    bad_line = b'{"id": 2, "kind": "caf\xe9"}'  # Latin-1, not UTF-8
    land(root, "events", "2.json", bad_line + b"\n")
    results = build(root, select=("bronze_events",))
    assert results["bronze_events"].status == "success", results["bronze_events"].message
    assert "1 malformed row(s) kept in _corrupt_record" in results["bronze_events"].message
    rows = events(root)  # delta-rs decodes every string as UTF-8: it would raise on raw bytes
    assert [(r["id"], r["kind"], r["_corrupt_record"]) for r in rows] == [
        (1, "k" * 5000, None),
        (None, None, "base64:" + base64.b64encode(bad_line).decode())]


@pytest.mark.parametrize("mode", ["rescue", "fail", "ignore"])
def test_json_fields_outside_the_schema(project, build, mode):
    root = landing_project(project, extra=f"        unknown_fields: {mode}")
    land(root, "events", "1.json", lines({"id": 1, "kind": "a"},
                                         {"id": 2, "kind": "b", "tag": {"x": [1, 2]}, "n": 5}))
    result = build(root, select=("bronze_events",))["bronze_events"]
    if mode == "fail":
        assert result.status == "error"
        assert result.message.startswith(  # the model's file first, as for any Spark error
            "models/bronze/bronze_events.sql: source 'landing.events' has field(s) outside its "
            "schema: tag, n in ")
        assert "landing/events/1.json" in result.message
        # no table: the rows fail while they are computed, before any commit (delta-spark may
        # leave data files no Delta log refers to, as any failed Delta write does)
        assert not list(root.glob("warehouse/bronze/bronze_events/_delta_log/*.json"))
        return
    assert result.status == "success", result.message
    rows = events(root)
    if mode == "ignore":
        assert "_rescued_data" not in rows[0]
        assert [(r["id"], r["kind"]) for r in rows] == [(1, "a"), (2, "b")]
        return
    assert "1 row(s) with fields outside the schema kept in _rescued_data" in result.message
    assert [(r["id"], r["kind"]) for r in rows] == [(1, "a"), (2, "b")]
    assert rows[0]["_rescued_data"] is None
    assert json.loads(rows[1]["_rescued_data"]) == {"tag": {"x": [1, 2]}, "n": 5}


@pytest.mark.one_engine("rescued fields are found by Spark expressions before the engine writes")
def test_fields_outside_the_schema_are_found_however_the_json_is_written(project, build):
    # Flat objects of schema fields are told apart by a regex without listing their keys
    # (json_values.only_keys_pattern); every other text has its keys listed.
    root = landing_project(project)
    land(root, "events", "1.json", "\n".join([
        '{"id": 1, "kind": "a"}',
        '{ "id" : 2 ,"kind":"b\\"tag\\": 1" }',  # a key's look-alike inside a string value
        '{"id": 3, "kind": "c", "n": 5}',
        '{"id": 4, "kind": "d\\\\", "n": null}',  # a string ending in an escaped backslash
        '{"id": 5, "k\\u0069nd": "e", "kind": "e"}',  # an escaped key: "kind" again
        '{"id": 6, "kind": "f", "tag": {"id": 1}}',
        '{"id": 7, "kind": "g", "kind2": true}',
        '{"id": 8, "kind": "h", "id": 8}']) + "\n")
    result = build(root, select=("bronze_events",))["bronze_events"]
    assert result.status == "success", result.message
    assert "4 row(s) with fields outside the schema kept in _rescued_data" in result.message
    rows = sorted(events(root), key=lambda r: r["id"])
    assert [(r["id"], r["kind"], r["_rescued_data"] and json.loads(r["_rescued_data"]))
            for r in rows] == [
        (1, "a", None), (2, 'b"tag": 1', None), (3, "c", {"n": 5}), (4, "d\\", {"n": None}),
        (5, "e", None), (6, "f", {"tag": {"id": 1}}), (7, "g", {"kind2": True}), (8, "h", None)]


@pytest.mark.unit
def test_a_field_name_json_escapes_never_counts_as_written_plainly():
    # '"a\\b"' in a text is the key a<backspace>, not the field a\b: such a name takes the
    # listing of keys, like any text the pattern does not match. No engine: the pattern alone,
    # with Python's re, whose syntax for it (possessive quantifiers) is Java's.
    import re

    from medallion_cli.materialize.sources.json_values import only_keys_pattern

    pattern = only_keys_pattern(["id", "a\\b"])
    assert re.search(pattern, '{"id": 1}')
    assert not re.search(pattern, '{"id": 1, "a\\b": 2}')
    assert not re.search(only_keys_pattern(["a\\b"]), '{"": 2}')


@pytest.mark.one_engine("raised while loading the project, before an engine is made")
def test_a_bad_unknown_fields_value_names_the_file(project, build):
    from medallion_cli.core.errors import MedallionError
    from medallion_cli.load.project import load_project

    root = landing_project(project, extra="        unknown_fields: keep")
    with pytest.raises(MedallionError) as error:
        load_project(root)
    assert "source 'landing.events' has unknown_fields: 'keep'" in str(error.value)
    assert error.value.path == "models/sources.yml"


def test_a_csv_whose_header_swaps_columns_is_refused_naming_the_file(project, build):
    root = landing_project(project)
    land(root, "rows", "1.csv", "id,kind\n1,a\n")
    assert build(root, select=("bronze_rows",))["bronze_rows"].status == "success"
    land(root, "rows", "2.csv", "kind,id\nb,2\n")
    result = build(root, select=("bronze_rows",))["bronze_rows"]
    assert result.status == "error"
    assert result.message.startswith(
        f"models/bronze/bronze_rows.sql: the header of {root}/landing/rows/2.csv (kind, id)")
    assert "landing/rows/2.csv (kind, id) does not name the source's columns in order " \
           "(id, kind)" in result.message
    assert "\n" not in result.message
    assert [(r["id"], r["kind"]) for r in read_delta(root / "warehouse/bronze/bronze_rows")] \
        == [(1, "a")]  # nothing of the bad file landed in the wrong columns


@pytest.mark.one_engine("which files a stream reads is Spark's file source's, on any engine")
def test_a_file_with_an_old_mtime_is_still_read(project, build):
    root = landing_project(project)
    land(root, "events", "1.json", lines({"id": 1, "kind": "new"}))
    build(root, select=("bronze_events",))
    old = land(root, "events", "0.json", lines({"id": 0, "kind": "backfill"}))
    month_ago = time.time() - 30 * 86400
    os.utime(old, (month_ago, month_ago))  # as `cp -p` or `rsync -a` keep it
    result = build(root, select=("bronze_events",))["bronze_events"]
    assert result.status == "success", result.message
    assert [r["id"] for r in events(root)] == [0, 1]


def test_an_empty_landed_file_adds_no_commit(project, build):
    from deltalake import DeltaTable

    root = landing_project(project)
    land(root, "events", "1.json", lines({"id": 1, "kind": "new"}))
    build(root, select=("bronze_events",))
    land(root, "events", "2.json", "")
    land(root, "events", "3.json", "\n\n")  # blank lines are no rows
    result = build(root, select=("bronze_events",))["bronze_events"]
    assert (result.status, result.message) == ("up_to_date", "no new data")
    assert DeltaTable(str(root / "warehouse/bronze/bronze_events")).version() == 0
    assert [r["id"] for r in events(root)] == [1]


@pytest.mark.one_engine("the check reads the stream's checkpoint and the files, not the table")
def test_a_file_that_grew_after_it_was_read_fails_its_model_until_a_refresh_reads_it_whole(
        project, build):
    """Rows written to a landed file after its batch read it are not in the table: each build
    fails the model (exit 1, its readers skipped) naming the file and the refresh that reads
    it whole; the refresh loads them once, and the builds after it pass."""
    root = landing_project(project)
    growing = land(root, "events", "1.json", lines({"id": 1, "kind": "a"}))
    build(root, select=("bronze_events",))
    with growing.open("a") as f:
        f.write(lines({"id": 2, "kind": "late"}))
    later = time.time() + 5  # a later mtime even on file systems with coarse timestamps
    os.utime(growing, (later, later))
    for _ in range(2):  # said again by every build until the refresh
        result = build(root, select=("bronze_events",))["bronze_events"]
        assert result.status == "error", result.message
        assert "landed file(s) changed after they were read: landing/events/1.json" \
            in result.message
        assert "medallion build --full-refresh -s bronze_events+" in result.message
    assert [r["id"] for r in events(root)] == [1]
    refreshed = build(root, select=("bronze_events",), full_refresh=True)["bronze_events"]
    assert refreshed.status == "success", refreshed.message
    assert sorted(r["id"] for r in events(root)) == [1, 2]
    assert build(root, select=("bronze_events",))["bronze_events"].status == "up_to_date"


@pytest.mark.one_engine("the batch is held before the engine writes anything")
def test_a_file_still_being_written_is_left_for_the_next_build_and_then_read_whole(project,
                                                                                   build):
    """A writer that appends to a landed file while a build runs: the build commits none of
    it (the batch waits, said by name), and the next build, after the writer is done, reads
    every row once. A file copied in whole is read at once, even a moment after it landed."""
    import threading

    root = landing_project(project)
    land(root, "events", "1.json", lines({"id": 1, "kind": "whole"}))
    build(root, select=("bronze_events",))
    growing = root / "landing/events/2.json"
    started, done = threading.Event(), threading.Event()

    def write_slowly():
        with growing.open("a") as out:
            for i in range(100, 180):
                out.write(lines({"id": i, "kind": "slow"}))
                out.flush()
                started.set()
                time.sleep(0.1)
        done.set()

    writer = threading.Thread(target=write_slowly)
    writer.start()
    started.wait()
    held = build(root, select=("bronze_events",))["bronze_events"]
    assert not done.is_set(), "the writer finished before the build read its file"
    writer.join()
    assert held.status == "warn", held.message
    assert f"still being written: {growing}" in held.message
    assert [r["id"] for r in events(root)] == [1]  # nothing of the half-written file
    land(root, "events", "3.json", lines({"id": 3, "kind": "whole"}))  # just now, whole
    read = build(root, select=("bronze_events",))["bronze_events"]
    assert read.status == "success", read.message
    assert sorted(r["id"] for r in events(root)) == [1, 3, *range(100, 180)]


@pytest.mark.unit
def test_an_untouched_file_whose_mtime_ends_just_below_a_millisecond_is_not_changed(tmp_path):
    """st_mtime, a float, rounds 1795441798.237999851 up to ...238 ms; Java records 237."""
    from medallion_cli.materialize.sources.landing import changed_after_read

    landed = tmp_path / "000.json"
    landed.write_text("{}\n")
    os.utime(landed, ns=(1795441798237999851, 1795441798237999851))
    log = tmp_path / "checkpoint/sources/0"
    log.mkdir(parents=True)
    (log / "0").write_text('v1\n{"path":"file://%s","timestamp":1795441798237,"batchId":0}\n'
                           % landed)
    assert changed_after_read(str(tmp_path / "checkpoint")) == []
    os.utime(landed, ns=(1795441798239000000, 1795441798239000000))
    assert changed_after_read(str(tmp_path / "checkpoint")) == [str(landed)]


@pytest.mark.unit
def test_a_landed_file_waits_only_for_the_rest_of_its_quiet_time(tmp_path, monkeypatch):
    """A file is read once quiet for SECOND_LOOK_SECONDS. A file whose mtime (with fractions
    of a second) is older is read without a pause; one landed just now is looked at again
    after the rest of that time, and refused if it changed; a whole-second mtime (maybe a
    coarse one) waits the whole time from the first look. (Engine-independent: the
    checkpoint's file log is written here as Spark writes it.)"""
    from medallion_cli.materialize.sources import landing

    landed = tmp_path / "landing/1.json"
    landed.parent.mkdir()
    landed.write_text('{"id": 1}\n')
    log = tmp_path / "checkpoint/sources/0"
    log.mkdir(parents=True)
    (log / "0").write_text('v1\n{"path":"file://%s","timestamp":1,"batchId":0}\n' % landed)
    now = 1795441800.5  # the clock, fixed: the pauses are exact
    monkeypatch.setattr(landing.time, "time", lambda: now)
    pauses = []
    monkeypatch.setattr(landing.time, "sleep", pauses.append)

    def settled(mtime: float) -> None:
        os.utime(landed, ns=(round(mtime * 1e9),) * 2)
        landing.check_settled(str(tmp_path / "checkpoint"), 0, "models/bronze/b.sql")

    settled(now - 0.6)
    assert pauses == []
    settled(now - 0.1)
    assert pauses.pop() == pytest.approx(landing.SECOND_LOOK_SECONDS - 0.1, abs=1e-6)
    settled(float(int(now) - 1))  # whole seconds
    assert pauses.pop() == pytest.approx(landing.SECOND_LOOK_SECONDS, abs=1e-6)
    monkeypatch.setattr(landing.time, "sleep",
                        lambda seconds: landed.write_text('{"id": 1}\n{"id": 2}\n'))
    with pytest.raises(landing.StillBeingWritten, match="still being written"):
        settled(now - 0.1)


@pytest.mark.one_engine("Spark's file source refuses the moved checkpoint before any write")
def test_a_moved_project_says_so_and_loads_nothing_twice(project, build):
    """A checkpoint keeps the whole paths of the files it read: after the project folder moved,
    the stream stops with words saying so, its table as it was."""
    root = landing_project(project)
    land(root, "events", "1.json", lines({"id": 1, "kind": "a"}))
    build(root, select=("bronze_events",))
    moved = root.with_name(root.name + "_moved")
    root.rename(moved)
    land(moved, "events", "2.json", lines({"id": 2, "kind": "b"}))
    result = build(moved, select=("bronze_events",))["bronze_events"]
    assert result.status == "error"
    assert result.message == (
        f"models/bronze/bronze_events.sql: this stream's checkpoint lists files it read from {root}/landing/events, but it now "
        f"reads {moved}/landing/events: the folder it reads changed since the last build (the "
        "project or its warehouse moved, or a source's path changed), and a checkpoint keeps "
        "whole paths. Move it back, or rebuild this model and the models downstream of it "
        "from scratch: medallion build --full-refresh -s <model>+")
    assert [r["id"] for r in events(moved)] == [1]
    build(moved, select=("bronze_events",), full_refresh=True)
    assert sorted(r["id"] for r in events(moved)) == [1, 2]


@pytest.mark.unit
def test_a_copied_tables_commits_are_not_landed_files_that_changed(tmp_path):
    """The embedded engine's stream over a table reads its commits as files. Copying the
    warehouse (cp -r, a restore) gives them newer mtimes: no warning, while a landed file
    read by the same query is still checked. (Engine-independent: the checkpoint's file log
    is written here as Spark writes it.)"""
    from medallion_cli.materialize.sources.landing import changed_after_read

    commit = tmp_path / "warehouse/bronze/events/_delta_log/00000000000000000000.json"
    landed = tmp_path / "landing/events/1.json"
    for path in (commit, landed):
        path.parent.mkdir(parents=True)
        path.write_text("{}\n")
        os.utime(path, ns=(1795441799000000000, 1795441799000000000))  # after the read
    log = tmp_path / "checkpoint/sources/0"
    log.mkdir(parents=True)
    (log / "0").write_text("v1\n" + "".join(
        '{"path":"file://%s","timestamp":1795441798237,"batchId":0}\n' % p
        for p in (commit, landed)))
    assert changed_after_read(str(tmp_path / "checkpoint")) == [str(landed)]


def test_a_stream_without_a_schema_keeps_the_one_inferred_at_first(project, build):
    root = project({"models/sources.yml": """\
                        sources:
                          - name: landing
                            path: landing
                            tables:
                              - {name: events, format: json}
                    """, **{k: v for k, v in MODELS.items() if "events" in k}})
    (root / "landing/events").mkdir(parents=True)
    land(root, "events", "1.json", lines({"id": 1, "kind": "a", "at": {"day": 3}}))
    assert build(root)["bronze_events"].status == "success"
    kept = root / "warehouse/_medallion/schemas/landing__events.ddl"
    assert kept.read_text() == "`at` struct<day:bigint>, `id` bigint, `kind` string"
    # a later file with a new field and one missing: the columns stay; the new field is rescued
    land(root, "events", "2.json", lines({"id": 2, "kind": "b", "extra": "x"}))
    result = build(root)["bronze_events"]
    assert "1 row(s) with fields outside the schema kept in _rescued_data" in result.message
    rows = sorted(events(root), key=lambda r: r["id"])
    assert [(r["id"], r["kind"], r["at"]) for r in rows] == [(1, "a", {"day": 3}),
                                                              (2, "b", None)]
    assert json.loads(rows[1]["_rescued_data"]) == {"extra": "x"}
    assert kept.read_text() == "`at` struct<day:bigint>, `id` bigint, `kind` string"


@pytest.mark.parametrize("engine_name", ["embedded"])  # refused before a stream starts
def test_a_stream_without_a_schema_or_files_says_what_to_do(project, build, engine_name):
    root = project({"models/sources.yml": """\
                        sources:
                          - name: landing
                            path: landing
                            tables:
                              - {name: events, format: json}
                    """, **{k: v for k, v in MODELS.items() if "events" in k}})
    (root / "landing/events").mkdir(parents=True)
    result = build(root)["bronze_events"]
    assert result.status == "error"
    assert "declares no schema and has no rows to infer one from" in result.message


def test_add_new_columns_widens_the_inferred_schema_with_later_files_fields(project, build):
    root = project({"models/sources.yml": """\
                        sources:
                          - name: landing
                            path: landing
                            tables:
                              - {name: events, format: json, unknown_fields: add_new_columns}
                    """, "models/bronze/bronze_events.sql": """\
                        {{ config(materialized='streaming',
                                  on_schema_change='append_new_columns') }}
                        select * from {{ source('landing', 'events') }}
                    """})
    (root / "landing/events").mkdir(parents=True)
    land(root, "events", "1.json", lines({"id": 1, "kind": "a"}))
    assert build(root)["bronze_events"].status == "success"
    land(root, "events", "2.json", lines({"id": 2, "kind": "b", "extra": "x"}))
    result = build(root)["bronze_events"]
    assert result.status == "success", result.message
    rows = sorted(events(root), key=lambda r: r["id"])
    assert [(r["id"], r["kind"], r["extra"], r["_rescued_data"]) for r in rows] == [
        (1, "a", None, None), (2, "b", "x", None)]  # a column now, not rescued
    kept = root / "warehouse/_medallion/schemas/landing__events.ddl"
    assert kept.read_text() == "`id` bigint, `kind` string, `extra` string"


@pytest.mark.parametrize("engine_name", ["embedded"])  # refused when the project is read
def test_add_new_columns_with_a_declared_schema_is_refused(project, build, engine_name):
    root = landing_project(project, extra="        unknown_fields: add_new_columns")
    with pytest.raises(Exception, match="add_new_columns widens the schema inferred for a JSON "
                                        "table that declares none"):
        build(root)


READ_KINDS = """\
sources:
  - name: landing
    path: landing
    tables:
      - {name: rescued, format: json, schema: "id bigint, amount decimal(10,2)"}
      - {name: ignored, format: json, schema: "id bigint", unknown_fields: ignore}
      - {name: rows, format: csv, schema: "id bigint, kind string"}
      - {name: typed, format: parquet, schema: "id bigint, at timestamp"}
      - {name: changes, format: json, cdc: debezium, schema: "id bigint, kind string"}
"""


@pytest.mark.one_engine("which columns reading a source gives is the readers' (Spark's), on "
                        "either engine")
def test_the_columns_a_source_declares_are_those_reading_it_gives(project, build):
    # what the static checks and the docs page know before Spark starts (read_columns.py)
    import pyarrow as pa
    import pyarrow.parquet as pq

    from medallion_cli.load.project import load_project
    from medallion_cli.materialize.sources.read_columns import read_columns
    from medallion_cli.report.static_checks import built_columns

    files = {"models/sources.yml": READ_KINDS,
             "landing/rescued/1.json": '{"id": 1, "amount": 2.5, "more": 1}\n',
             "landing/ignored/1.json": '{"id": 1}\n', "landing/rows/1.csv": "id,kind\n1,a\n",
             "landing/changes/1.json": json.dumps({"op": "c", "after": {"id": 1, "kind": "a"},
                                                   "source": {"ts_ms": 1}}) + "\n"}
    names = ("rescued", "ignored", "rows", "typed", "changes")
    files.update({f"models/{name}.sql": f"{{{{ config(materialized='table') }}}}\n"
                  f"select * from {{{{ source('landing', '{name}') }}}}" for name in names})
    root = project(files)
    (root / "landing/typed").mkdir(parents=True)
    pq.write_table(pa.table({"id": [1], "at": pa.array([0], pa.timestamp("us", "UTC"))}),
                   root / "landing/typed/1.parquet")
    results = build(root)
    sources = load_project(root).sources
    for name in names:
        assert results[name].status == "success", results[name].message
        assert built_columns(str(root / f"warehouse/models/{name}")) == read_columns(
            sources[("landing", name)]), name
