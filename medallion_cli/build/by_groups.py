"""The batch build of a table maintained per group (`incremental_by`): the groups its inputs'
changes touch are brought up to date in one MERGE, by adding the changes to their sums and
counts (aggregates.py) or by computing them again from their input rows (incremental.py); or,
when that cannot be shown equal to a full recompute, the whole table is written again."""

from __future__ import annotations

from ..engines import MergeSpec
from ..errors import MedallionError
from ..rendering import CompiledNode
from .aggregates import RECOMPUTE, aggregates_of, inexact_sum, sides, updated_groups
from .checks import checked_rows
from .context import DELETE_COLUMN, BuildContext, Outcome
from .incremental import (
    group_replacement,
    in_groups,
    input_changes,
    input_versions,
    touched_groups,
)
from .incremental import metadata as group_metadata
from .rows import model_rows
from .state import rows_read


def build_by_groups(ctx: BuildContext, node: CompiledNode, path: str, metadata: dict) -> Outcome:
    cfg = node.config
    versions = input_versions(ctx, node)  # before reading: the changes up to these are applied
    metadata = {**metadata, **group_metadata(ctx, node, versions)}
    with ctx.phases.timing("changed_groups"):
        feeds, why_full = (None, None) if ctx.full_refresh or not ctx.engine.table_exists(
            path) else input_changes(ctx, node, path, versions)
    rows = model_rows(ctx, node)
    missing = [k for k in cfg.incremental_by if k not in rows.columns]
    if missing:
        raise MedallionError(f"incremental_by names {', '.join(missing)}, which the model does "
                             "not return", path=node.file.rel_path,
                             hint="name columns of its SELECT: the groups its rows are computed per")
    if feeds is None:
        with checked_rows(ctx, node, rows, replace=True) as (df, counts, checked), \
                ctx.phases.timing("write"):
            write = ctx.engine.write(df, path, "overwrite", cfg.partition_by, metadata=metadata,
                                     properties=cfg.delta_properties(df.columns))
        message = f"recomputed in full: {why_full}" if why_full else ""
        return Outcome("success", write, message, counts, rows_read(ctx, node),
                       rows_checked=checked)
    # The changes are read several times (rows added, rows removed, the groups they touch):
    # kept in memory, they are small next to the tables.
    feeds = {relation: feed.persist() for relation, feed in feeds.items()}
    try:
        with ctx.phases.timing("add_changes"):
            updated, why_not_added = added_up(ctx, node, path, feeds)
        if updated is None:
            return recompute_groups(ctx, node, path, metadata, rows, touched_groups(
                feeds, cfg.incremental_by), why_not_added)
        return merge_updated(ctx, node, path, metadata, rows, updated)
    finally:
        for feed in feeds.values():
            feed.unpersist()


def added_up(ctx: BuildContext, node: CompiledNode, path: str, feeds: dict):
    """(the touched groups' new rows from their sums and counts plus the changes, None; see
    updated_groups) or (None, why the model's groups cannot be added up)."""
    aggregates, why_not = aggregates_of(node)
    if aggregates is None:
        return None, why_not
    (relation, feed), = feeds.items()  # aggregates_of allows one input
    added_rows, removed_rows = sides(feed)
    added = model_rows(ctx, node, inputs={relation: added_rows})
    removed = model_rows(ctx, node, inputs={relation: removed_rows})
    why_not = inexact_sum(aggregates, added)
    if why_not:
        return None, why_not
    return updated_groups(aggregates, ctx.engine.read_table(path), touched_groups(
        feeds, node.config.incremental_by), added, removed, DELETE_COLUMN), None


def merge_updated(ctx: BuildContext, node: CompiledNode, path: str, metadata: dict, rows,
                  updated) -> Outcome:
    """MERGE the updated groups; those whose sums adding cannot tell from null are computed
    from their rows first."""
    from pyspark.sql import functions as F

    cfg = node.config
    updated = updated.persist()
    try:
        unclear = updated.where(RECOMPUTE).select(*cfg.incremental_by)
        with ctx.phases.timing("add_changes"):  # one pass counts both
            groups, recomputed = updated.select(F.count(F.lit(1)), F.count_if(RECOMPUTE)).first()
        current = updated.where(~F.col(RECOMPUTE) & ~F.col(DELETE_COLUMN)).drop(
            RECOMPUTE, DELETE_COLUMN)
        if recomputed:
            current = current.unionByName(in_groups(rows, unclear))
        with checked_rows(ctx, node, current, replace=False) as (df, counts, checked), \
                ctx.phases.timing("write"):
            gone = updated.where(F.col(DELETE_COLUMN)).drop(RECOMPUTE)
            source = df.withColumn(DELETE_COLUMN, F.lit(False)).unionByName(gone)
            spec = MergeSpec(cfg.incremental_by, null_safe_keys=cfg.incremental_by,
                             delete_column=DELETE_COLUMN)
            write = ctx.engine.merge(source, path, spec, metadata,
                                     properties=cfg.delta_properties(df.columns))
        message = (f"{groups} group(s) updated by adding their inputs' changes"
                   + (f" ({recomputed} recomputed: a sum adding cannot tell from null)"
                      if recomputed else ""))
    finally:
        updated.unpersist()
    return Outcome("success", write, message, counts, rows_checked=checked)


def recompute_groups(ctx: BuildContext, node: CompiledNode, path: str, metadata: dict, rows,
                     groups, why_not_added: str) -> Outcome:
    """Compute the touched groups again from their input rows and replace them."""
    cfg = node.config
    groups = groups.persist()
    try:
        with checked_rows(ctx, node, in_groups(rows, groups), replace=False) as (df, counts, checked), \
                ctx.phases.timing("write"):
            spec = MergeSpec(cfg.incremental_by, null_safe_keys=cfg.incremental_by,
                             delete_column=DELETE_COLUMN, replace_groups=True)
            write = ctx.engine.merge(group_replacement(df, groups), path, spec, metadata,
                                     properties=cfg.delta_properties(df.columns))
        message = (f"{groups.count()} group(s) recomputed from their input rows (not added up "
                   f"from the changes: {why_not_added})")
    finally:
        groups.unpersist()
    return Outcome("success", write, message, counts, rows_checked=checked)
