"""What each command does, as plain functions: load, select, then compile, list or build.

cli.py parses arguments and prints; everything it runs is here.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable

import yaml

from .errors import MedallionError
from .graph import Graph, build_graph, select
from .materializations import BuildContext
from .project import Project, load_project
from .rendering import CompiledNode, render_project
from .results import write_compiled, write_run_results
from .runner import NodeResult, execute
from .sqlcheck import check_model_sql


@dataclass(frozen=True)
class Invocation:
    project_dir: str = "."
    profiles_dir: str | None = None
    target: str | None = None
    select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    full_refresh: bool = False
    vars: dict = field(default_factory=dict)
    threads: int | None = None


def parse_vars(text: str | None) -> dict:
    if not text:
        return {}
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise MedallionError(f"--vars is not YAML or JSON: {exc}",
                             hint="""e.g. --vars '{start_date: "2024-01-01"}'""") from exc
    if not isinstance(value, dict):
        raise MedallionError("--vars must be a mapping", hint="e.g. --vars '{key: value}'")
    return value


def load(inv: Invocation) -> tuple[Project, Graph]:
    project = load_project(inv.project_dir, inv.profiles_dir, inv.target, inv.vars)
    compiled = render_project(project, inv.full_refresh)
    graph = build_graph(compiled)
    for node in graph.nodes.values():
        if node.sql is not None:
            check_model_sql(node, graph.nodes)
    return project, graph


def selected_nodes(inv: Invocation, graph: Graph, kinds=("seed", "model")) -> list[str]:
    return [n for n in select(graph, inv.select, inv.exclude) if graph.nodes[n].file.kind in kinds]


def compile_models(inv: Invocation) -> list[CompiledNode]:
    project, graph = load(inv)
    nodes = [graph.nodes[n] for n in selected_nodes(inv, graph, ("model",))]
    write_compiled(project, nodes)
    return nodes


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


def list_nodes(inv: Invocation) -> list[Listing]:
    project, graph = load(inv)
    rows = []
    for name in selected_nodes(inv, graph):
        node = graph.nodes[name]
        deps = node.refs + tuple(f"source:{s}.{t}" for s, t in node.sources)
        materialized = node.config.materialized
        table = None if materialized == "view" else str(project.table_path(node.file))
        checkpoint = (str(project.checkpoint_path(node.file)) if materialized == "streaming"
                      else None)
        rows.append(Listing(name, node.file.kind, node.file.layer, materialized, deps,
                            node.file.rel_path, table, checkpoint))
    return rows


def build(inv: Invocation, command: str, kinds=("seed", "model"),
          on_start: Callable[[int, str], None] = lambda total, target: None,
          on_result: Callable[[NodeResult], None] = lambda r: None,
          watching: Callable | None = None) -> list[NodeResult]:
    """Build the selected nodes once; with `watching` (a callback for streaming batches), then
    keep them running and fresh until SIGINT/SIGTERM (see watch.py)."""
    started = time.time()
    project, graph = load(inv)
    chosen = selected_nodes(inv, graph, kinds)
    write_compiled(project, [graph.nodes[n] for n in chosen])
    on_start(len(chosen), project.target.name)
    if not chosen:
        return []
    from .engines import make_engine

    # The session lives as long as the process: one JVM start per invocation (and per test run).
    ctx = BuildContext(project, graph, make_engine(project.target), inv.full_refresh)
    results = execute(ctx, chosen, inv.threads or project.target.threads, on_result)
    write_run_results(project, command, results, started)
    if watching is not None:
        from .watch import stop_on_signals, watch

        stop = threading.Event()
        quiet = replace(inv, full_refresh=False)
        with stop_on_signals(stop):
            watch(ctx, chosen, results, lambda: load(quiet)[1], on_result, watching, stop)
    return results
