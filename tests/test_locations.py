"""Warehouse locations: local folders and object-store URIs, from the profile to every table,
quarantine and checkpoint, and what compile and ls do offline with a cluster target."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import PROFILE

from medallion_cli.cli.group import main
from medallion_cli.core.errors import CapabilityError, ProjectError
from medallion_cli.core.locations import is_remote, join, local_table_version, resolve
from medallion_cli.engines import make_engine
from medallion_cli.load.project import load_project

ROOT = Path("/work/proj")
ABFSS = "abfss://lake@myaccount.dfs.core.windows.net/medallion"


@pytest.mark.unit
@pytest.mark.parametrize("value,location", [
    ("warehouse", "/work/proj/warehouse"),
    ("../shared/lake/", "/work/shared/lake"),
    ("/data/lake", "/data/lake"),
    ("file:///data/lake", "/data/lake"),
    ("file:///data/lake/", "/data/lake"),
    ("file://localhost/data/my%20lake", "/data/my lake"),
    ("file:/data/lake", "/data/lake"),  # Hadoop's own spelling
    ("s3a://bucket/lake", "s3a://bucket/lake"),
    ("s3a://bucket/lake/", "s3a://bucket/lake"),
    ("s3a://bucket", "s3a://bucket"),
    ("s3://bucket/a/b//", "s3://bucket/a/b"),
    (ABFSS + "/", ABFSS),
    ("wasbs://lake@myaccount.blob.core.windows.net/m", "wasbs://lake@myaccount.blob.core.windows.net/m"),
    ("gs://bucket/lake", "gs://bucket/lake"),
    ("hdfs://namenode:8020/lake/", "hdfs://namenode:8020/lake"),
    ("dbfs:/mnt/lake", "dbfs:/mnt/lake"),
])
def test_resolve(value, location):
    assert resolve(value, ROOT) == location


@pytest.mark.unit
@pytest.mark.parametrize("value,problem", [
    ("file://otherhost/data/lake", "names a host (otherhost)"),
    ("s3a://", "names no bucket, container or folder"),
    ("hdfs:///", "names no bucket, container or folder"),
])
def test_warehouse_uris_that_name_no_place(value, problem):
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        resolve(value, ROOT)


@pytest.mark.unit
def test_relative_locations_under_a_uri_base():
    base = "s3a://bucket/landing"
    assert resolve("orders", base) == "s3a://bucket/landing/orders"
    assert resolve("./daily/../orders/", base) == "s3a://bucket/landing/orders"
    assert resolve("gs://other/orders", base) == "gs://other/orders"
    assert resolve("/mnt/orders", base) == "/mnt/orders"


@pytest.mark.unit
def test_sources_on_object_storage(project):
    root = project({"models/sources.yml": """\
        sources:
          - name: landing
            path: s3a://landing-bucket/feeds/
            tables:
              - {name: orders, format: json, schema: "id bigint"}
              - {name: clicks, format: json, path: clicks/v2, schema: "id bigint"}
              - {name: refunds, format: delta, path: "abfss://fin@acct.dfs.core.windows.net/r"}
          - name: local
            path: landing
            tables:
              - {name: codes, format: csv, schema: "code int"}
    """})
    sources = load_project(root).sources
    assert sources[("landing", "orders")].path == "s3a://landing-bucket/feeds/orders"
    assert sources[("landing", "clicks")].path == "s3a://landing-bucket/feeds/clicks/v2"
    assert sources[("landing", "refunds")].path == "abfss://fin@acct.dfs.core.windows.net/r"
    assert sources[("local", "codes")].path == str(root / "landing/codes")


@pytest.mark.unit
def test_a_source_uri_naming_no_place_is_an_error_naming_the_file(project):
    root = project({"models/sources.yml": "sources:\n  - name: landing\n    path: 's3a://'\n"})
    with pytest.raises(ProjectError) as err:
        load_project(root)
    assert err.value.path == "models/sources.yml"
    assert "source 'landing': s3a:// names no bucket" in err.value.message


@pytest.mark.unit
def test_a_local_tables_version_is_read_from_its_logs_file_names(tmp_path):
    """As delta-rs loading the table says, with no replay of its log; None where the names do
    not say (no commit file left: the engines then load the table)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    path = tmp_path / "t"
    assert local_table_version(path) is None  # no folder
    for n in range(4):
        write_deltalake(str(path), pa.table({"id": [n]}), mode="append")
    log = path / "_delta_log"
    DeltaTable(str(path)).create_checkpoint()
    (log / "00000000000000000005.json.tmp").write_text("")  # a writer's, before its rename
    assert local_table_version(path) == DeltaTable(str(path)).version() == 3
    for n in range(4):
        (log / f"{n:020d}.json").unlink()
    assert local_table_version(path) is None  # a checkpoint alone: loading says


@pytest.mark.unit
def test_remote_and_join():
    assert is_remote("s3a://bucket/lake") and is_remote(ABFSS) and is_remote("dbfs:/mnt/lake")
    assert not is_remote("/data/lake") and not is_remote("file:///data/lake")
    assert not is_remote(r"C:\lake")  # a drive letter is no scheme
    assert join("s3a://bucket/lake", "silver", "orders") == "s3a://bucket/lake/silver/orders"
    assert join("/data/lake/", "_checkpoints", "a") == "/data/lake/_checkpoints/a"


CLUSTER = PROFILE + """\
    cluster:
      engine: delta-spark
      warehouse: "{{ env_var('LAKE', 's3a://lake-bucket/medallion/') }}"
"""

MODELS = {
    "models/sources.yml": """\
        sources:
          - name: landing
            path: landing
            tables:
              - {name: events, format: json, schema: "id bigint, kind string"}
    """,
    "models/bronze/events.sql": """\
        {{ config(materialized='streaming') }}
        select * from {{ source('landing', 'events') }}
    """,
    "models/silver/kinds.sql": """\
        {{ config(materialized='incremental', expectations={
              'has_kind': {'expect': 'kind is not null', 'on_violation': 'drop'}}) }}
        select id, kind from {{ ref('events') }}
        {% if is_incremental() %}where id > (select max(id) from {{ this }}){% endif %}
    """,
    "seeds/codes.csv": "code\n1\n",
}


@pytest.mark.unit
def test_tables_quarantines_and_checkpoints_of_a_remote_warehouse(project, monkeypatch):
    monkeypatch.setenv("LAKE", ABFSS + "/")
    proj = load_project(project(MODELS, profile=CLUSTER), target="cluster")
    assert proj.target.warehouse == ABFSS
    assert proj.table_path(proj.nodes["kinds"]) == ABFSS + "/silver/kinds"
    assert proj.quarantine_path(proj.nodes["kinds"]) == ABFSS + "/silver/kinds_quarantine"
    assert proj.checkpoint_path(proj.nodes["events"]) == ABFSS + "/_checkpoints/bronze/events"
    assert proj.table_path(proj.nodes["codes"]) == ABFSS + "/seeds/codes"


@pytest.mark.unit
def test_a_file_uri_warehouse_is_a_local_folder(project, tmp_path):
    lake = tmp_path / "lake"
    root = project({}, profile=PROFILE.replace("warehouse: warehouse", f"warehouse: file://{lake}/"))
    assert load_project(root).target.warehouse == str(lake)


@pytest.mark.unit
def test_a_warehouse_uri_naming_no_place_is_a_profile_error(project):
    root = project({}, profile=PROFILE.replace("warehouse: warehouse", "warehouse: s3a://"))
    with pytest.raises(ProjectError) as err:
        load_project(root)
    assert err.value.path.endswith("profiles/profiles.yml")
    assert "target 'local': warehouse s3a:// names no bucket" in err.value.message
    assert "s3a://bucket/lake" in err.value.hint


@pytest.mark.unit
def test_ls_and_compile_of_a_cluster_target_work_offline(project):
    """No Spark, no Delta reader, no network: the locations are computed, the tables not read."""
    root = project(MODELS, profile=CLUSTER)
    code = ("import sys; from medallion_cli.cli import main\n"
            "for cmd in (['ls'], ['compile', '-s', 'kinds']):\n"
            "    try: main(cmd + ['--project-dir', sys.argv[1], '-t', 'cluster'])\n"
            "    except SystemExit as e: assert not e.code, e.code\n"
            "loaded = [m for m in ('pyspark', 'deltalake', 'py4j') if m in sys.modules]\n"
            "print('LOADED', loaded)\n")
    out = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("LOADED []")
    lines = out.stdout.splitlines()
    events = lines.index(next(line for line in lines if line.startswith("events ")))
    assert lines[events + 1].split() == [
        "checkpoint:", "s3a://lake-bucket/medallion/_checkpoints/bronze/events"]
    # compile: the SQL a first build runs, and a note saying why, naming the warehouse
    assert "where id >" not in out.stdout
    assert "from delta.`s3a://lake-bucket/medallion/bronze/events`" in out.stdout  # the table
    assert ("note: is_incremental() is false in this SQL: the warehouse "
            "s3a://lake-bucket/medallion is not read offline") in out.stderr
    manifest = json.loads((root / "target/manifest.json").read_text())
    assert manifest["warehouse"] == "s3a://lake-bucket/medallion"
    assert manifest["nodes"]["kinds"]["table"] == "s3a://lake-bucket/medallion/silver/kinds"
    assert manifest["nodes"]["events"]["checkpoint"] == (
        "s3a://lake-bucket/medallion/_checkpoints/bronze/events")


@pytest.mark.unit
def test_compile_says_nothing_when_it_could_read_the_tables(project):
    root = project(MODELS)
    result = CliRunner().invoke(main, ["compile", "--project-dir", str(root), "-s", "kinds"])
    assert result.exit_code == 0 and "note:" not in result.output


EMBEDDED_ON_ADLS = PROFILE + """\
    adls:
      engine: embedded
      warehouse: abfss://lake@account.dfs.core.windows.net/medallion
"""


@pytest.mark.unit
def test_the_embedded_engine_refuses_a_store_other_than_s3_when_made(project):
    root = project(MODELS, profile=EMBEDDED_ON_ADLS)
    target = load_project(root, target="adls").target  # loading the project is fine
    with pytest.raises(CapabilityError) as err:
        make_engine(target)
    assert err.value.path == str(root / "profiles/profiles.yml")
    assert err.value.message == (
        "target 'adls' has its warehouse on abfss:// "
        "(abfss://lake@account.dfs.core.windows.net/medallion), but the embedded engine writes "
        "to local disks and s3://, s3a://")
    assert "use engine: delta-spark for this store" in err.value.hint


@pytest.mark.unit
def test_build_on_such_a_target_is_a_usage_error_and_ls_still_works(project):
    root = project(MODELS, profile=EMBEDDED_ON_ADLS)
    runner = CliRunner()
    assert runner.invoke(main, ["ls", "--project-dir", str(root), "-t", "adls"]).exit_code == 0
    result = runner.invoke(main, ["build", "--project-dir", str(root), "-t", "adls"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"{root}/profiles/profiles.yml: target 'adls' has its warehouse on abfss://" in (
        result.output)
    assert "hint: use engine: delta-spark" in result.output
