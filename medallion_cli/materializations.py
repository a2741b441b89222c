"""Materializations: what building one node means for each `materialized` value.

Each function takes the compiled node and an engine and returns what it wrote. Inputs (refs,
sources, `this`) are registered as Spark temp views named as rendering names them.
"""

from __future__ import annotations

import csv
import hashlib
import json
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .engines import Engine, MergeSpec, WriteResult
from .errors import MedallionError
from .graph import Graph
from .locations import is_remote
from .project import Project, SourceTable
from .rendering import CompiledNode

FINGERPRINT_KEY = "medallion.fingerprint"
DELETE_COLUMN = "_medallion_delete"
CORRUPT_COLUMN = "_corrupt_record"
SOURCE_FILE_COLUMN = "_source_file"
FAILED_RULES = "_failed_rules"
VALID_FROM, VALID_TO, IS_CURRENT = "valid_from", "valid_to", "is_current"
# Temp views belong to the whole Spark session, and nodes built side by side may register the
# same relation differently (a whole table, or a micro-batch's new rows): registering a node's
# inputs and analysing its SQL happen under this lock, after which the plan no longer reads them.
VIEWS_LOCK = threading.RLock()


@dataclass(frozen=True)
class Outcome:
    status: str  # "success" | "up_to_date"
    write: WriteResult | None = None
    message: str = ""
    expectations: dict = field(default_factory=dict)  # rule -> rows that failed it
    rows_read: int | None = None


@dataclass(frozen=True)
class BuildContext:
    project: Project
    graph: Graph
    engine: Engine
    full_refresh: bool = False


def read_source(ctx: BuildContext, source: SourceTable, streaming: bool = False):
    """A declared source as a DataFrame: a Delta table, or landing files read with their schema.

    File sources carry `_source_file`, the file each row came from (Spark's hidden `_metadata`
    column does not survive a temp view, so it is made a plain column here)."""
    if source.format == "delta":
        return ctx.engine.read_stream(source.path) if streaming else ctx.engine.read_table(
            source.path)
    if not is_remote(source.path) and not Path(source.path).exists():
        raise MedallionError(f"source '{source.source}.{source.name}': no files at {source.path}",
                             path=source.origin, hint="land files there or fix the source's path")
    spark = ctx.engine.spark
    options = dict(source.options)
    if source.format == "csv":
        options.setdefault("header", "true")
    schema = source.schema
    if schema and source.format in ("json", "csv"):
        # Rows that do not fit the schema keep their raw text here instead of becoming nulls.
        schema = f"{schema}, {CORRUPT_COLUMN} string"
        options.setdefault("columnNameOfCorruptRecord", CORRUPT_COLUMN)
    if streaming and not schema:
        if source.format != "parquet":
            raise MedallionError(
                f"source '{source.source}.{source.name}' is read as a stream and needs a schema",
                path=source.origin, hint="add schema: 'col type, ...' to the source table")
        schema = spark.read.parquet(str(source.path)).schema  # Parquet files carry their own
    reader = (spark.readStream if streaming else spark.read).format(source.format)
    if schema:
        reader = reader.schema(schema)
    df = reader.options(**options).load(str(source.path))
    return df.select("*", df["_metadata.file_path"].alias(SOURCE_FILE_COLUMN))


def register_inputs(ctx: BuildContext, node: CompiledNode, streaming: bool = False,
                    given: dict | None = None) -> None:
    """Make every relation the node's SQL names resolvable: refs, sources and `this`; `given`
    (relation -> DataFrame) stands in for some of them."""
    register_relations(ctx, node.refs, node.sources, streaming, given)
    path = ctx.project.table_path(node.file)
    if node.is_incremental and ctx.engine.table_exists(path):
        ctx.engine.read_table(path).createOrReplaceTempView(node.name)


def model_rows(ctx: BuildContext, node: CompiledNode, streaming: bool = False,
               inputs: dict | None = None):
    """The node's SQL as a DataFrame over its registered inputs; `inputs` (relation ->
    DataFrame) stand in for some of them, as a micro-batch's new rows do for a streaming model."""
    with VIEWS_LOCK:
        register_inputs(ctx, node, streaming, inputs)
        return ctx.engine.spark.sql(node.sql)


def register_relations(ctx: BuildContext, refs, sources, streaming: bool = False,
                       given: dict | None = None) -> None:
    """Temp views for refs and sources, named as rendering names them; the relations in `given`
    are registered as those DataFrames, and not read otherwise.

    For a streaming model, sources and refs to streaming models are read as streams; other refs
    (seeds, tables, views) are read as they are when the query starts, like dimension tables."""
    given = given or {}
    for name in refs:
        if name in given:
            continue
        parent = ctx.graph.nodes[name]
        if streaming and parent.config.materialized == "streaming":
            ctx.engine.read_stream(built_table(ctx, parent)).createOrReplaceTempView(name)
        else:
            _register_ref(ctx, name)
    for key in sources:
        source = ctx.project.sources[key]
        if source.relation not in given:
            read_source(ctx, source, streaming).createOrReplaceTempView(source.relation)
    for relation, df in given.items():
        df.createOrReplaceTempView(relation)


def built_table(ctx: BuildContext, node: CompiledNode) -> str:
    path = ctx.project.table_path(node.file)
    if not ctx.engine.table_exists(path):
        raise MedallionError(f"'{node.name}' has not been built yet (no Delta table at {path})",
                             path=node.file.rel_path,
                             hint=f"build it first: medallion build -s +{node.name}")
    return path


def _register_ref(ctx: BuildContext, name: str) -> None:
    parent = ctx.graph.nodes[name]
    if parent.config.materialized == "view":
        model_rows(ctx, parent).createOrReplaceTempView(name)
        return
    ctx.engine.read_table(built_table(ctx, parent)).createOrReplaceTempView(name)


def fingerprint(ctx: BuildContext, node: CompiledNode) -> str:
    """What a batch node's table depends on: its SQL (or seed file), its config, and the state of
    every input (Delta versions of tables, file listings of landing sources). A build whose
    fingerprint equals the one its table was written with would write the same table again."""
    inputs: dict = {}
    for name in node.refs:
        parent = ctx.graph.nodes[name]
        path = ctx.project.table_path(parent.file)
        inputs[name] = (fingerprint(ctx, parent) if parent.config.materialized == "view"
                        else ctx.engine.table_version(path) if ctx.engine.table_exists(path)
                        else None)
    for key in node.sources:
        source = ctx.project.sources[key]
        inputs[source.relation] = (ctx.engine.table_version(source.path)
                                   if source.format == "delta" else _file_listing(ctx, source.path))
    content = node.sql if node.sql is not None else hashlib.sha256(
        node.file.path.read_bytes()).hexdigest()
    text = json.dumps({"content": content, "config": node.config.as_dict(), "inputs": inputs},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def rows_read(ctx: BuildContext, node: CompiledNode) -> int | None:
    """Rows in the Delta tables a batch model reads (through views too), from the tables' file
    statistics; None when it also reads landing files, whose rows are not counted anywhere."""
    total = 0
    for name in node.refs:
        parent = ctx.graph.nodes[name]
        rows = (rows_read(ctx, parent) if parent.config.materialized == "view"
                else ctx.engine.row_count(ctx.project.table_path(parent.file)))
        if rows is None:
            return None
        total += rows
    for key in node.sources:
        source = ctx.project.sources[key]
        rows = ctx.engine.row_count(source.path) if source.format == "delta" else None
        if rows is None:
            return None
        total += rows
    return total


def _file_listing(ctx: BuildContext, location: str) -> list:
    """(file, size, modified) of every file under a landing location. Local folders are listed
    here, so a build with nothing new starts no JVM; object stores through Spark's file system."""
    if is_remote(location):
        from .engines.spark import list_files

        return list_files(ctx.engine.spark, location)
    folder = Path(location)
    return sorted((str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in folder.rglob("*") if p.is_file())


def check_table_properties(ctx: BuildContext, node: CompiledNode) -> None:
    """Refuse, before anything runs, a table property the engine cannot keep."""
    for key, value in node.config.table_properties.items():
        problem = ctx.engine.property_problem(key, value)
        if problem:
            raise MedallionError(problem, path=node.file.rel_path,
                                 hint="remove it from table_properties or change engine")


def build_node(ctx: BuildContext, node: CompiledNode) -> Outcome:
    check_table_properties(ctx, node)
    if node.config.materialized == "streaming":
        from .streaming import build_streaming

        return build_streaming(ctx, node)
    if node.config.materialized == "view":
        model_rows(ctx, node).createOrReplaceTempView(node.name)
        return Outcome("success")
    path = ctx.project.table_path(node.file)
    state = fingerprint(ctx, node)
    if (not ctx.full_refresh and ctx.engine.table_exists(path)
            and ctx.engine.last_commit_value(path, FINGERPRINT_KEY) == state):
        return Outcome("up_to_date", message="inputs, SQL and config unchanged since the last build")
    metadata = {FINGERPRINT_KEY: state}
    if node.file.kind == "seed":
        return Outcome("success", ctx.engine.write(read_seed(ctx, node), path, "overwrite",
                                                   metadata=metadata,
                                                   properties=node.config.table_properties))
    replace = node.config.materialized == "table" or not node.is_incremental
    with checked_rows(ctx, node, model_rows(ctx, node), replace) as (df, counts):
        if node.config.materialized == "table":
            write = ctx.engine.write(df, path, "overwrite", node.config.partition_by,
                                     metadata=metadata, properties=node.config.table_properties)
        else:
            write = write_incremental(ctx, node, df, path, replace=replace, metadata=metadata)
    return Outcome("success", write, expectations=counts, rows_read=rows_read(ctx, node))


@contextmanager
def checked_rows(ctx: BuildContext, node: CompiledNode, df, replace: bool,
                 txn: tuple[str, int] | None = None):
    """Evaluate the model's expectations on the rows it is about to write.

    Yields (rows to write, {rule: failing rows}). A `fail` rule that any row breaks raises before
    anything is written; rows breaking a `drop` rule go to the `<model>_quarantine` table (with
    `_failed_rules` and `_quarantined_at`) instead of the model's table; `warn` only counts. A
    condition that is null for a row counts as broken."""
    rules = node.config.expectations
    if not rules:
        yield df, {}
        return
    from pyspark.sql import functions as F

    broken = [F.when(~F.coalesce(F.expr(r["expect"]), F.lit(False)), F.lit(name))
              for name, r in rules.items()]
    checked = df.withColumn(FAILED_RULES, F.filter(F.array(*broken), lambda x: x.isNotNull()))
    # Counting is a pass of its own, and the write computes the rows again: caching them for the
    # write cost more than recomputing a typical silver model (a 500k-row batch: 2.7 s against
    # 0.9 s). Only rows split between the table and the quarantine are cached, computed once.
    totals = checked.select([F.sum(F.array_contains(FAILED_RULES, name).cast("int")).alias(name)
                             for name in rules]).first()
    counts = {name: int(totals[name] or 0) for name in rules}
    stopping = [n for n, r in rules.items() if r["on_violation"] == "fail" and counts[n]]
    if stopping:
        raise MedallionError(
            "expectation " + ", ".join(f"'{n}' failed on {counts[n]} row(s)" for n in stopping)
            + "; nothing was written", path=node.file.rel_path,
            hint="fix the data or the rule; on_violation 'drop' would quarantine the rows")
    dropping = [n for n, r in rules.items() if r["on_violation"] == "drop"]
    dropped = F.arrays_overlap(F.col(FAILED_RULES), F.array(*map(F.lit, dropping or [""])))
    quarantine = ctx.project.quarantine_path(node.file)
    split = any(counts[n] for n in dropping)
    if split:
        checked = checked.persist()
    try:
        # A replaced table starts a new quarantine too, so old bad rows do not linger there.
        if split or (replace and ctx.engine.table_exists(quarantine)):
            bad = checked.where(dropped).withColumn("_quarantined_at", F.current_timestamp())
            ctx.engine.write(bad, quarantine, "overwrite" if replace else "append",
                             merge_schema=True, txn=txn)
        yield checked.where(~dropped).drop(FAILED_RULES), counts
    finally:
        if split:
            checked.unpersist()


def write_incremental(ctx: BuildContext, node: CompiledNode, df, path: str, replace: bool,
                      txn: tuple[str, int] | None = None,
                      metadata: dict | None = None) -> WriteResult:
    """Append or MERGE into the table, or create it (replace) on the first write.

    Used for incremental batch models and for each micro-batch of a streaming model (with txn,
    the app transaction that makes a replayed batch a no-op)."""
    cfg = node.config
    spec = None
    if cfg.strategy == "merge":
        df, spec = merge_rows(ctx, cfg, df, None if replace else path)
    if replace:
        return ctx.engine.write(without_deletes(df), path, "overwrite", cfg.partition_by, metadata,
                                txn=txn, properties=cfg.table_properties)
    existing = ctx.engine.read_table(path).columns
    new_columns = [c for c in df.columns if c not in existing and c != DELETE_COLUMN]
    if new_columns and cfg.on_schema_change == "fail":
        raise MedallionError(
            f"the model now returns new columns {', '.join(new_columns)} that its table lacks",
            path=node.file.rel_path,
            hint="set on_schema_change='append_new_columns' to add them, or run with --full-refresh")
    evolve = bool(new_columns)
    if cfg.strategy == "append":
        return ctx.engine.write(df, path, "append", metadata=metadata, merge_schema=evolve,
                                txn=txn, properties=cfg.table_properties)
    return ctx.engine.merge(df, path, spec, metadata, merge_schema=evolve, txn=txn,
                            properties=cfg.table_properties)


def merge_rows(ctx: BuildContext | None, cfg, df, existing: str | None):
    """The rows a MERGE writes and how it matches them: one row per key (the latest by
    sequence_by) with a delete flag, or, for scd_type 2, the recomputed history of the keys
    touched (existing: the table to merge into, None on the first build)."""
    if cfg.scd_type == 2:
        return scd2_history(ctx, df, cfg, existing), MergeSpec(keys=cfg.unique_key + (VALID_FROM,))
    return prepare_merge_source(df, cfg), MergeSpec(
        keys=cfg.unique_key, sequence_by=cfg.sequence_by,
        delete_column=DELETE_COLUMN if cfg.delete_when else None)


def without_deletes(df):
    """Rows to write to a new table: those flagged for deletion have nothing to delete."""
    from pyspark.sql import functions as F

    if DELETE_COLUMN not in df.columns:
        return df
    return df.where(~F.col(DELETE_COLUMN)).drop(DELETE_COLUMN)


def first_build_rows(node: CompiledNode, df):
    """What the model's table holds after a first build from `df` alone (unit tests compare
    with this): merge semantics applied, deletes removed."""
    cfg = node.config
    if cfg.materialized in ("incremental", "streaming") and cfg.strategy == "merge":
        df, _ = merge_rows(None, cfg, df, None)
    return without_deletes(df)


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


def scd2_history(ctx: BuildContext, df, cfg, path: str | None):
    """SCD type 2 rows for every key the new rows touch, recomputed from the whole timeline.

    The timeline of a key is its stored versions plus the new rows, ordered by sequence_by; each
    version is valid from its own sequence value to the next one's, and the last is current unless
    a delete ends it. Validity comes from the data, not the clock, so a replayed or late batch
    yields the same rows. Deletes are not stored as rows: a closed version with no successor is
    one that a delete closed, and is read back as that delete."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keys, seq = list(cfg.unique_key), cfg.sequence_by
    columns = df.columns
    deleted = F.coalesce(F.expr(cfg.delete_when), F.lit(False)) if cfg.delete_when else F.lit(False)
    events = df.select(*columns, deleted.alias(DELETE_COLUMN), F.lit(1).alias("_medallion_new"))
    if path is not None:
        stored = ctx.engine.read_table(path).join(events.select(*keys).distinct(), keys,
                                                  "left_semi")
        closed, nxt = stored.where(F.col(VALID_TO).isNotNull()).alias("c"), stored.alias("n")
        closed_by_delete = closed.join(
            nxt, [F.col(f"c.{k}") == F.col(f"n.{k}") for k in keys]
            + [F.col(f"c.{VALID_TO}") == F.col(f"n.{VALID_FROM}")], "left_anti")
        types = dict(df.dtypes)
        deletes = closed_by_delete.select(*[
            F.col(c) if c in keys else
            F.col(VALID_TO).alias(c) if c == seq else F.lit(None).cast(types[c]).alias(c)
            for c in columns], F.lit(True).alias(DELETE_COLUMN), F.lit(0).alias("_medallion_new"))
        versions = stored.select(*columns, F.lit(False).alias(DELETE_COLUMN),
                                 F.lit(0).alias("_medallion_new"))
        events = events.unionByName(versions).unionByName(deletes)
    # one event per key and sequence value: a new row replaces a stored one with the same value
    same = Window.partitionBy(*keys, seq).orderBy(F.col("_medallion_new").desc())
    events = events.withColumn("_medallion_rank", F.row_number().over(same)).where(
        "_medallion_rank = 1")
    timeline = Window.partitionBy(*keys).orderBy(seq)
    following = F.lead(seq).over(timeline)
    return (events.withColumn(VALID_TO, following)
            .where(~F.col(DELETE_COLUMN))
            .select(*columns, F.col(seq).alias(VALID_FROM), VALID_TO,
                    F.col(VALID_TO).isNull().alias(IS_CURRENT)))


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


def read_seed(ctx: BuildContext, node: CompiledNode):
    """A seed CSV as a DataFrame, with the column types its config gives."""
    from pyspark.sql import functions as F

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
