"""Models whose SQL depends on queries, as dbt's `{% if execute %}{% set rows = run_query(...) %}`:
parsed with `execute` false (run_query returns no rows), so the graph is known before anything
runs, then rendered again as the model's turn comes, when its queries see the tables built before
it in this run. The refs it names must be the ones it named when parsed: the build ordered it by
them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from ..core.errors import MedallionError
from ..core.nodes import CompiledNode, Recorded
from ..load.rendering import Renderer
from .context import BuildContext
from .rows import query_rows

if TYPE_CHECKING:
    from pyspark.sql import Row


def rendered_to_run(ctx: BuildContext, node: CompiledNode) -> CompiledNode:
    """The node as it runs now: rendered again with `execute` true when its SQL asked."""
    if not node.executes:
        return node
    origin = node.file.rel_path

    def check_ordered(refs: Iterable[str]) -> None:
        unordered = [name for name in refs if name not in node.refs]
        if unordered:
            raise MedallionError(
                f"ref('{unordered[0]}') is named only when the model runs (under execute), so "
                "the build could not run it after that table", path=origin,
                hint="name it where the model is parsed too, e.g. a comment outside the if: "
                     "-- depends_on: {{ ref('" + unordered[0] + "') }}")

    def run_query(sql: str, record: Recorded) -> list[Row]:
        check_ordered(record.refs)
        return query_rows(ctx, record, sql, "the model", origin)

    renderer = Renderer(ctx.project, ctx.full_refresh, table_exists=ctx.engine.table_exists)
    ran = renderer.render(node.file, run_query)
    check_ordered(ran.refs)
    return replace(ran, after=node.after)
