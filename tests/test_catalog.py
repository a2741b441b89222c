"""Catalog tables (issue 18, item 4; issue 90): models and seeds registered in a metastore as
<schema>.<alias>, descriptions kept as comments, compiled SQL naming the real relations, and
what removed or renamed models left dropped by `medallion catalog prune`.

A Derby metastore (local) or the cluster's (session) is delta-spark's: the embedded engine's
Spark has no Delta catalog, so there the test is that such a metastore is refused, saying so.
A Hive Metastore service (thrift://) serves both engines, the embedded one through its API.
The registering builds run as processes of their own: the catalog is chosen when a JVM starts
(the suite's shared session has none), and a local Derby metastore serves one JVM at a time.
"""

import json
import re
from dataclasses import replace

import pytest
from click.testing import CliRunner
from conftest import ON_BOTH_STORES, profile_for
from deltalake import DeltaTable
from helpers import medallion as run_medallion

from medallion_cli.cli import main
from medallion_cli.core.errors import CapabilityError, ProjectError
from medallion_cli.engines import make_engine
from medallion_cli.engines.catalog import OWNER, Docs, Entry
from medallion_cli.engines.delta_spark.engine import DeltaSparkEngine
from medallion_cli.engines.delta_spark.settings import metastore_settings
from medallion_cli.engines.deltars import open_table
from medallion_cli.load.model_config import merge_layers, resolve_config
from medallion_cli.load.profiles import load_target
from medallion_cli.load.project import load_project

FILES = {
    "seeds/orders.csv": "id,amount\n1,10\n2,20\n3,30\n",
    "models/silver/clean_orders.sql": """\
        {{ config(schema='sales', alias='orders', tblproperties={'quality': 'silver'},
                  persist_docs={'relation': true, 'columns': true}) }}
        select id, amount * 2 as amount from {{ ref('orders') }}
    """,
    "models/gold/big_orders.sql": """\
        {{ config(materialized='view', persist_docs={'relation': true, 'columns': true}) }}
        select id, amount from {{ ref('clean_orders') }} where amount > 25
    """,
    "models/sources.yml": """\
        sources:
          - name: landing
            path: landing
            tables:
              - {name: clicks, format: json, schema: "click_id bigint"}
              - {name: old_clicks, format: json, schema: "click_id bigint"}
    """,
    "models/bronze/clicks.sql": """\
        {{ config(materialized='streaming') }}
        select * from {{ source('landing', 'clicks') }}
    """,
    "models/bronze/clicks_backfill.sql": """\
        {{ config(materialized='streaming', flow_into='clicks', once=true) }}
        select * from {{ source('landing', 'old_clicks') }}
    """,
    "landing/clicks/1.json": '{"click_id": 1}\n{"click_id": 2}\n',
    "landing/old_clicks/1.json": '{"click_id": 0}\n',
    "macros/inspect.sql": """\
        {% macro inspect(queries) %}
          {% for query in queries %}
            {% do log("-- query") %}
            {% for row in run_query(query) %}{% do log(row | join(" | ")) %}{% endfor %}
          {% endfor %}
        {% endmacro %}
    """,
    "models/properties.yml": """\
        models:
          - name: clean_orders
            description: Orders, cleaned
            meta: {owner: sales-team}
            columns:
              - name: amount
                description: "Twice the amount, in cents"
          - name: big_orders
            description: The big ones
            columns:
              - name: id
                description: The order's id
    """,
}


def with_metastore(engine: str, metastore: str = "local", warehouse: str = "warehouse") -> str:
    return profile_for(engine, warehouse).replace(
        f"      warehouse: {warehouse}\n",
        f"      warehouse: {warehouse}\n      metastore: {metastore}\n")


def medallion(root, *args, expect: int = 0) -> str:
    """What `medallion ARGS` printed, after checking its exit code."""
    done = run_medallion(root, *args)
    assert done.returncode == expect, done.stdout + done.stderr
    return done.stdout + (done.stderr if expect else "")


def queried(root, *queries, target: str = "local") -> list[list[str]]:
    """Each query's rows ("a | b"), run by run-operation in one process on the metastore."""
    out = medallion(root, "run-operation", "inspect", "--args", json.dumps({"queries": queries}),
                    "-t", target)
    return [[line for line in part.splitlines() if line.strip()]
            for part in out.split("-- query\n")[1:]]


@pytest.mark.parametrize("engine_name", ["delta-spark"])  # registration is delta-spark's: above
@pytest.mark.slow("three JVMs on a Derby metastore; the default tier checks the catalog's "
                  "settings and refusals in-process (below)")
def test_tables_and_views_are_registered_with_their_docs_and_compiled_sql_runs_on_them(
        project, engine_name):
    root = project(FILES, profile=with_metastore(engine_name))
    built = medallion(root, "build")
    assert "5 success" in built
    table = root / "warehouse/silver/clean_orders"
    compiled = (root / "target/compiled/models/gold/big_orders.sql").read_text()
    assert "from `sales`.`orders` where" in compiled

    # The table is the model's own Delta table, its docs in its metadata for any Delta reader.
    delta = DeltaTable(str(table))
    assert delta.metadata().description == "Orders, cleaned"
    amount = next(f for f in delta.schema().fields if f.name == "amount")
    assert amount.metadata["comment"] == "Twice the amount, in cents"
    assert delta.metadata().configuration["quality"] == "silver"
    versions = delta.version()

    # A new alias names the same table anew (the old entry is the user's to drop, as in dbt);
    # a name is no definition, so nothing is rebuilt, and the docs, the same, add no commit.
    model = root / "models/silver/clean_orders.sql"
    model.write_text(model.read_text().replace("alias='orders'", "alias='orders_v2'"))
    assert "4 up to date" in medallion(root, "build")
    assert DeltaTable(str(table)).version() == versions

    # Compiled SQL names the catalog's relations: it runs as it is, in any session on the
    # metastore, here a process of its own (its queries in one run-operation, one JVM's start).
    shown, described, total, tables = queried(
        root, compiled, "describe table extended gold.big_orders",
        "select sum(amount), (select count(*) from seeds.orders), "
        "(select count(*) from bronze.clicks) from sales.orders_v2", "show tables in bronze")
    assert shown == ["2 | 40", "3 | 60"]
    assert "id | int | The order's id" in described
    assert any(row.startswith("Comment | The big ones") for row in described)
    assert total == ["120 | 3 | 3"]
    # A flow's rows are in the table it flows into; it has no entry of its own.
    assert [row.split(" | ")[1] for row in tables] == ["clicks"]


@pytest.mark.parametrize("engine_name", ["delta-spark"])  # registration is delta-spark's
@pytest.mark.slow("a build on a metastore for one refusal")
def test_a_table_the_catalog_manages_under_the_name_is_left_alone_and_named(
        project, engine_name):
    root = project({
        "models/silver/m.sql": "-- depends_on: {{ ref('maker') }}\nselect 1 as id",
        "models/silver/maker.sql": """\
            {{ config(materialized='view', post_hook=['create schema if not exists silver',
                      'create table silver.m using delta as select 2 as id']) }}
            select 1 as x
        """}, profile=with_metastore(engine_name))
    failed = medallion(root, "build", expect=1)  # maker, whose hook makes silver.m, then m
    assert ("silver.m in the catalog is a managed table medallion did not register"
            in failed and "give the model another schema or alias" in failed)
    assert not (root / "warehouse/silver/m").exists()  # checked before anything was written
    managed = DeltaTable(str(root / "warehouse/_spark/silver.db/m"))  # the catalog's, as it was
    assert managed.to_pyarrow_table().to_pylist() == [{"id": 2}]


@pytest.mark.unit
@pytest.mark.parametrize("engine_name", ["embedded", "delta-spark"])
def test_a_metastore_the_target_cannot_keep_is_refused_naming_the_profile(project, engine_name):
    # the engine's capability (catalog tables), asked when the engine is made; where the
    # metastore lives, when the profile is read
    if engine_name == "embedded":
        root = project({}, profile=with_metastore(engine_name))
        reason = "it registers them in a Hive Metastore service only"
        kind = CapabilityError  # the engine's capability, not the profile's text
    else:
        root = project({}, profile=with_metastore(engine_name, warehouse="s3a://bucket/lake"))
        reason = "metastore: local keeps a Derby database in the warehouse"
        kind = ProjectError
    with pytest.raises(kind) as caught:
        make_engine(load_project(root).target)
    assert reason in str(caught.value) and "profiles.yml" in str(caught.value)


def with_reader(profile: str) -> str:
    """The profile with a second target, `reader`: delta-spark on the same warehouse and
    metastore, a process reading the tables by name as any Spark with Delta would."""
    local = profile.split("    local:\n", 1)[1]
    return profile + "    reader:\n" + local.replace("engine: embedded", "engine: delta-spark")


def hms_files(schema: str) -> dict[str, str]:
    return {
        "models/silver/clean_orders.sql": f"""\
            {{{{ config(schema='{schema}', alias='orders',
                      persist_docs={{'relation': true, 'columns': true}}) }}}}
            select * from values (1, 10), (2, 20), (3, 30) as t(id, amount)
        """,
        "models/gold/big_orders.sql": f"""\
            {{{{ config(materialized='view', schema='{schema}',
                      persist_docs={{'relation': true, 'columns': true}}) }}}}
            select id, amount from {{{{ ref('clean_orders') }}}} where amount > 15
        """,
        "models/properties.yml": FILES["models/properties.yml"],
        "macros/inspect.sql": FILES["macros/inspect.sql"],
    }


def read_elsewhere(location: str) -> dict[str, list[tuple]]:
    """A table's (id, amount) rows as DuckDB (its delta extension from its wheel, offline, as
    docs/engines-and-clusters.md shows), Polars and DataFusion read them at its location."""
    import sysconfig

    import duckdb
    import polars as pl
    from datafusion import SessionContext

    con = duckdb.connect(config={
        "extension_directory": f"{sysconfig.get_paths()['purelib']}/duckdb_ext/extensions",
        "autoinstall_known_extensions": False})
    con.execute("LOAD delta")
    fusion = SessionContext()
    fusion.register_table("t", DeltaTable(location))
    fused = fusion.sql("select id, amount from t").to_pydict()
    return {"duckdb": sorted(con.execute(
                f"select id, amount from delta_scan('{location}')").fetchall()),
            "polars": sorted(pl.read_delta(location).select("id", "amount").rows()),
            "datafusion": sorted(zip(fused["id"], fused["amount"]))}


@pytest.mark.slow("a Hive Metastore on PostgreSQL, Trino, and per engine a build and a reading "
                  "process")
@ON_BOTH_STORES
def test_a_hive_metastore_service_names_each_engines_tables_for_any_spark_with_delta(
        project, engine_name, store, hive_metastore, trino):
    """metastore: thrift://... on both engines, in a local folder and on S3: each registers
    through the service's API (no JVM). A Spark with Delta's catalog, in another process,
    reads both by name, and so does Trino, each build's version once it is committed; DuckDB,
    Polars and DataFusion read them at the catalog's location."""
    from medallion_cli.engines.thrift_catalog import ThriftCatalog

    schema = f"sales_{engine_name.replace('-', '_')}_{store}"
    root = project(hms_files(schema))
    profile = root / "profiles/profiles.yml"
    profile.write_text(with_reader(re.sub(r"(\n +warehouse: .*\n)",
                                          rf"\1      metastore: {hive_metastore.uri}\n",
                                          profile.read_text(), count=1)))
    assert "2 success" in medallion(root, "build")
    table = load_project(root).target.warehouse + "/silver/clean_orders"
    catalog = ThriftCatalog(hive_metastore.uri)
    found = catalog.lookup(schema, "orders")
    assert found.kind == "EXTERNAL" and found.location.removeprefix("file:") == table
    assert catalog.lookup(schema, "big_orders").view
    assert catalog.lookup(schema, "nothing") is None
    if store == "local":  # other engines, at the catalog's location (on S3: test_s3.py)
        assert read_elsewhere(found.location.removeprefix("file:")) == {
            reader: [(1, 10), (2, 20), (3, 30)] for reader in ("duckdb", "polars", "datafusion")}
    # the docs are the Delta table's own, for any Delta reader
    delta = open_table(table)
    assert delta.metadata().description == "Orders, cleaned"
    assert next(f for f in delta.schema().fields if f.name == "amount").metadata[
        "comment"] == "Twice the amount, in cents"

    total, shown, described = queried(
        root, f"select sum(amount), count(*) from {schema}.orders",
        f"select * from {schema}.big_orders order by id",
        f"describe table extended {schema}.big_orders", target="reader")
    assert total == ["60 | 3"] and shown == ["2 | 20", "3 | 30"]
    assert "id | int | The order's id" in described
    assert any(row.startswith("Comment | The big ones") for row in described)

    # Trino, by the same name; a new build's version at its next query (no stale metadata)
    rows = 3
    if trino is not None:
        assert trino.query(f"select sum(amount), count(*) from delta.{schema}.orders") == [
            [60, 3]]
        model = root / "models/silver/clean_orders.sql"
        model.write_text(model.read_text().replace("(3, 30)", "(3, 30), (4, 40)"))
        assert "2 success" in medallion(root, "build")
        assert trino.query(f"select sum(amount), count(*) from delta.{schema}.orders") == [
            [100, 4]]
        rows = 4

    # the view's model removed, the table's renamed: their entries stay until pruned, and
    # another warehouse's entry in the same schema is never this project's to drop
    catalog.register_table(schema, "theirs", "/elsewhere/theirs", True, Docs())
    (root / "models/gold/big_orders.sql").unlink()
    properties = root / "models/properties.yml"
    properties.write_text(properties.read_text().split("  - name: big_orders")[0])
    renamed = root / "models/silver/clean_orders.sql"
    renamed.write_text(renamed.read_text().replace("alias='orders'", "alias='orders_v2'"))
    listed = medallion(root, "catalog", "prune")
    assert f"Left {schema}.orders: a table" in listed
    assert f"Left {schema}.big_orders: a view" in listed
    assert "2 catalog entries of this warehouse name no model or seed" in listed
    assert catalog.lookup(schema, "orders") is not None  # listed, not dropped
    dropped = medallion(root, "catalog", "prune", "--drop")
    assert f"Dropped {schema}.orders: a table (its files stay at {found.location})" in dropped
    assert f"Dropped {schema}.big_orders: a view" in dropped
    assert catalog.lookup(schema, "orders") is None
    assert catalog.lookup(schema, "big_orders") is None
    assert catalog.lookup(schema, "theirs") is not None
    assert open_table(table).to_pyarrow_table().num_rows == rows
    if trino is None:
        pytest.skip("all but Trino's part passed: Trino 476 needs Java 24 or newer, and none "
                    "is in /usr/lib/jvm nor in MEDALLION_TRINO_JAVA_HOME")


@pytest.mark.unit
def test_the_thrift_catalog_reads_an_entry_another_tool_made_without_storage(monkeypatch):
    """A view some tools store with no storage descriptor is still a view, with no location."""
    from contextlib import contextmanager

    from pymetastore.hive_metastore.ttypes import Table

    from medallion_cli.engines.thrift_catalog import ThriftCatalog

    class Client:
        def get_table(self, schema, table):
            return Table(tableName=table, dbName=schema, tableType="VIRTUAL_VIEW", sd=None)

    catalog = ThriftCatalog("thrift://127.0.0.1:9083")
    monkeypatch.setattr(catalog, "_client", contextmanager(lambda: iter([Client()])))
    assert catalog.lookup("sales", "v") == Entry("sales", "v", "VIEW")


@pytest.mark.unit
def test_what_the_metastore_refuses_is_one_line_with_its_own_words(monkeypatch):
    """Its exceptions are frozen: leaving the connection's context as they are, they failed on
    their traceback ("can't modify immutable instance") and hid what the service said."""
    from pymetastore.hive_metastore import ThriftHiveMetastore
    from pymetastore.hive_metastore.ttypes import MetaException
    from thrift.transport import TTransport

    from medallion_cli.core.errors import MedallionError
    from medallion_cli.engines.thrift_catalog import ThriftCatalog

    class Client:
        def __init__(self, protocol):
            pass

        def get_database(self, schema):
            raise MetaException(message='Got exception: org.apache.hadoop.fs.Unsupported'
                                        'FileSystemException No FileSystem for scheme "s3"')

    monkeypatch.setattr(TTransport.TBufferedTransport, "open", lambda self: None)
    monkeypatch.setattr(ThriftHiveMetastore, "Client", Client)
    with pytest.raises(MedallionError) as caught:
        ThriftCatalog("thrift://127.0.0.1:9083").register_table(
            "sales", "orders", "s3://bucket/lake/silver/orders", True, Docs())
    assert caught.value.message == (
        'the Hive Metastore at thrift://127.0.0.1:9083 refused: Got exception: org.apache.hadoop'
        '.fs.UnsupportedFileSystemException No FileSystem for scheme "s3"')
    assert "hadoop-aws on its class path" in caught.value.hint


@pytest.mark.unit
def test_a_metastore_that_does_not_answer_is_one_line_and_its_hint(project):
    from medallion_cli.testing.loopback import free_port

    uri = f"thrift://127.0.0.1:{free_port()}"  # nothing listens there
    root = project({"seeds/orders.csv": "id\n1\n"}, profile=with_metastore("embedded", uri))
    # a process of its own: thrift's own log line went to Python's last-resort handler,
    # which pytest's log capture replaces in this one
    result = run_medallion(root, "catalog", "prune")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        f"Error: {root / 'profiles/profiles.yml'}: the Hive Metastore at {uri} did not answer "
        f"(Could not connect to any of [('127.0.0.1', {uri.rsplit(':', 1)[1]})])",
        "  hint: start it, or fix the target's metastore address"]


@pytest.mark.unit
def test_two_nodes_registering_in_a_new_schema_at_once_both_register(monkeypatch):
    """A build's threads register in parallel: the schema one of them found missing another
    may create first (bench/catalog_bench.py's build of 25 tables on delta-spark failed a node
    on "Database silver already exists")."""
    from pymetastore.hive_metastore import ThriftHiveMetastore
    from pymetastore.hive_metastore.ttypes import (
        AlreadyExistsException,
        NoSuchObjectException,
    )
    from thrift.transport import TTransport

    from medallion_cli.engines.thrift_catalog import ThriftCatalog

    created = []

    class Client:
        def __init__(self, protocol):
            pass

        def get_database(self, schema):
            raise NoSuchObjectException(message=f"{schema} not found")

        def create_database(self, database):
            raise AlreadyExistsException(message=f"Database {database.name} already exists")

        def get_table(self, schema, table):
            raise NoSuchObjectException(message=f"{schema}.{table} not found")

        def create_table(self, entry):
            created.append((entry.dbName, entry.tableName, entry.sd.location))

    monkeypatch.setattr(TTransport.TBufferedTransport, "open", lambda self: None)
    monkeypatch.setattr(ThriftHiveMetastore, "Client", Client)
    ThriftCatalog("thrift://127.0.0.1:9083").register_table(
        "silver", "orders", "/lake/silver/orders", True, Docs())
    assert created == [("silver", "orders", "file:/lake/silver/orders")]


@pytest.mark.unit
def test_the_thrift_catalog_lists_every_schemas_entries_with_their_owner(monkeypatch):
    from contextlib import contextmanager

    from pymetastore.hive_metastore.ttypes import SerDeInfo, StorageDescriptor, Table

    from medallion_cli.engines.thrift_catalog import ThriftCatalog

    def stored(schema, name, kind, parameters, path=None):
        sd = StorageDescriptor(location="file:/placeholder",
                               serdeInfo=SerDeInfo(parameters={"path": path} if path else {}))
        return Table(tableName=name, dbName=schema, tableType=kind, sd=sd,
                     parameters=parameters)

    tables = {"sales": [stored("sales", "orders", "EXTERNAL_TABLE", {}, "file:/wh/silver/o"),
                        stored("sales", "big", "VIRTUAL_VIEW", {OWNER: "/wh"})],
              "default": []}

    class Client:
        def get_all_databases(self):
            return list(tables)

        def get_all_tables(self, schema):
            return [t.tableName for t in tables[schema]]

        def get_table_objects_by_name(self, schema, names):
            return [t for t in tables[schema] if t.tableName in names]

    catalog = ThriftCatalog("thrift://127.0.0.1:9083")
    monkeypatch.setattr(catalog, "_client", contextmanager(lambda: iter([Client()])))
    assert catalog.entries() == [Entry("sales", "orders", "EXTERNAL", "file:/wh/silver/o"),
                                 Entry("sales", "big", "VIEW", "file:/placeholder", "/wh")]


@pytest.mark.unit
@pytest.mark.parametrize("entry, ours", [
    (Entry("s", "t", "EXTERNAL", "file:/data/wh/silver/t"), True),
    (Entry("s", "t", "EXTERNAL", "file:///data/wh/silver/t"), True),
    (Entry("s", "t", "EXTERNAL", "/data/wh2/silver/t"), False),  # a sibling, not inside
    (Entry("s", "t", "EXTERNAL", "/data/wh"), False),  # the warehouse itself is no table
    (Entry("s", "t", "MANAGED", "file:/elsewhere/t"), False),
    (Entry("s", "v", "VIEW", None, "/data/wh/"), True),
    (Entry("s", "v", "VIEW", None, "/data/other"), False),
    (Entry("s", "v", "VIEW", "file:/data/wh/v"), False),  # a view names no warehouse by place
])
def test_an_entry_is_the_warehouses_by_a_tables_folder_or_a_views_owner(entry, ours):
    assert entry.of_warehouse("/data/wh") is ours


@pytest.mark.unit
def test_catalog_prune_on_a_target_with_no_metastore_says_so_naming_the_profile(project):
    root = project({"seeds/orders.csv": "id\n1\n"})
    result = CliRunner().invoke(main, ["catalog", "prune", "--project-dir", str(root)])
    assert result.exit_code == 2, result.output
    assert "target 'local' has no metastore: it names no table" in result.stderr
    assert "profiles.yml" in result.stderr and "set metastore:" in result.stderr


@pytest.mark.unit
@pytest.mark.parametrize("metastore, problem", [
    ("thrift://127.0.0.1:9083", None),
    ("thrift://metastore.internal:9083/", None),
    ("thrift://127.0.0.1", "metastore is 'thrift://127.0.0.1'"),
    ("hive", "metastore is 'hive'"),
])
def test_a_hive_metastore_service_is_named_by_its_thrift_uri(project, metastore, problem):
    """A Hive Metastore service every engine and process shares; its Spark settings on
    delta-spark. A mistaken value names the three kinds a metastore can be."""
    root = project({}, profile=with_metastore("delta-spark", metastore))
    if problem is None:
        target = load_target(root, "test", None, None)
        settings = metastore_settings(target)
        assert settings["spark.hadoop.hive.metastore.uris"] == metastore
        assert settings["spark.sql.catalogImplementation"] == "hive"
        assert "spark.hadoop.javax.jdo.option.ConnectionURL" not in settings  # no Derby
        return
    with pytest.raises(ProjectError) as caught:
        load_target(root, "test", None, None)
    assert problem in str(caught.value) and "thrift://host:9083" in str(caught.value)


@pytest.mark.unit
@pytest.mark.parametrize("raw, problem", [
    ({"schema": "sales team"}, "config 'schema' is 'sales team'; it must be a name"),
    ({"alias": 3}, "config 'alias' is 3"),
    ({"persist_docs": {"relation": "yes"}}, "config 'persist_docs' is"),
    ({"meta": ["owner"]}, "config 'meta' is ['owner']; it must be a mapping"),
])
def test_catalog_config_mistakes_name_the_file(raw, problem):
    with pytest.raises(ProjectError) as caught:
        resolve_config(raw, "models/silver/m.sql")
    assert problem in str(caught.value) and "models/silver/m.sql" in str(caught.value)


@pytest.mark.unit
def test_tblproperties_is_dbt_spark_s_spelling_of_table_properties():
    config = resolve_config(merge_layers({"tblproperties": {"quality": "silver"}}), "m.sql")
    assert config.table_properties == {"quality": "silver"}


@pytest.mark.unit
def test_a_targets_java_options_are_added_to_medallions_own(project):
    """Spark's log file (log4j) and the Derby home stay set when a target adds Java options
    (the test profile adds some), instead of being replaced by them. No Spark starts."""
    root = project({}, profile=with_metastore("delta-spark"))
    target = load_target(root, "test", None, None)
    options = metastore_settings(target)["spark.driver.extraJavaOptions"]
    assert "-Dlog4j2.configurationFile=" in options and "-Dderby.system.home=" in options
    assert "-XX:TieredStopAtLevel=1" in options
    # medallion's own JIT choice (engines/spark.py) reaches the options too
    mine = replace(target, spark_conf={})
    assert "-XX:TieredStopAtLevel=1" in metastore_settings(mine)["spark.driver.extraJavaOptions"]
    long = metastore_settings(mine, DeltaSparkEngine.capabilities.long_queries)[
        "spark.driver.extraJavaOptions"]
    assert "TieredStopAtLevel" not in long and "-Dderby.system.home=" in long
