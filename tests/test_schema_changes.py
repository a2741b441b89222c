"""What on_schema_change and renamed_columns make of a model's rows against its table's columns
(materialize/writing/schema_changes.py), and the statements delta-spark runs for them: the rules
and their one-line refusals, without Spark (the builds: test_schema_evolution.py)."""

from pathlib import Path

import pytest
import sqlglot

from medallion_cli.core.errors import ProjectError, WriteError
from medallion_cli.core.nodes import CompiledNode
from medallion_cli.core.project import NodeFile
from medallion_cli.engines.sql import ColumnChanges, evolve_sql
from medallion_cli.load.model_config import resolve_config
from medallion_cli.materialize.writing.schema_changes import column_changes, widens

pytestmark = pytest.mark.unit

TABLE = {"id": "bigint", "cust": "string", "note": "string", "amount": "int",
         "price": "decimal(10,2)"}


def node(**config):
    file = NodeFile("model", "m", Path("models/m.sql"), "models/m.sql", "models", {})
    return CompiledNode(file, resolve_config(config, "models/m.sql"), "select 1", (), (), True)


@pytest.mark.parametrize("narrow,wide,widened", [
    ("int", "bigint", True), ("tinyint", "int", True), ("float", "double", True),
    ("int", "double", True), ("date", "timestamp_ntz", True),
    ("decimal(10,2)", "decimal(12,2)", True), ("decimal(10,2)", "decimal(12,4)", True),
    ("decimal(10,2)", "decimal(11,4)", False),  # the integer digits would shrink
    ("int", "decimal(10,0)", True), ("int", "decimal(9,0)", False),
    ("bigint", "decimal(20,0)", True), ("bigint", "int", False), ("string", "int", False),
    ("double", "float", False), ("timestamp", "timestamp_ntz", False)])
def test_the_type_changes_delta_widens_in_place(narrow, wide, widened):
    assert widens(narrow, wide) is widened


def test_sync_all_columns_renames_drops_widens_and_adds():
    rows = {"id": "bigint", "customer": "string", "amount": "bigint", "price": "decimal(12,2)",
            "code": "string"}
    added, changes = column_changes(node(on_schema_change="sync_all_columns",
                                         renamed_columns={"cust": "customer"}), rows, TABLE)
    assert added == ["code"]
    assert changes == ColumnChanges(renamed=(("cust", "customer"),), dropped=("note",),
                                    widened=(("amount", "bigint"), ("price", "decimal(12,2)")))
    assert changes.said() == ("renames cust to customer, drops note, widens amount to bigint, "
                              "price to decimal(12,2)")


def test_narrower_rows_fit_the_table_and_other_policies_only_add_or_rename():
    rows = {"id": "int", "customer": "string", "note": "string", "amount": "int",
            "price": "decimal(10,2)", "code": "string"}
    renamed = {"renamed_columns": {"cust": "customer"}}
    assert column_changes(node(on_schema_change="sync_all_columns", **renamed), rows, TABLE) == (
        ["code"], ColumnChanges(renamed=(("cust", "customer"),)))
    # append_new_columns keeps what the rows lack; a declared rename applies under any policy
    fewer = {"id": "bigint", "customer": "string", "code": "string"}
    assert column_changes(node(on_schema_change="append_new_columns", **renamed), fewer,
                          TABLE) == (["code"], ColumnChanges(renamed=(("cust", "customer"),)))
    # a rename already made (the table has the new name) is nothing more to do
    done = {"id": "bigint", "customer": "string", "note": "string", "amount": "int",
            "price": "decimal(10,2)"}
    assert column_changes(node(**renamed), done, done) == ([], ColumnChanges())


def test_a_struct_with_new_fields_is_evolved_with_the_rows_commit_or_refused_by_fail():
    table = {"id": "bigint", "s": "struct<a:int>"}
    rows = {"id": "bigint", "s": "struct<a:int,b:string>"}
    assert column_changes(node(on_schema_change="append_new_columns"), rows, table) == (
        ["fields in s"], ColumnChanges())
    with pytest.raises(WriteError, match="returns fields in s that its table lacks"):
        column_changes(node(), rows, table)


def test_refusals_name_the_file_the_columns_and_what_to_do():
    with pytest.raises(WriteError, match="new columns code that its table lacks") as caught:
        column_changes(node(), {**TABLE, "code": "string"}, TABLE)
    assert caught.value.path == "models/m.sql"
    with pytest.raises(WriteError, match=r"(?s)changes the type of amount from int to string, "
                       r"which Delta cannot do in place .*full-refresh -s m\+"):
        column_changes(node(on_schema_change="sync_all_columns"), {**TABLE, "amount": "string"},
                       TABLE)


def test_a_flow_cannot_sync_all_columns_of_a_table_others_write_too():
    with pytest.raises(ProjectError, match="would drop the columns the others write"):
        resolve_config({"materialized": "streaming", "flow_into": "t",
                        "on_schema_change": "sync_all_columns"}, "models/f.sql")


@pytest.mark.parametrize("value", [["a", "b"], {"a": 1}, {}, {"a": "b", "c": "b"},
                                   {"a": "b", "b": "c"}])
def test_renamed_columns_must_map_each_old_name_to_a_new_one(value):
    with pytest.raises(ProjectError, match="renamed_columns"):
        resolve_config({"renamed_columns": value}, "models/m.sql")


def test_the_statements_delta_spark_runs_turn_on_only_the_features_the_table_lacks():
    changes = ColumnChanges(renamed=(("a", "b"),), dropped=("c",), widened=(("d", "bigint"),))
    statements = evolve_sql("/wh/t", changes, {})
    table = "ALTER TABLE delta.`/wh/t`"
    assert statements == [
        f"{table} SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')",
        f"{table} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')",
        f"{table} RENAME COLUMN `a` TO `b`", f"{table} DROP COLUMNS (`c`)",
        f"{table} ALTER COLUMN `d` TYPE bigint"]
    for statement in statements:
        sqlglot.parse_one(statement, read="spark")
    assert len(evolve_sql("/wh/t", changes, {"delta.columnMapping.mode": "name",
                                              "delta.enableTypeWidening": "true"})) == 3
