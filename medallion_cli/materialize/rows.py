"""A node's rows: its SQL over its inputs (views expanded into their own SQL), or a seed's CSV
with the column types its config gives."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.error_text import error_message
from ..core.errors import MedallionError
from ..core.nodes import CompiledNode, Recorded
from .context import BuildContext
from .sources.inputs import register_inputs, register_relations

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row


def with_views(ctx: BuildContext, refs: Iterable[str], given: dict[str, DataFrame] | None = None
               ) -> dict[str, DataFrame]:
    """`given` plus the rows of every view among `refs`: a view has no table, its rows are its
    own SQL over its own inputs."""
    given = dict(given or {})
    for name in refs:
        if name not in given and ctx.graph.nodes[name].config.materialized == "view":
            given[name] = model_rows(ctx, ctx.graph.nodes[name])
    return given


def model_rows(ctx: BuildContext, node: CompiledNode, streaming: bool = False,
               inputs: dict[str, DataFrame] | None = None) -> DataFrame:
    """The node's SQL as a DataFrame over its inputs; `inputs` (relation -> DataFrame) stand in
    for some of them, as a micro-batch's new rows do for a streaming model."""
    register_inputs(ctx, node, streaming, with_views(ctx, node.refs, inputs))
    assert node.sql is not None  # a seed's rows are seed_rows'
    return ctx.engine.spark.sql(node.sql)


def query_rows(ctx: BuildContext, record: Recorded, sql: str, what: str,
               origin: str | None = None) -> list[Row]:
    """Jinja's run_query(): the rows of Spark SQL over the relations `record` has named so far
    (registered as for a model), in the context's session; `what` calls it, for errors."""
    register_relations(ctx, record.refs, record.sources, given=with_views(ctx, record.refs))
    try:
        return ctx.engine.spark.sql(sql).collect()
    except Exception as exc:
        raise MedallionError(f"run_query in {what} failed: {error_message(exc)}", path=origin,
                             hint="check the SQL passed to run_query") from exc


def _seed_rows_check(path: Path, rel_path: str) -> None:
    """Fail early, naming the line, when a seed's rows do not match its header."""
    with path.open(newline="") as handle:
        rows = csv.reader(handle)
        header = next(rows, None)
        if not header or not any(h.strip() for h in header):
            raise MedallionError("the seed has no header row", path=rel_path,
                                 hint="the first line must name the columns")
        for number, row in enumerate(rows, start=2):
            if row and len(row) != len(header):
                raise MedallionError(
                    f"row has {len(row)} fields but the header has {len(header)}",
                    path=rel_path, line=number, hint="fix the row or quote values with commas")


def seed_rows(ctx: BuildContext, node: CompiledNode) -> DataFrame:
    """A seed CSV as a DataFrame, with the column types its config gives."""
    from ..spark.pyspark_api import F

    file = node.file
    _seed_rows_check(file.path, file.rel_path)
    df = ctx.engine.spark.read.csv(str(file.path), header=True, inferSchema=True, mode="FAILFAST")
    types = node.config.column_types
    unknown = set(types) - set(df.columns)
    if unknown:
        raise MedallionError(f"column_types names columns the seed lacks: "
                             f"{', '.join(sorted(unknown))}", path=file.rel_path,
                             hint="columns: " + ", ".join(df.columns))
    return df.select([F.col(c).cast(types[c]).alias(c) if c in types else F.col(c)
                      for c in df.columns])
