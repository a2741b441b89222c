"""Hooks, as dbt's: SQL statements run around a model (its `pre_hook` before its query, its
`post_hook` after its write) and around a build (`on-run-start` before the first node,
`on-run-end` after the last, whether nodes failed or not; in medallion_project.yml).

Each statement is rendered with Jinja as a model is (ref, source, this, var, macros) and run by
Spark in the node's own session, over the relations it names, registered as for a model; `this`
is the model's table as it is at that moment. So hooks can do what Spark SQL does on the engine:
on delta-spark that includes Delta's own commands over `delta.\\`<path>\\``; the embedded
engine's Spark has no Delta SQL (delta-rs keeps its tables), so hooks there read, check (say
`assert_true`) and set session options, and writing stays with models.
"""

from __future__ import annotations

from ..core.error_text import error_message
from ..core.errors import MedallionError
from ..core.nodes import CompiledNode
from ..load.rendering import Renderer
from .context import BuildContext
from .rows import with_views
from .sources.inputs import register_relations

EMBEDDED_HINT = ("hooks run as Spark SQL, and the embedded engine's Spark has no Delta SQL "
                 "(OPTIMIZE, INSERT INTO delta.`...`): run those on delta-spark, or use "
                 "zorder_by, optimize_after_files and `medallion optimize`")


def run_hooks(ctx: BuildContext, statements: tuple[str, ...], what: str, origin: str,
              node: CompiledNode | None = None, after: str = "", first: int = 1) -> None:
    """Run the statements in order; the first that fails raises, naming it (`what` N, counted
    from `first`) and what had happened before it (`after`: say, that the table was written)."""
    if not statements:
        return
    renderer = Renderer(ctx.project, table_exists=ctx.engine.table_exists)
    for number, text in enumerate(statements, first):
        sql, record = renderer.render_text(text, origin, node.name if node else None)
        if not sql.strip():  # a statement Jinja rendered away
            continue
        try:
            register_relations(ctx, record.refs, record.sources,
                               given=with_views(ctx, record.refs))
            if node is not None and ctx.engine.table_exists(ctx.project.table_path(node.file)):
                ctx.engine.read_table(ctx.project.table_path(node.file)).createOrReplaceTempView(
                    node.name)
            ctx.engine.spark.sql(sql).collect()
        except MedallionError:
            raise
        except Exception as exc:
            message = error_message(exc)
            no_delta_sql = not ctx.engine.capabilities.delta_sql and "delta" in message.lower()
            raise MedallionError(
                f"{what} {number} failed{after}: {message}", path=origin,
                hint=EMBEDDED_HINT if no_delta_sql else
                "the hook's SQL runs in Spark as written; fix it or the data it checks") from exc
