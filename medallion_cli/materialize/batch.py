"""The batch drivers: a view, a seed, a table or an incremental model, built once (the strategy
table, strategies.py, picks which; by_groups/driver.py builds tables kept per group).

Their steps in order: is anything new (the fingerprint)? its rows (rows.py), its checks
(checks.py), its write (writing/writes.py) in one Delta commit that records the new fingerprint.
"""

from __future__ import annotations

from ..core.nodes import CompiledNode
from .checks import check_table_properties, checked_rows
from .context import BuildContext, Outcome
from .rows import model_rows, seed_rows
from .state import last_build, rows_read
from .writing.writes import Into, replace_table, write_incremental


def build_view(ctx: BuildContext, node: CompiledNode, into: Into | None = None) -> Outcome:
    check_table_properties(ctx, node)
    model_rows(ctx, node)  # analysed, so a broken view fails here: it has no table
    return Outcome("success")


def build_seed(ctx: BuildContext, node: CompiledNode, into: Into | None = None) -> Outcome:
    check_table_properties(ctx, node)
    path, metadata, unchanged = last_build(ctx, node)
    if unchanged:
        return unchanged
    rows = seed_rows(ctx, node)
    with ctx.phases.timing("write"):
        return Outcome("success", replace_table(ctx, node, rows, path, metadata))


def build_table(ctx: BuildContext, node: CompiledNode, into: Into | None = None) -> Outcome:
    """Every build writes the table anew from the model's rows."""
    return _build(ctx, node, None)


def build_incremental(ctx: BuildContext, node: CompiledNode, into: Into) -> Outcome:
    """A first build (or --full-refresh, or SQL that does not ask is_incremental()) writes the
    table; later ones put the new rows in the way `into` says (append, MERGE)."""
    return _build(ctx, node, into)


def _build(ctx: BuildContext, node: CompiledNode, into: Into | None) -> Outcome:
    check_table_properties(ctx, node)
    path, metadata, unchanged = last_build(ctx, node)
    if unchanged:
        return unchanged
    replace = into is None or not node.is_incremental
    rows = model_rows(ctx, node)  # first: it names an input not built yet
    read = rows_read(ctx, node)  # before the commit: after it, a Ctrl-C must not undo its report
    with checked_rows(ctx, node, rows, replace,
                      settled=into is None) as checks, ctx.phases.timing("write"):
        if into is None:
            write = replace_table(ctx, node, checks.rows, path, metadata)
        else:
            write = write_incremental(ctx, node, checks, path, replace, into, metadata=metadata)
    return Outcome("success", write, expectations=checks.counts, rows_read=read,
                   rows_checked=checks.checked)
