"""on_schema_change: sync_all_columns and renamed_columns against a table built earlier: columns
dropped, renamed and widened in place (Delta's column mapping and type widening, no data file
rewritten) on delta-spark; refused in one line on the embedded engine, whose delta-rs cannot
write such tables (its capabilities say so), which still reads them."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import target_for

from medallion_cli.cli import main
from medallion_cli.core.errors import MedallionError
from medallion_cli.engines import make_engine

SOURCES = """\
sources:
  - name: landing
    path: landing
    tables:
      - name: events
        format: json
        schema: "seq bigint, name string, note string, amount bigint"
"""
# v1 builds the table; v2 renames cust to customer, drops note, widens amount (int) to bigint and
# adds code: what sync_all_columns with renamed_columns does in place
V1 = ("{{ config(materialized='incremental', on_schema_change='sync_all_columns') }}\n"
      "select seq, name as cust, note, cast(amount as int) as amount\n")
V2 = ("{{ config(materialized='incremental', on_schema_change='sync_all_columns',\n"
      "            renamed_columns={'cust': 'customer'}) }}\n"
      "select seq, name as customer, amount, concat('c', seq) as code\n")
NEW_ROWS = ("from {{ source('landing', 'events') }}\n"
            "{% if is_incremental() %}where seq > (select max(seq) from {{ this }}){% endif %}\n")


def land(root: Path, name: str, first: int, last: int) -> None:
    folder = root / "landing/events"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(
        {"seq": n, "name": f"n{n}", "note": "x", "amount": n * 10}) + "\n"
        for n in range(first, last + 1)))


def rows(spark, path):
    return sorted(tuple(r) for r in spark.read.format("delta").load(str(path)).collect())


def log_actions(path: Path, since: int) -> list[str]:
    """The kinds of actions (add, remove, metaData, ...) the commits after version `since` hold."""
    return [kind for commit in sorted((path / "_delta_log").glob("*.json"))
            if int(commit.stem) > since
            for line in commit.read_text().splitlines() for kind in json.loads(line)]


def test_sync_all_columns_renames_drops_and_widens_in_place_or_says_it_cannot(
        project, build, engine_name, spark, tmp_path):
    root = project({"models/sources.yml": SOURCES, "models/m.sql": V1 + NEW_ROWS})
    table = root / "warehouse/models/m"
    land(root, "1.json", 1, 3)
    first = build(root)["m"]
    assert first.status == "success", first.message
    before = rows(spark, table)
    (root / "models/m.sql").write_text(V2 + NEW_ROWS)
    # plan says what the edit does to the table, before anything runs (no JVM)
    shown = CliRunner().invoke(main, ["plan", "-s", "m", "--project-dir", str(root)])
    assert ("its table's columns: adds code with its rows, renames cust to customer, drops "
            "note in place (Delta's column mapping, no data file rewritten)") in shown.output
    assert ("the embedded engine cannot" in shown.output) is (engine_name == "embedded")
    land(root, "2.json", 4, 5)
    evolved = build(root)["m"]
    if engine_name == "embedded":
        assert evolved.status == "error"
        said, hint = evolved.message.strip().splitlines()  # one line, and its hint
        assert (
            "its rows need its table changed in place (renames cust to customer, drops note, "
            "widens amount to bigint), and the embedded engine cannot") in said
        assert "delta-spark target" in hint and "--full-refresh -s m+" in hint
        assert rows(spark, table) == before  # nothing written
        return
    assert evolved.status == "success", evolved.message
    assert spark.read.format("delta").load(str(table)).dtypes == [
        ("seq", "bigint"), ("customer", "string"), ("amount", "bigint"), ("code", "string")]
    # as a full rebuild of v2 would hold them, but for code, which rows written before lack
    assert rows(spark, table) == [(n, f"n{n}", n * 10, f"c{n}" if n > 3 else None)
                                  for n in range(1, 6)]
    # in place: no data file removed or rewritten, the new rows' file added
    assert "remove" not in log_actions(table, 0) and log_actions(table, 0).count("add") == 1
    # the embedded engine reads the evolved table by its new names, and refuses to write it
    embedded = make_engine(target_for("m", "embedded", str(root / "warehouse")))
    assert sorted(tuple(r) for r in embedded.read_table(str(table)).collect()) == rows(
        spark, table)
    shown = embedded.snapshot(str(table))  # (medallion show: delta-rs alone would misread it)
    assert sorted(zip(*shown.to_pydict().values())) == rows(spark, table)
    with pytest.raises(MedallionError, match="column mapping .* the embedded engine cannot"):
        embedded.write(spark.createDataFrame([(6, "n6", 60, "c6")], "seq long, customer string, "
                                             "amount long, code string"), str(table), "append")


STREAMED = "from {{ source('landing', 'events') }}\n"
# a MERGE model streaming m, evolved with it
READER = ("{{ config(materialized='streaming', strategy='merge', unique_key='seq',\n"
          "            on_schema_change='sync_all_columns'%s) }}\n"
          "select * from {{ ref('m') }}\n")
RENAMED = ", renamed_columns={'cust': 'customer'}"


# Delta's own streaming source is delta-spark's: its readers of a table evolved in place stop
# at the change and go on once started again; the embedded engine evolves no table in place
@pytest.mark.parametrize("engine_name", ["delta-spark"])
def test_a_stream_evolves_its_table_and_a_stream_reading_it_starts_again_with_nothing_lost(
        project, build, engine_name, spark):
    root = project({"models/sources.yml": SOURCES,
                    "models/m.sql": V1.replace("incremental", "streaming") + STREAMED,
                    "models/s.sql": READER % ""})
    land(root, "1.json", 1, 3)
    first = build(root)
    assert first["s"].status == "success", first["s"].message
    (root / "models/m.sql").write_text(V2.replace("incremental", "streaming") + STREAMED)
    (root / "models/s.sql").write_text(READER % RENAMED)
    land(root, "2.json", 4, 5)
    evolved = build(root)
    # (a warning, as after any edit of a stream: its SQL applies to rows from now on)
    assert evolved["m"].status == evolved["s"].status == "warn", evolved["s"].message
    assert "its query started again" in evolved["s"].message
    land(root, "3.json", 6, 6)
    after = build(root)
    assert after["m"].status == after["s"].status == "success"
    expected = [(n, f"n{n}", n * 10, f"c{n}" if n > 3 else None) for n in range(1, 7)]
    for table in ("m", "s"):  # each row once, old ones under their new names
        assert rows(spark, root / f"warehouse/models/{table}") == expected, table
    assert [kind for _, kind in spark.read.format("delta").load(
        str(root / "warehouse/models/s")).dtypes] == ["bigint", "string", "bigint", "string"]


def test_a_struct_gains_fields_in_place_with_the_rows_commit(project, build, engine_name, spark):
    model = ("{{ config(materialized='incremental', on_schema_change='append_new_columns') }}\n"
             "select seq, named_struct('a', amount%s) as s\n")
    root = project({"models/sources.yml": SOURCES, "models/m.sql": model % "" + NEW_ROWS})
    land(root, "1.json", 1, 2)
    build(root)
    (root / "models/m.sql").write_text(model % ", 'b', concat('x', seq)" + NEW_ROWS)
    land(root, "2.json", 3, 3)
    assert build(root)["m"].status == "success"
    assert rows(spark, root / "warehouse/models/m") == [
        (1, (10, None)), (2, (20, None)), (3, (30, "x3"))]


def test_scd2_history_takes_a_new_column_and_on_delta_spark_a_rename_and_a_drop(
        project, build, engine_name, spark):
    """An SCD2 model recomputes each touched key's history from its stored versions, which
    must be read under the edited columns (before, any new column failed it)."""
    config = ("{{ config(materialized='incremental', strategy='merge', unique_key='id', "
              "sequence_by='seq', scd_type=2, on_schema_change='%s'%s) }}\n")
    v1 = config % ("append_new_columns", "") + "select seq % 2 as id, seq, name, note\n"
    in_place = engine_name == "delta-spark"  # (the embedded engine adds columns only)
    v2 = (config % ("sync_all_columns", ", renamed_columns={'name': 'customer'}")
          + "select seq % 2 as id, seq, name as customer, amount\n") if in_place else (
        config % ("append_new_columns", "") + "select seq % 2 as id, seq, name, note, amount\n")
    root = project({"models/sources.yml": SOURCES, "models/m.sql": v1 + STREAMED})
    land(root, "1.json", 1, 3)
    build(root)
    (root / "models/m.sql").write_text(v2 + STREAMED)
    land(root, "2.json", 4, 5)
    evolved = build(root)["m"]
    assert evolved.status == "success", evolved.message

    def version(n, current):  # key n % 2's version from seq n to n + 2; amount added last
        # (the model reads every event again: each version is recomputed with its amount)
        return (n % 2, n, f"n{n}", *(() if in_place else ("x",)), n, None if current else n + 2,
                current, n * 10)
    assert rows(spark, root / "warehouse/models/m") == sorted(
        version(n, n > 3) for n in range(1, 6))
