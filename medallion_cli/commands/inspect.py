"""Commands that look without building: compile, ls, docs, status and source freshness; none
starts Spark but source freshness with a loaded_at_field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..core.locations import is_remote
from ..core.nodes import CompiledNode
from ..core.project import Project, SourceTable
from ..dag.selection import select_sources
from ..engines.base import Engine
from ..materialize.context import BuildContext
from ..report.artifacts import (
    write_compiled,
    write_sources,
)
from ..report.static_checks import Checked, check_models
from .invocation import Invocation, Loaded, engine_of, load, selected_nodes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from ..report.freshness import SourceFreshness
    from ..report.status import TableStatus


@dataclass(frozen=True)
class Compiled:
    nodes: list[CompiledNode]
    note: str | None  # what compiling without an engine could not know, to tell the user
    sql: dict[str, str]  # name -> SQL naming real relations, as written to target/compiled
    checked: Checked | None = None  # the static checks' findings


def warn_unlanded(loaded: Loaded, names: list[str], warn: Callable[[str], None]) -> None:
    """Say which landing folders the nodes read do not exist, before a build finds out."""
    for key in dict.fromkeys(k for n in names for k in loaded.graph.nodes[n].sources):
        missing = loaded.project.sources[key].unlanded()
        if missing:
            readers = [n for n in names if key in loaded.graph.nodes[n].sources]
            warn(f"{missing.path}: {missing.message}, which {', '.join(readers)} "
                 f"read{'s' * (len(readers) == 1)}: {missing.hint}")


def compile_models(inv: Invocation, warn: Callable[[str], None] = lambda message: None
                   ) -> Compiled:
    loaded = load(inv)
    nodes = [loaded.graph.nodes[n] for n in selected_nodes(inv, loaded, ("model",))]
    warn_unlanded(loaded, [n.name for n in nodes], warn)
    sql = write_compiled(loaded.project, loaded.graph.nodes, nodes)
    # Each input's columns as its SQL, source or seed declares them (no table is read: compile
    # starts no JVM and reads no Delta log)
    checked = check_models(loaded.project, loaded.graph, [n.name for n in nodes],
                           lambda path: None)
    return Compiled(nodes, offline_note(loaded.project, nodes), sql, checked)


def offline_note(project: Project, nodes: list[CompiledNode]) -> str | None:
    """compile reads no remote warehouse, so is_incremental() is false in what it shows for
    incremental and streaming models; say so rather than show SQL a build would not run."""
    warehouse = project.target.warehouse
    if not is_remote(warehouse) or not any(
            n.config.materialized in ("incremental", "streaming") for n in nodes):
        return None
    return (f"is_incremental() is false in this SQL: the warehouse {warehouse} is not read "
            "offline; medallion build renders it against the tables")


@dataclass(frozen=True)
class Listing:
    name: str
    kind: str
    layer: str
    materialized: str
    depends_on: tuple[str, ...]
    path: str
    table: str | None
    checkpoint: str | None
    flows_into: str | None = None  # a flow: the model whose table it appends to


def list_nodes(inv: Invocation, warn: Callable[[str], None] = lambda message: None
               ) -> list[Listing]:
    loaded = load(inv)
    project, graph = loaded.project, loaded.graph
    rows: list[Listing] = []
    names = selected_nodes(inv, loaded)
    warn_unlanded(loaded, names, warn)
    # as compile checks them (no table read), each said in a line
    for finding in check_models(project, graph, names, lambda path: None).findings:
        warn(str(finding).splitlines()[0] + " (medallion compile lists every finding)")
    for name in names:
        node = graph.nodes[name]
        deps = node.refs + tuple(f"source:{s}.{t}" for s, t in node.sources)
        materialized = node.config.materialized
        table = None if materialized == "view" else project.table_path(node.file)
        checkpoint = (project.checkpoint_path(node.file) if materialized == "streaming"
                      else None)
        rows.append(Listing(name, node.file.kind, node.file.layer, materialized, deps,
                            node.file.rel_path, table, checkpoint, node.config.flow_into))
    return rows


def source_freshness(inv: Invocation) -> list[SourceFreshness]:
    """The selected sources' freshness (freshness.py), also written to target/sources.json.
    Spark starts only for a source whose loaded_at_field must be read."""
    from ..materialize.sources.inputs import read_source
    from ..report.eventlog import now
    from ..report.freshness import source_freshness as check

    loaded = load(inv)
    engines: list[Engine] = []

    def read(source: SourceTable) -> DataFrame:
        if not engines:
            engines.append(engine_of(loaded.project, inv))
        return read_source(BuildContext(loaded.project, loaded.graph, engines[0]), source)

    checked = check(select_sources(loaded.project.sources, inv.select), read, now())
    write_sources(loaded.project, checked)
    return checked


def status(inv: Invocation) -> list[TableStatus]:
    """The selected tables' status (status.py), read from the warehouse without Spark."""
    from ..report.status import table_status

    loaded = load(inv)
    return table_status(loaded.project, loaded.graph,
                        selected_nodes(inv, loaded))


def docs(inv: Invocation, out: str | None = None) -> Path:
    """Write the static documentation page; returns its path. Built tables' columns come from
    the engine (the embedded one reads the Delta log: no JVM)."""
    from ..report.docs import write_docs

    loaded = load(inv)
    return write_docs(loaded.project, loaded.graph, loaded.tests,
                      engine_of(loaded.project, inv).table_columns, Path(out) if out else None)
