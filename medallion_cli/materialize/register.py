"""Registering a built node in the target's metastore, as dbt does on Spark: a table as an
external Delta table at its path (dropping that entry never deletes data), a view as a catalog
view over the real relations (load/relations.py), under `<schema>.<alias>`. With persist_docs, the
descriptions from the properties file become the table's and its columns' comments, written only
when they changed (on a Delta table each is a commit). Only targets with a metastore register
(delta-spark; project.py refuses one on the embedded engine).
"""

from __future__ import annotations

from ..core.errors import MedallionError
from ..core.nodes import CompiledNode
from ..engines.sql import sql_literal
from ..load.relations import PATH_NAMED_FORMATS, catalog_name, quoted, spark_sql
from .context import BuildContext


def _text(value: str) -> str:
    return sql_literal(value, "string")


def _same_location(found: str, path: str) -> bool:
    # The metastore keeps local folders as file: URIs.
    def strip(p: str) -> str:
        return p.removeprefix("file://").removeprefix("file:").rstrip("/")

    return strip(found) == strip(path)


# What the catalog has under a node's name: (table type, location), or None
Registered = tuple[str, str | None] | None


def _registered(ctx: BuildContext, node: CompiledNode) -> Registered:
    """(table type, location) of what the catalog has under the node's name, or None; a
    managed table there (its data is the catalog's) is refused, naming it."""
    spark = ctx.engine.spark
    schema, table = catalog_name(node)
    if not spark.catalog.tableExists(f"{schema}.{table}"):
        return None
    kind = spark.catalog.getTable(f"{schema}.{table}").tableType
    if kind == "MANAGED":
        raise MedallionError(
            f"{schema}.{table} in the catalog is a managed table medallion did not register",
            path=node.file.rel_path,
            hint="drop it (its data goes with it), or give the model another schema or alias")
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {quoted(schema, table)}").collect()
    return kind, next((r.data_type for r in rows if r.col_name == "Location"), None)


def _registers(ctx: BuildContext, node: CompiledNode) -> bool:
    # A flow writes another model's table, registered under that model's name.
    return ctx.project.target.metastore is not None and not node.config.flow_into


def check_name(ctx: BuildContext, node: CompiledNode) -> Registered:
    """Before the build writes: the node's catalog name is free or already its own; returns
    what is there, for register (the build between them changes no catalog entry)."""
    return _registered(ctx, node) if _registers(ctx, node) else None


def register(ctx: BuildContext, node: CompiledNode, found: Registered) -> str:
    """Register the node, given what check_name found under its name; returns a note when it
    cannot be (a view over a file source)."""
    if not _registers(ctx, node):
        return ""
    spark = ctx.engine.spark
    schema, table = catalog_name(node)
    name = quoted(schema, table)
    view = node.config.materialized == "view"
    unnamed = [f"{s}.{t}" for s, t in node.sources
               if ctx.project.sources[(s, t)].format not in PATH_NAMED_FORMATS]
    path = ctx.project.table_path(node.file)
    if not view and not ctx.engine.table_exists(path):
        return ""  # a stream that has read nothing yet has no table to name
    if view and unnamed:
        return (f"not registered in the catalog: it reads {', '.join(unnamed)}, which Spark "
                "SQL cannot name with its reader options")
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS `{schema}`")
    if found and (view != (found[0] == "VIEW")
                  or not view and not _same_location(found[1] or "", path)):
        spark.sql(f"DROP {'VIEW' if found[0] == 'VIEW' else 'TABLE'} {name}")
        found = None
    docs = node.config.persist_docs
    described = {c["name"]: c.get("description") for c in node.file.columns
                 if c.get("description")} if "columns" in docs else {}
    comment = node.file.description if "relation" in docs else ""
    if view:
        sql = spark_sql(ctx.project, ctx.graph.nodes, [node])[node.name]
        columns = ""
        if described:
            columns = " (" + ", ".join(
                f"`{c}`" + (f" COMMENT {_text(described[c])}" if c in described else "")
                for c in spark.sql(sql).columns) + ")"
        spark.sql(f"CREATE OR REPLACE VIEW {name}{columns}"
                  + (f" COMMENT {_text(comment)}" if comment else "") + f" AS {sql}")
        return ""
    if found is None:
        spark.sql(f"CREATE TABLE {name} USING delta LOCATION {_text(path)}")
    if comment and spark.catalog.getTable(f"{schema}.{table}").description != comment:
        spark.sql(f"COMMENT ON TABLE {name} IS {_text(comment)}")
    if described:
        current = {c.name: c.description for c in spark.catalog.listColumns(f"{schema}.{table}")}
        for column, text in described.items():
            if column in current and current[column] != text:
                spark.sql(f"ALTER TABLE {name} ALTER COLUMN `{column}` COMMENT {_text(text)}")
    return ""
