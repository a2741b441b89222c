"""Materializations: what building one node means for each `materialized` value.

Each function takes the compiled node and an engine and returns what it wrote. Inputs (refs,
sources, `this`) are registered as Spark temp views named as rendering names them.
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass
from pathlib import Path

from .engines import Engine, MergeSpec, WriteResult
from .errors import MedallionError
from .graph import Graph
from .project import Project, SourceTable
from .rendering import CompiledNode

SEED_HASH_KEY = "medallion.seed_sha256"
DELETE_COLUMN = "_medallion_delete"
CORRUPT_COLUMN = "_corrupt_record"
SOURCE_FILE_COLUMN = "_source_file"


@dataclass(frozen=True)
class Outcome:
    status: str  # "success" | "up_to_date"
    write: WriteResult | None = None
    message: str = ""


@dataclass(frozen=True)
class BuildContext:
    project: Project
    graph: Graph
    engine: Engine
    full_refresh: bool = False


def read_source(ctx: BuildContext, source: SourceTable):
    """A declared source as a DataFrame: a Delta table, or landing files read with their schema.

    File sources carry `_source_file`, the file each row came from (Spark's hidden `_metadata`
    column does not survive a temp view, so it is made a plain column here)."""
    if source.format == "delta":
        return ctx.engine.read_table(source.path)
    if not source.path.exists():
        raise MedallionError(f"source '{source.source}.{source.name}': no files at {source.path}",
                             path=source.origin, hint="land files there or fix the source's path")
    reader = ctx.engine.spark.read.format(source.format)
    options = dict(source.options)
    if source.format == "csv":
        options.setdefault("header", "true")
    if source.schema:
        schema = source.schema
        if source.format in ("json", "csv"):
            # Rows that do not fit the schema keep their raw text here instead of becoming nulls.
            schema = f"{schema}, {CORRUPT_COLUMN} string"
            options.setdefault("columnNameOfCorruptRecord", CORRUPT_COLUMN)
        reader = reader.schema(schema)
    df = reader.options(**options).load(str(source.path))
    return df.select("*", df["_metadata.file_path"].alias(SOURCE_FILE_COLUMN))


def register_inputs(ctx: BuildContext, node: CompiledNode) -> None:
    """Make every relation the node's SQL names resolvable: refs, sources and `this`."""
    for name in node.refs:
        _register_ref(ctx, name)
    for key in node.sources:
        source = ctx.project.sources[key]
        read_source(ctx, source).createOrReplaceTempView(source.relation)
    path = ctx.project.table_path(node.file)
    if node.is_incremental and ctx.engine.table_exists(path):
        ctx.engine.read_table(path).createOrReplaceTempView(node.name)


def _register_ref(ctx: BuildContext, name: str) -> None:
    parent = ctx.graph.nodes[name]
    if parent.config.materialized == "view":
        register_inputs(ctx, parent)
        ctx.engine.spark.sql(parent.sql).createOrReplaceTempView(name)
        return
    path = ctx.project.table_path(parent.file)
    if not ctx.engine.table_exists(path):
        raise MedallionError(f"'{name}' has not been built yet (no Delta table at {path})",
                             path=parent.file.rel_path,
                             hint=f"build it first: medallion build -s +{name}")
    ctx.engine.read_table(path).createOrReplaceTempView(name)


def build_node(ctx: BuildContext, node: CompiledNode) -> Outcome:
    if node.file.kind == "seed":
        return build_seed(ctx, node)
    register_inputs(ctx, node)
    df = ctx.engine.spark.sql(node.sql)
    materialized = node.config.materialized
    if materialized == "view":
        df.createOrReplaceTempView(node.name)
        return Outcome("success", message="view (compiled SQL, no table)")
    path = ctx.project.table_path(node.file)
    if materialized == "table":
        return Outcome("success", ctx.engine.write(df, path, "overwrite", node.config.partition_by))
    return Outcome("success", write_incremental(ctx, node, df, path))


def write_incremental(ctx: BuildContext, node: CompiledNode, df, path: Path) -> WriteResult:
    """Append or MERGE into the table; the first build (or --full-refresh) replaces it."""
    from pyspark.sql import functions as F

    cfg = node.config
    if cfg.strategy == "merge":
        df = prepare_merge_source(df, cfg)
    if not node.is_incremental:
        if DELETE_COLUMN in df.columns:
            df = df.where(~F.col(DELETE_COLUMN)).drop(DELETE_COLUMN)
        return ctx.engine.write(df, path, "overwrite", cfg.partition_by)
    existing = ctx.engine.read_table(path).columns
    new_columns = [c for c in df.columns if c not in existing and c != DELETE_COLUMN]
    if new_columns and cfg.on_schema_change == "fail":
        raise MedallionError(
            f"the model now returns new columns {', '.join(new_columns)} that its table lacks",
            path=node.file.rel_path,
            hint="set on_schema_change='append_new_columns' to add them, or run with --full-refresh")
    evolve = bool(new_columns)
    if cfg.strategy == "append":
        return ctx.engine.write(df, path, "append", merge_schema=evolve)
    return ctx.engine.merge(df, path, merge_spec(cfg), merge_schema=evolve)


def merge_spec(cfg) -> MergeSpec:
    return MergeSpec(keys=cfg.unique_key, sequence_by=cfg.sequence_by,
                     delete_column=DELETE_COLUMN if cfg.delete_when else None)


def prepare_merge_source(df, cfg):
    """One row per key (the latest by sequence_by) with the delete flag computed by Spark."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if cfg.sequence_by:
        latest = Window.partitionBy(*cfg.unique_key).orderBy(F.col(cfg.sequence_by).desc_nulls_last())
        df = (df.withColumn("_medallion_rank", F.row_number().over(latest))
              .where("_medallion_rank = 1").drop("_medallion_rank"))
    if cfg.delete_when:
        df = df.withColumn(DELETE_COLUMN, F.coalesce(F.expr(cfg.delete_when), F.lit(False)))
    return df


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


def build_seed(ctx: BuildContext, node: CompiledNode) -> Outcome:
    from pyspark.sql import functions as F

    file = node.file
    path = ctx.project.table_path(file)
    digest = hashlib.sha256(file.path.read_bytes()).hexdigest()
    if (not ctx.full_refresh and ctx.engine.table_exists(path)
            and ctx.engine.table_metadata(path).get(SEED_HASH_KEY) == digest):
        return Outcome("up_to_date", message="seed file unchanged")
    _seed_rows_check(file.path, file.rel_path)
    df = ctx.engine.spark.read.csv(str(file.path), header=True, inferSchema=True, mode="FAILFAST")
    unknown = set(node.config.column_types) - set(df.columns)
    if unknown:
        raise MedallionError(f"column_types names columns the seed lacks: {', '.join(sorted(unknown))}",
                             path=file.rel_path, hint="columns: " + ", ".join(df.columns))
    df = df.select([F.col(c).cast(node.config.column_types[c]).alias(c)
                    if c in node.config.column_types else F.col(c) for c in df.columns])
    return Outcome("success", ctx.engine.write(df, path, "overwrite",
                                               metadata={SEED_HASH_KEY: digest}))
