"""The batch driver: a view, a table, an incremental model or a seed, built once.

Its steps in order: is anything new (the fingerprint)? its rows (rows.py), its checks
(checks.py), its write (writes.py) in one Delta commit that records the new fingerprint.
"""

from __future__ import annotations

from ..core.nodes import CompiledNode
from .by_groups import build_by_groups
from .checks import check_table_properties, checked_rows
from .context import BuildContext, Outcome
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
    incremental = cfg.materialized != "table"
    rows = model_rows(ctx, node)  # first: it names an input not built yet
    read = rows_read(ctx, node)  # before the commit: after it, a Ctrl-C must not undo its report
    with checked_rows(ctx, node, rows, replace,
                      settled=not incremental) as checks, ctx.phases.timing("write"):
        if incremental:
            write = write_incremental(ctx, node, checks, path, replace=replace, metadata=metadata)
        else:
            write = ctx.engine.write(checks.rows, path, "overwrite", cfg.partition_by,
                                     metadata=metadata,
                                     properties=cfg.delta_properties(checks.rows.columns))
    return Outcome("success", write, expectations=checks.counts, rows_read=read,
                   rows_checked=checks.checked)
