"""Registering a built node in the target's metastore, as dbt does on Spark: a table as an
external Delta table at its path (dropping that entry never deletes data), a view as a catalog
view over the real relations (load/relations.py), under `<schema>.<alias>`. With persist_docs, the
descriptions from the properties file become the table's and its columns' comments, written only
when they changed (on a Delta table each is a commit). Only targets with a metastore register,
in the catalog the engine keeps (engines/catalog.py: its Spark's, or a Hive Metastore service's
API).
"""

from __future__ import annotations

from ..core.errors import MedallionError
from ..core.nodes import CompiledNode
from ..engines import catalog_of
from ..engines.catalog import Docs, Registered, same_location
from ..load.relations import PATH_NAMED_FORMATS, catalog_name, spark_sql
from .context import BuildContext
from .rows import model_rows


def _registered(ctx: BuildContext, node: CompiledNode) -> Registered:
    """What the catalog has under the node's name, or None; a managed table there (its data
    is the catalog's) is refused, naming it."""
    schema, table = catalog_name(node)
    found = catalog_of(ctx.engine, ctx.project.target).lookup(schema, table)
    if found and found.kind == "MANAGED":
        raise MedallionError(
            f"{schema}.{table} in the catalog is a managed table medallion did not register",
            path=node.file.rel_path,
            hint="drop it (its data goes with it), or give the model another schema or alias")
    return found


def _registers(ctx: BuildContext, node: CompiledNode) -> bool:
    # A flow writes another model's table, registered under that model's name.
    return ctx.project.target.metastore is not None and not node.config.flow_into


def check_name(ctx: BuildContext, node: CompiledNode) -> Registered:
    """Before the build writes: the node's catalog name is free or already its own; returns
    what is there, for register (the build between them changes no catalog entry)."""
    return _registered(ctx, node) if _registers(ctx, node) else None


def _docs(node: CompiledNode) -> Docs:
    kept = node.config.persist_docs
    return Docs(node.file.description if "relation" in kept else "",
                {c["name"]: c["description"] for c in node.file.columns
                 if c.get("description")} if "columns" in kept else {})


def register(ctx: BuildContext, node: CompiledNode, found: Registered) -> str:
    """Register the node, given what check_name found under its name; returns a note when it
    cannot be (a view over a file source)."""
    if not _registers(ctx, node):
        return ""
    catalog = catalog_of(ctx.engine, ctx.project.target)
    schema, table = catalog_name(node)
    view = node.config.materialized == "view"
    unnamed = [f"{s}.{t}" for s, t in node.sources
               if ctx.project.sources[(s, t)].format not in PATH_NAMED_FORMATS]
    path = ctx.project.table_path(node.file)
    if not view and not ctx.engine.table_exists(path):
        return ""  # a stream that has read nothing yet has no table to name
    if view and unnamed:
        return (f"not registered in the catalog: it reads {', '.join(unnamed)}, which Spark "
                "SQL cannot name with its reader options")
    if found and (view != found.view
                  or not view and not same_location(found.location or "", path)):
        catalog.drop(schema, table, found.view)
        found = None
    if view:
        sql = spark_sql(ctx.project, ctx.graph.nodes, [node])[node.name]
        catalog.register_view(schema, table, sql, lambda: [
            (f.name, f.dataType.simpleString()) for f in model_rows(ctx, node).schema.fields],
            _docs(node), ctx.project.target.warehouse)
    else:
        catalog.register_table(schema, table, path, found is None, _docs(node))
    return ""
