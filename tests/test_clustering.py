"""Liquid clustering (issue 18, item 8): `cluster_by` on the delta-spark engine keeps a table's
clustering columns across its builds (appends, MERGEs, overwrites) and `medallion optimize`
clusters its rows by them. delta-rs, which keeps the embedded engine's tables, cannot write a
clustered table: there `cluster_by` is refused before anything is written, and a table clustered
on delta-spark is refused by name instead of failing inside a commit."""

import pytest
from conftest import profile_for, read_delta
from deltalake import DeltaTable
from helpers import BATCH_1, BATCH_2, BATCH_3, MODELS, expected_state, land, silver

from medallion_cli.commands import maintain as maintenance
from medallion_cli.commands.invocation import Invocation, load
from medallion_cli.core.errors import ProjectError

FILES = {
    **MODELS,
    "models/gold/orders_by_status.sql": """\
        {{ config(materialized='table', cluster_by='status') }}
        select status, count(*) as orders from {{ ref('silver_orders') }} group by status
    """,
    "models/clustering.yml": "models:\n  - name: bronze_orders\n    config: {cluster_by: [status]}\n",
}


def clustering_columns(spark, path):
    return spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["clusteringColumns"]


def operations(path):
    return [c["operation"] for c in reversed(DeltaTable(str(path)).history())]


def test_cluster_by_lays_out_tables_on_delta_spark_and_is_refused_on_embedded(
        project, build, engine_name, spark):
    root = project(FILES)
    bronze, gold = (root / "warehouse/bronze/bronze_orders",
                    root / "warehouse/gold/orders_by_status")
    land(root, "001.json", BATCH_1)
    first = build(root)
    if engine_name == "embedded":
        assert first["bronze_orders"].status == "error"
        assert "the embedded engine cannot cluster tables" in first["bronze_orders"].message
        assert "models/bronze/bronze_orders.sql" in first["bronze_orders"].message
        assert first["silver_orders"].status == "skipped" and not bronze.exists()
        return

    assert {r.status for r in first.values()} == {"success"}, [r.message for r in first.values()]
    assert "clustered by status" in first["bronze_orders"].message
    assert clustering_columns(spark, bronze) == clustering_columns(spark, gold) == ["status"]
    assert operations(bronze)[-1] == "CLUSTER BY"

    # An append keeps the clustering (no new CLUSTER BY commit) and the stream reading the
    # table passes the CLUSTER BY commit; a table's overwrite drops it, so it is set again.
    land(root, "002.json", BATCH_2)
    second = build(root)
    assert silver(root) == expected_state(BATCH_1 + BATCH_2)
    assert operations(bronze)[-2:] == ["CLUSTER BY", "WRITE"]
    assert clustering_columns(spark, gold) == ["status"]
    assert operations(gold) == ["WRITE", "CLUSTER BY", "WRITE", "CLUSTER BY"]
    assert second["orders_by_status"].rows == 3

    # OPTIMIZE clusters the rows by the table's columns, changing none of them.
    rows = read_delta(bronze)
    inv = Invocation(project_dir=str(root), select=("bronze_orders",))
    assert maintenance.optimize(inv) == [("bronze_orders", {"files_removed": 2, "files_added": 1})]
    last = DeltaTable(str(bronze)).history(1)[0]
    assert last["operation"] == "OPTIMIZE" and last["operationParameters"]["clusterBy"] == '["status"]'
    assert read_delta(bronze) == rows

    # New clustering columns rewrite nothing: the build sets them (a commit with no rows).
    (root / "models/clustering.yml").write_text(
        "models:\n  - name: bronze_orders\n    config: {cluster_by: [order_id]}\n")
    build(root)
    assert clustering_columns(spark, bronze) == ["order_id"]
    assert operations(bronze)[-1] == "CLUSTER BY" and read_delta(bronze) == rows
    assert silver(root) == expected_state(BATCH_1 + BATCH_2)

    # The embedded engine reads the clustered table but cannot commit to it: refused by name.
    (root / "models/clustering.yml").unlink()
    (root / "profiles/profiles.yml").write_text(profile_for("embedded"))
    land(root, "003.json", BATCH_3)
    version = DeltaTable(str(bronze)).version()
    third = build(root)
    assert third["bronze_orders"].status == "error"
    assert "this table has liquid clustering" in third["bronze_orders"].message
    assert DeltaTable(str(bronze)).version() == version and read_delta(bronze) == rows


@pytest.mark.unit
@pytest.mark.parametrize("config, problem", [
    ("materialized='table', cluster_by='status', partition_by='status'",
     "cluster_by replaces partition_by and zorder_by"),
    ("materialized='table', cluster_by='status', zorder_by='status'",
     "cluster_by replaces partition_by and zorder_by"),
    ("materialized='view', cluster_by='status'", "cluster_by lays out a table: a view has none"),
    # given with no column, these would silently build the model another way
    ("materialized='table', incremental_by=[]", "config 'incremental_by' names no column"),
    ("materialized='incremental', strategy='merge', unique_key=''",
     "config 'unique_key' names no column"),
])
def test_cluster_by_mistakes_are_refused_when_the_project_loads(project, config, problem):
    """Config checks, before any engine: the same on both."""
    root = project({**FILES, "models/gold/orders_by_status.sql":
                    "{{ config(" + config + ") }} select status from {{ ref('silver_orders') }}"})
    with pytest.raises(ProjectError) as caught:
        load(Invocation(project_dir=str(root)))
    assert problem in str(caught.value) and "models/gold/orders_by_status.sql" in str(caught.value)


def test_a_layout_column_the_rows_lack_fails_the_build_before_anything_is_written(
        project, build, engine_name):
    """zorder_by (both engines) or cluster_by (delta-spark) naming a column the model does not
    return: checked on the rows, so the table stays as it was."""
    key = "cluster_by" if engine_name == "delta-spark" else "zorder_by"
    root = project({"models/gold/totals.sql": "{{ config(materialized='table') }} "
                                              "select 1 as id, 'a' as status"})
    assert build(root)["totals"].status == "success"
    (root / "models/gold/totals.sql").write_text(  # new rows, so it builds again
        f"{{{{ config(materialized='table', {key}='region') }}}} select 2 as id, 'b' as status")
    failed = build(root)["totals"]
    assert failed.status == "error"
    assert (f"{key} names region, which the rows of model 'totals' does not have; nothing was "
            "written") in failed.message and "models/gold/totals.sql" in failed.message
    assert DeltaTable(str(root / "warehouse/gold/totals")).version() == 0
