"""Backfills by range (`build --start/--end`), as dbt's microbatch models and Delta's
replaceWhere: the rows of a model's table whose `event_time` falls in the range are replaced, in
one commit, by the model's rows for that range, computed from its inputs' rows in the range
(each input with an `event_time` of its own is read for the range only; others whole). The
rest of the table is left as it was, and a backfill that fails or is killed leaves the old
rows. The commit keeps the table's fingerprint: the next build judges the table as before.
"""

from __future__ import annotations

from ..core.errors import MedallionError, ProjectError
from ..core.nodes import CompiledNode
from ..engines.sql import RowRange
from .checks import checked_rows
from .context import BuildContext, Outcome, input_table
from .rows import model_rows
from .state import DEFINITION_KEY, FINGERPRINT_KEY
from .writing.schema_changes import evolve_table

RANGE_KEY = "medallion.range"  # the commit's range, for `medallion history`


def range_refusal(node: CompiledNode) -> ProjectError | None:
    """Why a backfill by range cannot replace part of this node's table; None: it can."""
    cfg = node.config
    why = ("it has no event_time to tell the range's rows by" if not cfg.event_time else
           "it is a seed" if node.file.kind == "seed" else
           "it is a view: it has no table" if cfg.materialized == "view" else
           f"it is {cfg.materialized}: its checkpoint says what it has read"
           if cfg.materialized == "streaming" else
           "its rows are kept per key, not per event" if cfg.strategy == "merge" else
           "its rows are kept per group" if cfg.incremental_by else None)
    if why is None:
        return None
    return ProjectError(f"--start/--end cannot backfill {node.name}: {why}",
                        path=node.file.rel_path,
                        hint="select only tables and append models with an event_time (-s), or "
                             f"rebuild it whole: medallion build --full-refresh -s {node.name}")


def build_range(ctx: BuildContext, node: CompiledNode) -> Outcome:
    assert ctx.event_range is not None and node.config.event_time is not None
    path = ctx.project.table_path(node.file)
    existing = ctx.engine.table_columns(path)
    replaced = _range(ctx, node.config.event_time, existing)
    if replaced is None or existing is None:
        raise MedallionError(f"{node.name} has no table with its event_time column "
                             f"'{node.config.event_time}' yet: a backfill replaces part of one",
                             path=node.file.rel_path,
                             hint=f"build it first: medallion build -s {node.name}")
    inputs = {}
    for ref in node.refs:
        parent, column = input_table(ctx, ref), ctx.graph.nodes[ref].config.event_time
        read = _range(ctx, column, ctx.engine.table_columns(parent)) if column else None
        if read is not None:
            inputs[ref] = ctx.engine.read_table(parent).where(read.sql())
    rows = model_rows(ctx, node, inputs=inputs).where(replaced.sql())
    evolve = evolve_table(ctx, node, rows.schema, path)
    metadata = {key: value for key in (FINGERPRINT_KEY, DEFINITION_KEY)
                if (value := ctx.engine.last_commit_value(path, key))}
    with checked_rows(ctx, node, rows, replace=False) as checks, ctx.phases.timing("write"):
        write = ctx.engine.write(
            checks.rows, path, "overwrite", node.config.partition_by,
            {**metadata, RANGE_KEY: replaced.sql()}, merge_schema=evolve, replace_where=replaced)
    return Outcome("success", write, expectations=checks.counts, rows_checked=checks.checked)


def _range(ctx: BuildContext, column: str, types: dict[str, str] | None) -> RowRange | None:
    """The backfill's range over a table with these column `types`, by its event_time
    `column`; None when there is no table or it lacks the column (a view, an input not built:
    read whole)."""
    assert ctx.event_range is not None
    if not types or column not in types:
        return None
    return RowRange(column, types[column], *ctx.event_range)
