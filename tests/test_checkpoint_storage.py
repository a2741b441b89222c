"""Checkpoints wherever the warehouse is: the Hadoop FileSystem helpers the delta-spark engine uses
(run here on file:// URIs with the real Spark session), and an embedded build whose warehouse is
given as a file:// URI, rebuilt with --full-refresh (and no Hadoop checksum files written)."""

import json
from types import SimpleNamespace

from conftest import DELTA_SPARK_IN_SLOW_TIER, profile_for, read_delta

from medallion_cli.load.project import load_project
from medallion_cli.storage.files import list_files, read_text, remove

pytestmark = DELTA_SPARK_IN_SLOW_TIER

SOURCES = """\
sources:
  - name: landing
    path: landing
    tables:
      - {name: events, format: json, schema: "id bigint, kind string"}
"""

MODELS = {
    "models/sources.yml": SOURCES,
    "models/bronze/events.sql": """\
        {{ config(materialized='streaming') }}
        select id, kind from {{ source('landing', 'events') }}
    """,
    "models/gold/kind_counts.sql": """\
        select kind, count(*) as n from {{ ref('events') }} group by kind
    """,
}


def land(root, name, rows):
    folder = root / "landing/events"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_hadoop_helpers_delete_a_checkpoint_folder(spark, tmp_path):
    checkpoint = tmp_path / "_checkpoints/bronze/events"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets/0").write_text("v1\n{}")
    (checkpoint / "metadata").write_text('{"id":"q"}')
    remove(SimpleNamespace(spark=spark), f"file://{checkpoint}")
    assert not checkpoint.exists() and (tmp_path / "_checkpoints/bronze").is_dir()
    remove(SimpleNamespace(spark=spark), f"file://{checkpoint}")  # nothing there: fine


def test_hadoop_helpers_read_a_file(spark, tmp_path):
    metadata = tmp_path / "metadata"
    metadata.write_text('{"id":"0b5e-é"}\n')
    assert read_text(SimpleNamespace(spark=spark), f"file://{metadata}") == '{"id":"0b5e-é"}\n'


def test_hadoop_helpers_list_landing_files(spark, tmp_path):
    """How a build sees new files in a landing folder on object storage (its fingerprint)."""
    (tmp_path / "orders/2024").mkdir(parents=True)
    (tmp_path / "orders/a.json").write_text("{}\n")
    (tmp_path / "orders/2024/b.json").write_text("{}\n{}\n")
    files = list_files(SimpleNamespace(spark=spark), f"file://{tmp_path}/orders")
    assert [(name, size) for name, size, _ in files] == [("2024/b.json", 6), ("a.json", 3)]
    assert all(modified > 0 for _, _, modified in files)
    assert list_files(SimpleNamespace(spark=spark), f"file://{tmp_path}/nothing-landed-yet") == []


def test_build_on_a_file_uri_warehouse_then_full_refresh(project, build, spark, tmp_path,
                                                          engine_name):
    lake = tmp_path / "lake"
    root = project(MODELS, profile=profile_for(engine_name).replace(
        "warehouse: warehouse", f"warehouse: file://{lake}/"))
    land(root, "1.json", [{"id": 1, "kind": "a"}, {"id": 2, "kind": "b"}])
    assert {r.status for r in build(root).values()} == {"success"}
    assert not (root / "warehouse").exists()  # the URI's folder, not the project's default
    assert read_delta(lake / "gold/kind_counts") == [{"kind": "a", "n": 1}, {"kind": "b", "n": 1}]
    proj = load_project(root)
    checkpoint = proj.checkpoint_path(proj.nodes["events"])
    assert checkpoint == str(lake / "_checkpoints/bronze/events")
    # The Hadoop helper reads the query id Spark wrote, as the delta-spark engine would.
    first_id = json.loads(read_text(SimpleNamespace(spark=spark), f"file://{checkpoint}/metadata"))["id"]
    assert json.loads((lake / "_checkpoints/bronze/events/metadata").read_text())["id"] == first_id

    land(root, "2.json", [{"id": 3, "kind": "a"}])
    results = build(root, full_refresh=True)
    assert results["events"].status == "success"
    # a new checkpoint (a new query) re-read every file once, and its first batch replaced bronze
    assert json.loads(read_text(SimpleNamespace(spark=spark), f"file://{checkpoint}/metadata"))["id"] != first_id
    assert sorted(r["id"] for r in read_delta(lake / "bronze/events")) == [1, 2, 3]
    assert read_delta(lake / "gold/kind_counts") == [{"kind": "a", "n": 2}, {"kind": "b", "n": 1}]
    # A local session writes no Hadoop checksum files (.<name>.crc) beside checkpoints and data:
    # each one cost a chmod process (engines/spark.py). Delta's own <version>.crc stay.
    assert sorted(p.name for p in lake.rglob(".*.crc")) == []
    if engine_name == "delta-spark":
        assert list((lake / "bronze/events/_delta_log").glob("0*.crc"))
