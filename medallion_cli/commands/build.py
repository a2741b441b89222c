"""`medallion build`, `run`, `seed` and `retry`: load and select, plan the nodes with their
data tests, take the warehouse's lock, and run them once in DAG order (with --watch, then keep
them fresh: watch.py), recording what happened in target/ and the event log.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..core.errors import MedallionError
from ..dag.graph import check_flow_refresh
from ..materialize.ranges import range_refusal
from ..materialize.streaming.checkpoints import mark_refreshes
from ..materialize.streaming.flow_reset import reset_refusal
from ..report.artifacts import (
    read_run_results,
    write_compiled,
    write_run_results,
)
from ..report.static_checks import refusals
from ..run.locking import warehouse_lock
from ..run.new_input import new_landing_bytes
from ..run.runner import NodeResult, check_node, run_project_hooks
from ..run.scheduler import execute, interrupted
from ..spark.session import node_sessions_released
from .invocation import (
    COMMAND_KINDS,
    Invocation,
    Loaded,
    load,
    selected_nodes,
    selected_tests,
)
from .plan import Reporter, _context, plan, refusing, runner
from .test import test
from .watch import keep_fresh

if TYPE_CHECKING:
    from ..dag.graph import Graph
    from ..engines.base import Engine


def build(inv: Invocation, command: str, kinds: tuple[str, ...] = ("seed", "model"),
          report: Reporter = Reporter(), watch: bool = False) -> list[NodeResult]:
    """Build the selected nodes once (with `build`, each followed by its data tests); with
    `watch`, then keep them running and fresh until SIGINT/SIGTERM (see watch.py). The
    warehouse's lock is held throughout: one writer at a time."""
    loaded = load(inv, with_engine=True)
    engine = loaded.engine
    assert engine is not None  # load(with_engine=True) made one
    with warehouse_lock(loaded.project.target.warehouse, command + (" --watch" if watch else ""),
                        inv.wait_for_lock) as fence:
        engine.fence = fence  # asked before each commit: a lost S3 lease stops the run
        return _build(inv, loaded, engine, command, kinds, report, watch)


def _build(inv: Invocation, loaded: Loaded, engine: Engine, command: str,
           kinds: tuple[str, ...], report: Reporter, watch: bool) -> list[NodeResult]:
    started = time.time()
    graph, tests = loaded.graph, loaded.tests
    chosen = selected_nodes(inv, loaded, kinds)
    if inv.event_range is not None:
        _check_backfill(inv, graph, chosen, watch)
    if inv.flow_reset is not None:
        _check_reset(inv, loaded, chosen, watch)
    if inv.full_refresh:
        check_flow_refresh(graph, chosen)
    test_names = selected_tests(inv, loaded) if command == "build" and not inv.empty else []
    steps = plan(graph, tests, chosen, test_names, engine.capabilities.stages_writes)
    write_compiled(loaded.project, graph.nodes, [graph.nodes[n] for n in chosen])
    project = loaded.project
    refused = refusals(project, graph, chosen)  # before Spark starts
    hooks = 0 if inv.empty else len(project.on_run_start) + len(project.on_run_end)
    report.start(len(steps.order) + hooks * bool(steps.order), project.target.name)
    if not steps.order:
        return []
    # Imported here: the event log brings delta-rs, which ls and compile never load.
    from ..report.observers import observed_run

    # Much new data: long queries, where the JIT's second tier pays for itself (spark/conf.py)
    long_queries = not inv.empty and new_landing_bytes(project, graph, chosen, inv.full_refresh) \
        >= engine.capabilities.long_queries.landing_bytes
    ctx = _context(loaded, inv, chosen, report, long_queries)
    if inv.empty:  # nothing is written, so nothing goes to the event log or run results
        if watch:
            raise MedallionError("--empty writes nothing, so it cannot --watch",
                                 hint="drop one of the two flags")
        schemas: dict[str, Any] = {}
        return execute(steps.order, steps.parents,
                       refusing(lambda name: check_node(ctx, name, schemas), graph, refused),
                       steps.labels, inv.threads or loaded.project.target.threads,
                       report.result, report.begin, inv.fail_fast)
    if inv.full_refresh:
        mark_refreshes(ctx, [graph.nodes[n] for n in chosen])
    with node_sessions_released(ctx.engine), observed_run(
            ctx, command + " --watch" * watch, len(steps.order), report.begin, report.result,
            report.batch, report.warn) as run:
        skip_passed = not (inv.rerun_tests or inv.full_refresh)
        results = run_project_hooks(run.ctx, "on-run-start", project.on_run_start, run.result)
        failed = next((r.name for r in results if r.failed), None)
        # a failed start hook builds nothing: every node is skipped (so `retry` runs them)
        run_one = runner(run.ctx, tests, skip_passed, refused) if not failed else (
            lambda name, gate=None: NodeResult(name, *steps.labels[name], "skipped",
                                               message=f"{failed} failed"))
        results += execute(steps.order, steps.parents, run_one, steps.labels,
                           inv.threads or project.target.threads, run.result, run.begin,
                           inv.fail_fast, ctx.engine.cancel_jobs, gates=steps.gates)
        stopped = interrupted(results)
        if not stopped:
            results += run_project_hooks(run.ctx, "on-run-end", project.on_run_end, run.result)
        write_run_results(loaded.project, command, results, started, ctx.engine.start_seconds,
                          inv.event_range)
        if watch and not stopped:
            results += keep_fresh(inv, run.ctx, chosen, results, command, run.result, run.batch)
    return results


def _check_backfill(inv: Invocation, graph: Graph, chosen: list[str], watch: bool) -> None:
    """--start/--end: refused before Spark starts where a range cannot be replaced."""
    if watch or inv.full_refresh or inv.empty:
        raise MedallionError("--start/--end backfills a range once, writing it: it goes with "
                             "neither --watch, --full-refresh nor --empty",
                             hint="drop one of them")
    for name in chosen:
        refusal = range_refusal(graph.nodes[name])
        if refusal is not None:
            raise refusal


def _check_reset(inv: Invocation, loaded: Loaded, chosen: list[str], watch: bool) -> None:
    """--reset-flow: refused before Spark starts where the point cannot be met."""
    if watch or inv.full_refresh or inv.empty or inv.event_range is not None:
        raise MedallionError("--reset-flow starts the selected flows again once: it goes with "
                             "neither --watch, --full-refresh, --empty nor --start/--end",
                             hint="drop one of them")
    assert inv.flow_reset is not None  # (asked by the caller)
    flows = [loaded.graph.nodes[name] for name in chosen
             if loaded.graph.nodes[name].config.materialized == "streaming"]
    if not flows:
        raise MedallionError("--reset-flow starts streaming models again, and the selection "
                             "has none", hint="select them with -s, e.g. -s silver_orders")
    for node in flows:
        refusal = reset_refusal(loaded.project, loaded.graph, node, inv.flow_reset)
        if refusal is not None:
            raise refusal


def retry(inv: Invocation, report: Reporter = Reporter()) -> list[NodeResult]:
    """Run again what failed or was skipped in the last build, run, seed or test (its
    target/run_results.json), with the same command and backfill range: dbt's retry."""
    loaded = load(inv)
    last = read_run_results(loaded.project)
    where = str(loaded.project.target_dir / "run_results.json")
    if last is None:
        raise MedallionError("nothing to retry: no run results yet", path=where,
                             hint="run medallion build first")
    if last["command"] not in (*COMMAND_KINDS, "test"):
        raise MedallionError(f"cannot retry '{last['command']}'", path=where)
    if last["target"] != loaded.project.target.name:
        raise MedallionError(f"the last run was on target '{last['target']}', not "
                             f"'{loaded.project.target.name}'", path=where,
                             hint=f"medallion retry -t {last['target']}")
    known = {*loaded.graph.nodes, *loaded.tests}
    names = tuple(r["name"] for r in last["results"]
                  if r["status"] in ("error", "skipped") and r["name"] in known)
    if not names:
        report.start(0, loaded.project.target.name)
        return []
    # a backfill is retried as the range it was (a plain build would call its table up to date)
    ranged = last.get("event_range")
    again = replace(inv, select=names, exclude=(), event_range=inv.event_range or (
        (ranged[0], ranged[1]) if ranged else None))
    if last["command"] == "test":
        return test(again, report)
    return build(again, last["command"], COMMAND_KINDS[last["command"]], report)


