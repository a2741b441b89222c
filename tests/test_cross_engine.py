"""Each engine reads, appends to, merges into and streams from the other's tables, and a
warehouse built on one engine and continued on the other ends with the rows of one engine alone."""


import pytest
from conftest import ON_BOTH_STORES, at, profile_for, read_delta
from helpers import (
    BATCH_1,
    BATCH_2,
    BATCH_3,
    LOCAL_TARGETS,
    MODELS,
    expected_state,
    land,
    sample_copy,
    silver,
    tables_of,
)

from medallion_cli import commands
from medallion_cli.core.project import Target
from medallion_cli.engines import make_engine
from medallion_cli.engines.sql import MergeSpec
from medallion_cli.storage.object_store import with_s3a

DIRECTIONS = [("embedded", "delta-spark"), ("delta-spark", "embedded")]


def engine_of(name, warehouse):
    return make_engine(with_s3a(Target("cross", name, str(warehouse), "local[2]", {}, 1)))


@ON_BOTH_STORES
@pytest.mark.parametrize("writer,reader", DIRECTIONS)
def test_a_table_written_by_one_engine_is_read_appended_and_merged_by_the_other(
        spark, lake, writer, reader):
    first, second = engine_of(writer, lake), engine_of(reader, lake)
    path = f"{lake}/t"
    rows = "id long, v string, seq int"
    first.write(spark.createDataFrame([(1, "a", 1), (2, "b", 1)], rows), path, "overwrite",
                metadata={"medallion.note": writer})
    assert sorted(map(tuple, second.read_table(path).collect())) == [(1, "a", 1), (2, "b", 1)]
    assert second.last_commit_value(path, "medallion.note") == writer
    second.write(spark.createDataFrame([(3, "c", 1)], rows), path, "append", txn=("app", 0))
    assert second.committed_version(path, "app") == first.committed_version(path, "app") == 0
    changes = spark.createDataFrame([(1, "a2", 2, False), (2, "x", 2, True), (4, "d", 1, False)],
                                    rows + ", _medallion_delete boolean")
    second.merge(changes, path, MergeSpec(("id",), ("seq",), "_medallion_delete"))
    first.merge(spark.createDataFrame([(3, "c2", 2, False)], rows + ", _medallion_delete boolean"),
                path, MergeSpec(("id",), ("seq",), "_medallion_delete"))
    expected = [(1, "a2", 2), (3, "c2", 2), (4, "d", 1)]
    for engine in (first, second):
        assert sorted(map(tuple, engine.read_table(path).collect())) == expected
    assert sorted(tuple(r.values()) for r in read_delta(path)) == expected  # and delta-rs alone
    assert [h["version"] for h in first.history(path)] == [3, 2, 1, 0]


@pytest.mark.parametrize("first,then", DIRECTIONS)
def test_streaming_models_continue_on_the_other_engine(project, first, then):
    """Bronze streams landing files, silver streams bronze (MERGE): built in turns by both
    engines, the tables hold what one engine alone would, with no row twice. In a local folder:
    on S3, each engine's log read and continued by the other is the test above's part."""
    root = project(MODELS)
    profiles = root / "profiles/profiles.yml"

    def build_on(engine):
        profiles.write_text(profile_for(engine, at(root)))
        results = {r.name: r for r in commands.build(commands.Invocation(project_dir=str(root)),
                                                  "build")}
        assert not [r.message for r in results.values() if r.failed]
        return results

    land(root, "001.json", BATCH_1)
    build_on(first)
    land(root, "002.json", BATCH_2)
    switched = build_on(then)
    # silver's checkpoint came from the other engine's Delta reader: recomputed once, said so
    assert "checkpoint was made by the other engine" in switched["silver_orders"].message
    assert switched["bronze_orders"].rows == len(BATCH_2)  # a file checkpoint just goes on
    land(root, "003.json", BATCH_3)
    build_on(first)
    assert silver(root) == expected_state(BATCH_1 + BATCH_2 + BATCH_3)
    bronze = read_delta(at(root, "bronze/bronze_orders"))
    assert len(bronze) == len(BATCH_1 + BATCH_2 + BATCH_3)
    again = build_on(first)  # its checkpoints are its own again: nothing to do
    assert {r.status for r in again.values()} == {"up_to_date"}


SAMPLE_DAY_2 = ("landing/orders/orders_2024-05-02.json", "landing/events/events_2024-05-02.json")


def test_the_sample_warehouse_built_on_embedded_and_continued_on_delta_spark(
        spark, tmp_path, monkeypatch, local_sample):
    monkeypatch.setenv("MEDALLION_WAREHOUSE", "warehouse")  # both targets, one warehouse

    def build(root, engine):
        inv = commands.Invocation(project_dir=str(root), target=LOCAL_TARGETS[engine])
        results = commands.build(inv, "build")
        assert not [r.message for r in results if r.failed]

    turns = sample_copy(tmp_path / "turns")
    day_2 = {rel: (turns / rel).read_bytes() for rel in SAMPLE_DAY_2}
    for rel in day_2:
        (turns / rel).unlink()
    build(turns, "embedded")
    for rel, content in day_2.items():
        (turns / rel).write_bytes(content)
    build(turns, "delta-spark")
    assert tables_of(turns / "warehouse") == local_sample.tables("embedded")
