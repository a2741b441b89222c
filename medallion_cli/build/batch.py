"""The batch driver: a view, a table, an incremental model or a seed, built once.

Its steps in order: is anything new (the fingerprint)? its rows (rows.py), its checks
(checks.py), its write (writes.py) in one Delta commit that records the new fingerprint.
"""

from __future__ import annotations

from ..engines import MergeSpec
from ..errors import MedallionError
from ..rendering import CompiledNode
from .checks import check_table_properties, checked_rows
from .context import DELETE_COLUMN, BuildContext, Outcome
from .incremental import changed_groups, group_replacement, in_groups, input_versions
from .incremental import metadata as group_metadata
from .rows import model_rows, seed_rows
from .state import FINGERPRINT_KEY, fingerprint, rows_read
from .writes import write_incremental


def build_batch(ctx: BuildContext, node: CompiledNode) -> Outcome:
    check_table_properties(ctx, node)
    if node.config.materialized == "view":
        model_rows(ctx, node)  # analysed, so a broken view fails here: it has no table
        return Outcome("success")
    path = ctx.project.table_path(node.file)
    with ctx.phases.timing("fingerprint"):
        state = fingerprint(ctx, node)
        unchanged = (state is not None and not ctx.full_refresh and ctx.engine.table_exists(path)
                     and ctx.engine.last_commit_value(path, FINGERPRINT_KEY) == state)
    if unchanged:
        return Outcome("up_to_date", message="inputs, SQL and config unchanged since the last build")
    metadata = {FINGERPRINT_KEY: state} if state else {}
    cfg = node.config
    if node.file.kind == "seed":
        rows = seed_rows(ctx, node)
        with ctx.phases.timing("write"):
            return Outcome("success", ctx.engine.write(
                rows, path, "overwrite", metadata=metadata,
                properties=cfg.delta_properties(rows.columns)))
    if cfg.incremental_by:
        return build_by_groups(ctx, node, path, metadata)
    replace = cfg.materialized == "table" or not node.is_incremental
    with checked_rows(ctx, node, model_rows(ctx, node), replace) as (df, counts), \
            ctx.phases.timing("write"):
        if cfg.materialized == "table":
            write = ctx.engine.write(df, path, "overwrite", cfg.partition_by, metadata=metadata,
                                     properties=cfg.delta_properties(df.columns))
        else:
            write = write_incremental(ctx, node, df, path, replace=replace, metadata=metadata)
    return Outcome("success", write, expectations=counts, rows_read=rows_read(ctx, node))


def build_by_groups(ctx: BuildContext, node: CompiledNode, path: str, metadata: dict) -> Outcome:
    """A table maintained per group (incremental_by): the groups its inputs' changes touch are
    recomputed and replaced, or, when that cannot be shown equal, the whole table."""
    cfg = node.config
    versions = input_versions(ctx, node)  # before reading: the changes up to these are applied
    metadata = {**metadata, **group_metadata(node, versions)}
    with ctx.phases.timing("changed_groups"):
        groups, why_full = (None, None) if ctx.full_refresh or not ctx.engine.table_exists(
            path) else changed_groups(ctx, node, path, versions)
    rows = model_rows(ctx, node)
    missing = [k for k in cfg.incremental_by if k not in rows.columns]
    if missing:
        raise MedallionError(f"incremental_by names {', '.join(missing)}, which the model does "
                             "not return", path=node.file.rel_path,
                             hint="name columns of its SELECT: the groups its rows are computed per")
    if groups is None:
        with checked_rows(ctx, node, rows, replace=True) as (df, counts), \
                ctx.phases.timing("write"):
            write = ctx.engine.write(df, path, "overwrite", cfg.partition_by, metadata=metadata,
                                     properties=cfg.delta_properties(df.columns))
        message = f"recomputed in full: {why_full}" if why_full else ""
        return Outcome("success", write, message, counts, rows_read(ctx, node))
    groups = groups.persist()
    try:
        with checked_rows(ctx, node, in_groups(rows, groups), replace=False) as (df, counts), \
                ctx.phases.timing("write"):
            spec = MergeSpec(cfg.incremental_by, null_safe_keys=cfg.incremental_by,
                             delete_column=DELETE_COLUMN, replace_groups=True)
            write = ctx.engine.merge(group_replacement(df, groups), path, spec, metadata,
                                     properties=cfg.delta_properties(df.columns))
        message = f"{groups.count()} group(s) recomputed, from the changes of their inputs"
    finally:
        groups.unpersist()
    return Outcome("success", write, message, counts)
