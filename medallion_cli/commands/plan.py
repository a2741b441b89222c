"""How a run is planned: the order of nodes and their data tests (each test right after what it
reads, what reads its table after it), who runs each, the build context, the tables --defer
reads from another warehouse, and how a task reports as it goes (Reporter).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Collection

from ..core.errors import MedallionError
from ..dag.graph import Graph
from ..engines.base import Engine
from ..load.datatests import DataTest
from ..materialize.context import BuildContext
from ..run.runner import (
    NodeResult,
    run_data_test,
    run_node,
)
from ..run.table_test_passes import TestPasses
from .invocation import Invocation, Loaded, engine_of

if TYPE_CHECKING:
    from ..materialize.streaming.tally import BatchReport


@dataclass(frozen=True)
class Reporter:
    """How a task reports progress as it goes; the CLI prints, tests may collect."""

    start: Callable[[int, str], None] = lambda total, target: None
    begin: Callable[[str], None] = lambda name: None
    result: Callable[[NodeResult], None] = lambda result: None
    batch: Callable[[BatchReport], None] = lambda report: None  # a streaming batch (--watch)
    phase: Callable[[str | None], None] = lambda what: None  # "starting Spark"; None: done
    warn: Callable[[str], None] = lambda message: None  # a problem that fails nothing


@dataclass(frozen=True)
class Plan:
    """What to run and in which order: node names, each one's parents, and display labels."""

    order: list[str]
    parents: dict[str, set[str]]
    labels: dict[str, tuple[str, str]]
    gates: dict[str, set[str]]  # node -> the tests among its parents it computes beside


# What computes all it writes before its first commit, and runs nothing before (a pre_hook).
GATED_MATERIALIZATIONS = ("table", "incremental")


def plan(graph: Graph, tests: dict[str, DataTest], nodes: list[str], test_names: list[str],
         stages_writes: bool = False) -> Plan:
    """Nodes in DAG order with each test right after the last node it reads. A node also waits
    for the tests on its parents (when everything those tests read is upstream of it), so an
    error-severity test failure skips what is built on the data it found wrong. stages_writes
    (the engine's capability): a table or incremental model without a pre_hook computes
    beside those tests instead, its commit held for their verdict (run/scheduler.py)."""
    position = {n: i for i, n in enumerate(nodes)}
    parents = {n: set(graph.parents(n)) for n in nodes}
    gates: dict[str, set[str]] = {}
    placed: dict[int, list[str]] = {}
    upstream: dict[str, set[str]] = {}  # ancestors, walked once per node that needs them
    for t in test_names:
        refs = set(tests[t].refs)
        parents[t] = refs
        placed.setdefault(max((position[r] for r in refs if r in position), default=-1),
                          []).append(t)
        readers = {n for n in nodes if set(graph.nodes[n].sources) & set(tests[t].sources)}
        for child in readers | {c for r in refs for c in graph.children.get(r, ())
                                if c in position}:
            if child not in upstream:
                upstream[child] = graph.ancestors(child)
            if refs <= upstream[child]:
                parents[child].add(t)
                config = graph.nodes[child].config
                if stages_writes and config.materialized in GATED_MATERIALIZATIONS \
                        and not config.pre_hook:
                    gates.setdefault(child, set()).add(t)
    order = placed.get(-1, [])
    for i, n in enumerate(nodes):
        order += [n] + placed.get(i, [])
    labels = {n: (graph.nodes[n].file.kind, graph.nodes[n].config.materialized) for n in nodes}
    labels.update({t: ("test", "test") for t in test_names})
    return Plan(order, parents, labels, gates)


def runner(ctx: BuildContext, tests: dict[str, DataTest], skip_passed: bool = False,
           refused: dict[str, str] | None = None) -> Callable[..., NodeResult]:
    """name, and a model's gate where it has one (scheduler.py) -> its result. refused: the
    models the static checks fail before Spark starts (report/static_checks.refusals)."""
    passes = TestPasses(tests)  # the tests on one table counted in one pass
    return refusing(lambda name, gate=None: (
        run_data_test(ctx, tests[name], skip_passed, passes) if name in tests
        else run_node(ctx, name, gate)), ctx.graph, refused or {})


def refusing(run_one: Callable[..., NodeResult], graph: Graph,
             refused: dict[str, str]) -> Callable[..., NodeResult]:
    """run_one, but a model the static checks refused fails at once, its table as it was."""
    def run(name: str, *args: Any) -> NodeResult:
        if name in refused:
            node = graph.nodes[name]
            return NodeResult(name, node.file.kind, node.config.materialized, "error",
                              message=refused[name])
        return run_one(name, *args)
    return run


def _context(loaded: Loaded, inv: Invocation, selected: Collection[str] = (),
             report: Reporter = Reporter(), long_queries: bool = False) -> BuildContext:
    """The build context. Its engine starts Spark when a node first needs it (a build of nodes
    that are all up to date starts none); a start that fails (no JARs, no master) stops the
    run as one usage error (errors.StartError). long_queries: the nodes will read much new
    data (new_input.py)."""
    # The session lives as long as the process: one JVM start per invocation (and per test run).
    engine = loaded.engine or engine_of(loaded.project, inv)
    engine.plan_start(lambda starting: report.phase("starting Spark" if starting else None),
                      long_queries)
    return BuildContext(loaded.project, loaded.graph, engine, inv.full_refresh,
                        frozenset(selected),
                        deferred=deferred_tables(inv, loaded, engine, selected),
                        event_range=inv.event_range, flow_reset=inv.flow_reset)


def deferred_tables(inv: Invocation, loaded: Loaded, engine: Engine,
                    selected: Collection[str]) -> dict[str, str]:
    """--defer: name -> the --state run's table, for each model or seed the selected nodes read
    (through others too) that is not selected and has no table in this target, as dbt's
    --defer reads production's relations in a development run."""
    if not inv.defer:
        return {}
    if loaded.previous is None:
        raise MedallionError("--defer reads tables of the --state run: pass --state DIR too",
                             hint="e.g. --defer --state prod-target/ (a copy of a deployed "
                                  "run's target/ folder)")
    graph, chosen, read = loaded.graph, set(selected), set()
    for name in chosen:  # models and seeds, or data tests (`medallion test --defer`)
        parents = graph.ancestors(name) if name in graph.nodes else set(loaded.tests[name].refs)
        read |= parents.union(*(graph.ancestors(p) for p in parents))
    read -= chosen
    return {name: loaded.previous[name]["table"] for name in sorted(read)
            if (loaded.previous.get(name) or {}).get("table")
            and not engine.table_exists(loaded.project.table_path(graph.nodes[name].file))}
