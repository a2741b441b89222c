"""Tables maintained per group (`incremental_by`): a build recomputes only the groups whose input
rows changed since the table was last written, and puts those groups in place (driver.py).

The contract a model makes by naming `incremental_by` columns: each of its rows belongs to one
group (those columns' values), and a group's rows are computed from the input rows that carry
the same values in columns of the same names (an aggregate per customer over orders and
customers that both have customer_id). Then the groups to recompute are the values in the
inputs' change feeds (inserts, deletes, update pre- and post-images) since the versions the
table was written from (kept in its commit metadata), and the result equals a full recompute.
The build recomputes in full, saying why, whenever that cannot be shown: on the first build,
after a change of SQL or config, when a changed input lacks the columns or its change feed is
gone, when the model reads landing files or views, or when its SQL computes across groups (a
window not partitioned by them, a LIMIT); and, because it is quicker, while its inputs hold
fewer rows than incremental_min_rows.
"""

from __future__ import annotations

import json
from functools import reduce
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from ...core.errors import MedallionError
from ...core.nodes import CompiledNode
from ..context import DELETE_COLUMN, BuildContext, input_table
from ..sources.inputs import built_table
from ..state import definition, rows_read

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# The table's SQL and config (hashed) and the input versions it was computed from, in one
# commit metadata value: one read of the table's history finds both.
RECORD_KEY = "medallion.groups"


def input_versions(ctx: BuildContext, node: CompiledNode) -> dict[str, int] | None:
    """The version of every model's or seed's table the model reads, by name; None when it
    reads anything else (a view, a source), whose changes are not followed."""
    parents = [ctx.graph.nodes[name] for name in node.refs]
    if node.sources or any(p.config.materialized == "view" for p in parents):
        return None
    # built_table: a parent not built yet is said so, with how to build it
    return {p.name: ctx.engine.table_version(built_table(ctx, p)) for p in parents}


def metadata(ctx: BuildContext, node: CompiledNode,
             versions: dict[str, int] | None) -> dict[str, str]:
    """What a write of the table records so the next build can find what changed since (and
    where inputs read with --defer were: another warehouse's versions are not comparable)."""
    return {RECORD_KEY: json.dumps({"definition": definition(node), "inputs": versions,
                                    **_deferred(ctx, node)})}


def _deferred(ctx: BuildContext, node: CompiledNode) -> dict[str, dict[str, str]]:
    deferred = {name: ctx.deferred[name] for name in node.refs if name in ctx.deferred}
    return {"deferred": deferred} if deferred else {}


def across_groups(node: CompiledNode) -> str | None:
    """Why the model's SQL computes rows from other groups' rows, or None."""
    keys = set(node.config.incremental_by)
    assert node.sql is not None  # (a model's)
    tree = sqlglot.parse_one(node.sql, read="spark")
    if tree.find(exp.Limit):
        return "its SQL has a LIMIT"
    for window in tree.find_all(exp.Window):
        partition = {c.name for c in window.args.get("partition_by") or []
                     if isinstance(c, exp.Column)}
        if not keys <= partition:
            return (f"a window function in its SQL is not partitioned by "
                    f"{', '.join(sorted(keys))}")
    if any(r["on_violation"] == "drop" for r in node.config.expectations.values()):
        return "its 'drop' expectations keep a quarantine that is replaced with the table"
    return None


def input_changes(ctx: BuildContext, node: CompiledNode, path: str,
                  versions: dict[str, int] | None, rows: int | None
                  ) -> tuple[dict[str, DataFrame] | None, str | None]:
    """({input: its change feed since the table was written}, None), only inputs that changed,
    or (None, why the whole table is recomputed). rows: the rows its inputs hold now (None:
    not known)."""
    if versions is None:
        return None, "it reads sources or views, whose changes are not followed"
    reason = across_groups(node)
    if reason:
        return None, reason
    record = json.loads(ctx.engine.last_commit_value(path, RECORD_KEY) or "{}")
    if record.get("definition") != definition(node):
        return None, "its table was written by another SQL or config"
    if record.get("deferred") != _deferred(ctx, node).get("deferred"):
        return None, "its inputs were read from another warehouse (--defer) then or now"
    reason = few_input_rows(ctx, node, rows)
    if reason:
        return None, reason
    recorded = record.get("inputs") or {}
    keys = list(node.config.incremental_by)
    feeds: dict[str, DataFrame] = {}
    for relation, version in versions.items():
        before = recorded.get(relation)
        if before == version:
            continue
        if before is None or before > version:
            return None, f"{relation} is not the table it was last built from"
        table = input_table(ctx, relation)
        try:
            feeds[relation] = ctx.engine.read_changes(table, before + 1, version)
            missing = [k for k in keys if k not in feeds[relation].columns]
        except Exception:  # the feed was not on, or its files are gone (vacuum, log cleanup)
            return None, f"the change feed of {relation} since version {before + 1} is not there"
        if missing:
            return None, f"{relation} changed and has no column {', '.join(missing)}"
    if not feeds:
        return None, "its inputs' versions are not recorded"
    return feeds, None


def few_input_rows(ctx: BuildContext, node: CompiledNode, rows: int | None) -> str | None:
    """Why one pass over the inputs (`rows` rows) is quicker than maintaining the groups: they
    hold fewer rows than incremental_min_rows, as do the inputs of each model that maintains
    its groups from this table's changes (a full write's feed has every row deleted and
    inserted again, so those recompute in full too); None otherwise, and when a model reads
    this table's changes through ref(.., changes=true), which would see every row change."""
    limit = node.config.incremental_min_rows
    if rows is None or rows >= limit:
        return None
    for child in (ctx.graph.nodes[name] for name in ctx.graph.children.get(node.name, ())):
        if node.name in child.change_refs:
            return None
        if not child.config.incremental_by:
            continue
        child_rows = _rows_read(ctx, child)
        if child_rows is None or child_rows >= child.config.incremental_min_rows:
            return None
    return (f"its inputs hold {rows} rows, fewer than incremental_min_rows ({limit}), which one "
            "pass reads sooner than the changed groups are found")


def _rows_read(ctx: BuildContext, node: CompiledNode) -> int | None:
    try:
        return rows_read(ctx, node)
    except MedallionError:  # one of its inputs is not built yet
        return None


def touched_groups(feeds: dict[str, DataFrame], keys: tuple[str, ...]) -> DataFrame:
    """The groups (key columns) with a row in any of the change feeds."""
    return reduce(lambda a, b: a.unionByName(b), [f.select(*keys) for f in feeds.values()]
                  ).distinct()


def in_groups(rows: DataFrame, groups: DataFrame, inside: bool = True) -> DataFrame:
    """The rows of the given groups, or with inside=False of all other groups (null matching
    null, as GROUP BY puts nulls together)."""
    keys = groups.columns
    return rows.join(groups, on=reduce(lambda a, b: a & b, [
        rows[k].eqNullSafe(groups[k]) for k in keys]), how="left_semi" if inside else "left_anti")


def group_replacement(rows: DataFrame, groups: DataFrame) -> DataFrame:
    """A MERGE source replacing the groups: their new rows, and one marker row per group that
    deletes the group's stored rows (engines.MergeSpec.replace_groups)."""
    from ...spark.pyspark_api import F

    markers = groups.withColumn(DELETE_COLUMN, F.lit(True))
    return rows.withColumn(DELETE_COLUMN, F.lit(False)).unionByName(markers,
                                                                     allowMissingColumns=True)
