"""`medallion run-operation`: call one of the project's macros with arguments, as dbt's
run-operation does, for the chores around models (grants, housekeeping, a one-off backfill
query). Inside it, `run_query(sql)` runs Spark SQL over the project's tables (the refs and
sources the macro named are registered as in a model) and returns the rows; `log(message)`
prints a line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ..core.nodes import Recorded
from ..load.rendering import Renderer
from .invocation import Invocation, load

if TYPE_CHECKING:
    from pyspark.sql import Row


def run_operation(inv: Invocation, name: str, args: dict[str, Any],
                  echo: Callable[[str], None]) -> str:
    """Render macro `name` with `args`; returns what it rendered (stripped)."""
    from ..materialize.context import BuildContext
    from ..materialize.rows import query_rows

    loaded = load(inv, with_engine=True)
    engine = loaded.engine
    assert engine is not None  # load(with_engine=True) made one
    record = Recorded(f"macro {name}")
    ctx = BuildContext(loaded.project, loaded.graph, engine)

    def run_query(sql: str) -> list[Row]:
        return query_rows(ctx, record, sql, f"macro '{name}'")

    def log(message: object, info: bool = True) -> str:
        echo(str(message))
        return ""

    renderer = Renderer(loaded.project, table_exists=engine.table_exists)
    return renderer.call_operation(name, args, record, {
        "run_query": run_query, "log": log, "execute": True}).strip()
