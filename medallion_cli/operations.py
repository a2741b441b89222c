"""`medallion run-operation`: call one of the project's macros with arguments, as dbt's
run-operation does, for the chores around models (grants, housekeeping, a one-off backfill
query). Inside it, `run_query(sql)` runs Spark SQL over the project's tables (the refs and
sources the macro named are registered as in a model) and returns the rows; `log(message)`
prints a line."""

from __future__ import annotations

from typing import Callable

from .errors import MedallionError
from .failures import error_message
from .rendering import Recorded, Renderer
from .tasks import Invocation, load


def run_operation(inv: Invocation, name: str, args: dict, echo: Callable[[str], None]) -> str:
    """Render macro `name` with `args`; returns what it rendered (stripped)."""
    from .build.context import BuildContext
    from .build.inputs import register_relations
    from .build.rows import with_views

    loaded = load(inv, with_engine=True)
    engine = loaded.engine
    record = Recorded(f"macro {name}")
    ctx = BuildContext(loaded.project, loaded.graph, engine)

    def run_query(sql: str):
        register_relations(ctx, record.refs, record.sources, given=with_views(ctx, record.refs))
        try:
            return engine.spark.sql(sql).collect()
        except Exception as exc:
            raise MedallionError(f"run_query in macro '{name}' failed: {error_message(exc)}",
                                 hint="check the SQL the macro passes to run_query") from exc

    def log(message, info: bool = True) -> str:
        echo(str(message))
        return ""

    renderer = Renderer(loaded.project, table_exists=engine.table_exists)
    return renderer.call_operation(name, args, record, {
        "run_query": run_query, "log": log, "execute": True}).strip()
