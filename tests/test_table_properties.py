"""`table_properties`: Delta table properties set on both engines where the engine keeps them,
refused with a clear error where it does not."""

import json

from conftest import read_delta
from deltalake import DeltaTable

from medallion_cli.engines.deltars import rows_in_stats

EVENTS = """\
sources:
  - name: landing
    path: landing
    tables:
      - name: events
        format: json
        schema: "id bigint, v string, seq int"
"""

MODEL = """\
{{{{ config(materialized='incremental', strategy='merge', unique_key='id', sequence_by='seq',
          table_properties={props}) }}}}
select id, v, seq from {{{{ source('landing', 'events') }}}}
"""


def land(root, name, rows):
    folder = root / "landing/events"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def configuration(path):
    return DeltaTable(str(path)).metadata().configuration


def test_change_data_feed_and_retention_are_set_and_kept(project, build, spark):
    props = {"delta.enableChangeDataFeed": True, "delta.logRetentionDuration": "interval 60 days"}
    root = project({"models/sources.yml": EVENTS, "models/m.sql": MODEL.format(props=props)})
    land(root, "1.json", [{"id": 1, "v": "a", "seq": 1}, {"id": 2, "v": "b", "seq": 1}])
    assert build(root)["m"].status == "success"
    table = root / "warehouse/models/m"
    assert configuration(table).items() >= {"delta.enableChangeDataFeed": "true",
                                            "delta.logRetentionDuration": "interval 60 days"}.items()
    land(root, "2.json", [{"id": 2, "v": "b2", "seq": 2}, {"id": 3, "v": "c", "seq": 1}])
    assert build(root)["m"].status == "success"
    # The feed the engine wrote, read by Delta Lake for Spark whichever engine wrote it.
    feed = spark.read.format("delta").option("readChangeFeed", "true").option(
        "startingVersion", 0).load(str(table))
    changes = sorted((r["_change_type"], r["id"], r["v"]) for r in feed.collect())
    # id 1 came again with the same sequence: a tie updates (the later landing wins)
    assert changes == [("insert", 1, "a"), ("insert", 2, "b"), ("insert", 3, "c"),
                       ("update_postimage", 1, "a"), ("update_postimage", 2, "b2"),
                       ("update_preimage", 1, "a"), ("update_preimage", 2, "b")]
    # A property added later is set on the existing table, in a commit of its own.
    (root / "models/m.sql").write_text(MODEL.format(props={**props, "delta.checkpointInterval": 5}))
    land(root, "3.json", [{"id": 4, "v": "d", "seq": 1}])
    assert build(root)["m"].status == "success"
    assert configuration(table)["delta.checkpointInterval"] == "5"
    assert [r["id"] for r in sorted(read_delta(table), key=lambda r: r["id"])] == [1, 2, 3, 4]


def test_deletion_vectors_on_delta_spark_and_refused_on_embedded(project, build, engine_name,
                                                                  spark):
    props = {"delta.enableDeletionVectors": True}
    root = project({"models/sources.yml": EVENTS, "models/m.sql": MODEL.format(props=props)})
    land(root, "1.json", [{"id": 1, "v": "a", "seq": 1}])
    result = build(root)["m"]
    if engine_name == "embedded":
        assert result.status == "error"
        assert result.message.startswith("models/m.sql: the embedded engine cannot keep table "
                                          "property delta.enableDeletionVectors")
        assert "deletion vectors" in result.message and "delta-spark" in result.message
        assert not (root / "warehouse/models/m").exists()  # refused before anything ran
        return
    assert result.status == "success"
    table = root / "warehouse/models/m"
    assert "deletionVectors" in DeltaTable(str(table)).protocol().writer_features
    # A row a deletion vector hides is still in its file's statistics: those do not count it.
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id = 1")
    assert rows_in_stats(DeltaTable(str(table))) is None


def test_an_unknown_delta_property_is_one_line(project, build):
    root = project({"models/sources.yml": EVENTS,
                    "models/m.sql": MODEL.format(props={"delta.enableChangDataFeed": True})})
    land(root, "1.json", [{"id": 1, "v": "a", "seq": 1}])
    result = build(root)["m"]
    # named by the engine that refuses it (Delta writes it in lower case)
    assert result.status == "error" and "delta.enablechangdatafeed" in result.message.lower()
    assert "\n" not in result.message.split("\n  hint:")[0]
