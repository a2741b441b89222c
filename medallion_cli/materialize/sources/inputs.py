"""A node's inputs: the relations its SQL names (refs, sources, `this`), registered as temp views
of the node's session under the names rendering gave them.

For a streaming model, sources and refs to streaming models are read as streams; other refs
(seeds, tables) are read as they are when the query starts, like dimension tables. On an engine
that follows Delta tables through their commit logs (engines/embedded/delta_log.py), streamed
tables are followed as streams of commits instead, and each micro-batch reads what its commits
added.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import TYPE_CHECKING

from ...core.errors import SourceError
from ...core.locations import join
from ...core.nodes import CompiledNode, changes_relation
from ...core.project import SourceTable
from ...dag.graph import Graph
from ..context import BuildContext, input_table
from .kafka import read_kafka
from .landing import inferred_schema, read_landing

if TYPE_CHECKING:
    from collections.abc import Iterable

    from pyspark.sql import DataFrame

# A micro-batch input with at most this many rows is computed as one partition: Spark then
# knows that every key is in it and needs no shuffle for the model's windows, grouping and
# MERGE (a 1-row silver batch under --watch: 3 Spark jobs instead of 5, 0.6 s instead of 1 s).
# Joins with larger inputs are shuffled as before.
ONE_PARTITION_ROWS = 10_000


def read_source(ctx: BuildContext, source: SourceTable, streaming: bool = False) -> DataFrame:
    """A declared source as a DataFrame: a Delta table, or landing files read with their schema.

    File sources carry `_source_file`, the file each row came from (Spark's hidden `_metadata`
    column does not survive a temp view, so it is made a plain column), and keep what does not
    fit the schema (see landing.py)."""
    if source.format == "kafka":
        return read_kafka(ctx.engine.spark, source, streaming)
    if source.format == "delta":
        return stream_of(ctx, source.path) if streaming else ctx.engine.read_table(source.path)
    unlanded = source.unlanded()
    if unlanded:
        raise unlanded
    if streaming and not source.schema and source.format in ("json", "csv"):
        source = replace(source, schema=inferred_schema(
            ctx.engine.spark, source, ctx.project.inferred_schema_path(source)))
    return read_landing(ctx.engine.spark, source, streaming)


def stream_of(ctx: BuildContext, table: str, changes: bool = False) -> DataFrame:
    """A Delta table (or its change feed) streamed by the model's query: from where a reset said
    (flow_reset.py), its schema kept in the query's checkpoint, so that a column renamed,
    dropped or widened in place stops the query once, to be started again with the table's new
    columns (Delta's schema tracking; the driver starts it again), rather than for good."""
    log = None if ctx.schema_logs is None else join(ctx.schema_logs, hashlib.sha256(
        f"{table}|{changes}".encode()).hexdigest()[:16])
    return ctx.engine.read_stream(table, changes=changes,
                                  from_version=ctx.stream_starts.get(table), schema_log=log)


def built_table(ctx: BuildContext, node: CompiledNode) -> str:
    path = input_table(ctx, node.name)
    if not ctx.engine.table_exists(path):
        raise SourceError(f"'{node.name}' has not been built yet (no Delta table at {path})",
                          path=node.file.rel_path,
                          hint=f"build it first: medallion build -s +{node.name}, or read "
                               "a deployed run's with --defer --state DIR")
    return path


def feed_table(ctx: BuildContext, node: CompiledNode, name: str) -> str:
    """The table whose change feed `node` reads as ref(name, changes=true)."""
    parent = ctx.graph.nodes[name]
    if parent.config.materialized == "view":
        raise SourceError(f"ref('{name}', changes=true): '{name}' is a view, which has no "
                          "change feed", path=node.file.rel_path,
                          hint=f"read it without changes=true, or make '{name}' a table")
    if node.config.materialized != "streaming":
        raise SourceError(f"ref('{name}', changes=true) is read by streaming models only",
                          path=node.file.rel_path,
                          hint="set materialized='streaming' to process each change once")
    return built_table(ctx, parent)


def register_relations(ctx: BuildContext, refs: Iterable[str],
                       sources: Iterable[tuple[str, str]], streaming: bool = False,
                       given: dict[str, DataFrame] | None = None,
                       node: CompiledNode | None = None) -> None:
    """Temp views for refs and sources, named as rendering names them; the relations in `given`
    (relation -> DataFrame) are registered as those DataFrames and not read otherwise (a view's
    rows, a micro-batch's new rows). node: the model whose change feeds are read too."""
    given = given or {}
    if node is not None:
        for name in node.change_refs:
            if changes_relation(name) not in given:
                table = feed_table(ctx, node, name)
                stream_of(ctx, table, changes=True).createOrReplaceTempView(
                    changes_relation(name))
    for name in refs:
        if name in given:
            continue
        parent = ctx.graph.nodes[name]
        table = built_table(ctx, parent)
        if streaming and parent.config.materialized == "streaming":
            stream_of(ctx, table).createOrReplaceTempView(name)
        else:
            ctx.engine.read_table(table).createOrReplaceTempView(name)
    for key in sources:
        source = ctx.project.sources[key]
        if source.relation not in given:
            read_source(ctx, source, streaming).createOrReplaceTempView(source.relation)
    for relation, df in given.items():
        df.createOrReplaceTempView(relation)


def register_inputs(ctx: BuildContext, node: CompiledNode, streaming: bool = False,
                    given: dict[str, DataFrame] | None = None) -> None:
    """Every relation the node's SQL names: its refs and sources, and `this` (its own table)."""
    register_relations(ctx, node.refs, node.sources, streaming, given, node)
    path = ctx.project.table_path(node.file)
    if node.is_incremental and ctx.engine.table_exists(path):
        ctx.engine.read_table(path).createOrReplaceTempView(node.name)


def streamed_refs(graph: Graph, node: CompiledNode) -> list[str]:
    """The streaming models a streaming model streams from as themselves (not only as their
    change feed)."""
    return [name for name in node.refs if graph.nodes[name].config.materialized == "streaming"
            and name not in node.feed_only]


def streamed_tables(ctx: BuildContext, node: CompiledNode) -> dict[str, str]:
    """Relation -> Delta table, for the inputs a streaming model streams from Delta tables
    (refs to streaming models, Delta sources)."""
    tables = {name: built_table(ctx, ctx.graph.nodes[name])
              for name in streamed_refs(ctx.graph, node)}
    tables.update({changes_relation(name): feed_table(ctx, node, name)
                   for name in node.change_refs})
    sources = [ctx.project.sources[key] for key in node.sources]
    tables.update({s.relation: s.path for s in sources if s.format == "delta"})
    files = [f"{s.source}.{s.name}" for s in sources if s.format != "delta"]
    if tables and files and not ctx.engine.capabilities.delta_streaming_source:
        raise SourceError(
            f"this streaming model reads landing files ({', '.join(files)}) and streaming "
            f"tables ({', '.join(tables)}) together, which the {ctx.engine.name} engine cannot "
            "stream in one query", path=node.file.rel_path,
            hint="ingest the files in a bronze model of their own and ref() it here")
    return tables


def commit_streams(ctx: BuildContext, tables: dict[str, str]) -> DataFrame:
    """One stream of (relation, version) over the commits of every followed table."""
    from ...spark.pyspark_api import F

    streams = [ctx.engine.commit_stream(path, ctx.stream_starts.get(path)).withColumn(
               "relation", F.lit(relation))
               for relation, path in tables.items()]
    union = streams[0]
    for stream in streams[1:]:
        union = union.unionByName(stream)
    return union


def committed_inputs(ctx: BuildContext, node: CompiledNode, tables: dict[str, str],
                     batch: DataFrame, batch_id: int) -> tuple[dict[str, DataFrame], int]:
    """(relation -> the rows a micro-batch of commits stands for, rows read). The query's first
    batch reads each table as of the newest commit it took (unless a reset started it from a
    version: ctx.stream_starts); later ones what their commits added (or, for a change feed,
    their changes); those of few rows as one partition."""
    feeds = {changes_relation(name) for name in node.change_refs}
    versions: dict[str, list[int]] = {relation: [] for relation in tables}
    for row in batch.collect():  # one small row per commit
        versions[row["relation"]].append(row["version"])
    inputs: dict[str, DataFrame] = {}
    rows_read = 0
    for relation, path in tables.items():
        rows, count = ctx.engine.read_commits(
            path, versions[relation], from_snapshot=batch_id == 0 and path not in
            ctx.stream_starts, changes=relation in feeds)
        inputs[relation] = rows.coalesce(1) if count <= ONE_PARTITION_ROWS else rows
        rows_read += count
    return inputs, rows_read
