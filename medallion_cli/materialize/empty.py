"""`--empty`, as dbt's: each selected model's SQL is run over inputs with no rows, to check the
SQL, the columns its config names, its expectations and its contract across the whole DAG in
seconds. Nothing is written: no table, no fingerprint, no event.

A model's inputs are the schemas its parents would write, as checked earlier in the same run
(a MERGE's history columns included), or, for parents not selected, their tables as they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.config import CHANGE_FEED_TYPES
from ..core.error_text import error_message
from ..core.errors import MedallionError
from ..core.nodes import CompiledNode, changes_relation
from .checks import check_contract
from .clustering import check_layout_columns
from .context import (
    DELETE_COLUMN,
    IS_CURRENT,
    VALID_FROM,
    VALID_TO,
    BuildContext,
    Outcome,
)
from .rows import model_rows, seed_rows
from .sources.inputs import built_table, read_source
from .writing.snapshots import snapshot_events
from .writing.writes import merge_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

CHANGE_COLUMNS = ", ".join(f"{name} {kind}" for name, kind in CHANGE_FEED_TYPES.items())


def check_on_no_rows(ctx: BuildContext, node: CompiledNode,
                     schemas: dict[str, StructType]) -> Outcome:
    """Check the node over empty inputs; `schemas` (name -> the StructType its table would
    have) gets the node's own."""
    spark = ctx.engine.spark
    if node.file.kind == "seed":
        schemas[node.name] = seed_rows(ctx, node).schema
        return Outcome("success", message="checked on no rows")

    def empty(name: str) -> DataFrame:
        if name in schemas:
            return spark.createDataFrame([], schemas[name])
        return ctx.engine.read_table(built_table(ctx, ctx.graph.nodes[name])).limit(0)

    inputs = {name: empty(name) for name in node.refs if name not in node.feed_only}
    for name in node.change_refs:
        rows = empty(name)
        inputs[changes_relation(name)] = rows.join(spark.createDataFrame([], CHANGE_COLUMNS),
                                                   how="cross")
    for key in node.sources:
        source = ctx.project.sources[key]
        inputs[source.relation] = read_source(ctx, source).limit(0)
    try:
        rows = model_rows(ctx, node, inputs=inputs)
    except MedallionError:
        raise
    except Exception as exc:  # the SQL does not analyse over its inputs' columns
        raise MedallionError(error_message(exc), path=node.file.rel_path,
                             hint="fix the model's SQL") from exc
    written = table_rows(ctx, node, rows)
    schemas[node.name] = written.schema
    return Outcome("success", message=f"checked on no rows: {len(written.columns)} column(s)")


def table_rows(ctx: BuildContext, node: CompiledNode, rows: DataFrame) -> DataFrame:
    """The model's rows checked against its config, as its table would hold them."""
    from ..spark.pyspark_api import F

    cfg = node.config
    named = {"unique_key": cfg.unique_key, "sequence_by": cfg.sequence_by,
             "partition_by": cfg.partition_by, "incremental_by": cfg.incremental_by}
    for key, columns in named.items():
        missing = [c for c in columns if c not in rows.columns]
        if missing:
            raise MedallionError(f"config '{key}' names {', '.join(missing)}, which the model "
                                 "does not return", path=node.file.rel_path,
                                 hint="columns: " + ", ".join(rows.columns))
    history = (VALID_FROM, VALID_TO, IS_CURRENT) if cfg.scd_type == 2 else ()
    check_layout_columns((*rows.columns, *history), f"the rows of model '{node.name}'",
                         node.file.rel_path, zorder_by=cfg.zorder_by, cluster_by=cfg.cluster_by)
    conditions = {f"expectation '{name}'": rule["expect"]
                  for name, rule in cfg.expectations.items()}
    for key in ("delete_when", "truncate_when"):
        if getattr(cfg, key):
            conditions[key] = getattr(cfg, key)
    # a snapshot model's delete_when reads the flag its snapshots' deletes get
    events = snapshot_events(None, cfg, rows, None) if cfg.cdc == "snapshot" else rows
    for what, condition in conditions.items():
        try:
            events.select(F.expr(condition)).schema
        except Exception as exc:
            raise MedallionError(f"{what} cannot be evaluated on the model's rows: "
                                 f"{error_message(exc)}", path=node.file.rel_path,
                                 hint="columns: " + ", ".join(rows.columns)) from exc
    check_contract(node, rows)
    if node.config.materialized == "view" or cfg.strategy != "merge":
        return rows
    return merge_rows(None, cfg, rows, None)[0].drop(DELETE_COLUMN)
