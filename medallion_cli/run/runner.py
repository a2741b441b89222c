"""Running one node (a model, a seed, a data test, a hook) into its result; the order they
run in is scheduler.py's.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from ..core.error_text import error_message
from ..core.errors import RunStopped
from ..load.datatests import DataTest, run_test
from ..materialize.clustering import check_clustering, cluster_table
from ..materialize.compaction import compact_if_due
from ..materialize.context import BuildContext, Phases
from ..materialize.empty import check_on_no_rows
from ..materialize.execute import rendered_to_run
from ..materialize.hooks import run_hooks
from ..materialize.register import check_name, register
from ..materialize.rows import with_views
from ..materialize.sources.inputs import register_relations
from ..materialize.state import inputs_fingerprint, record_test, verdict_on
from ..materialize.strategies import build
from .table_test_passes import TestPasses


@dataclass(frozen=True)
class NodeResult:
    name: str
    kind: str
    materialized: str
    status: str  # success | up_to_date | warn | error | skipped
    seconds: float = 0.0
    rows: int | None = None  # rows written; for a test, failing rows
    rows_read: int | None = None  # input rows, where known (Delta inputs)
    files_added: int | None = None
    version: int | None = None
    message: str = ""
    expectations: dict[str, int] = field(default_factory=dict)  # rule -> rows that failed it
    on_violation: dict[str, str] = field(default_factory=dict)  # rule -> warn | drop | fail
    quarantine: str | None = None  # where rows of its `drop` rules went
    rows_checked: int | None = None  # rows the expectations were evaluated on
    stream: dict[str, Any] = field(default_factory=dict)  # streaming: rows/s, batch s, Kafka lag
    malformed: int | None = None
    rescued: int | None = None
    phases: dict[str, float] = field(default_factory=dict)  # step -> seconds (context.py Phases)
    detail: str = ""  # the traceback, for --debug
    recalled: bool = False  # a test's verdict reached earlier on the same inputs, not run again

    @property
    def failed(self) -> bool:
        return self.status == "error"


class HeldBack(Exception):
    """A node's gate closed: a data test on its inputs failed while it computed, so it commits
    nothing (the message says which, as for a node skipped before it started)."""


def timed(name: str, kind: str, materialized: str, work: Callable[[], NodeResult],
          origin: str | None = None, fence: Callable[[], None] = lambda: None) -> NodeResult:
    """Run `work`, timing it; an exception becomes an error result instead of stopping the run,
    but for those that stop it (Spark failing to start, the warehouse's lease lost). origin:
    the node's file, named by an error that does not name one (Spark's). A node held back at
    its gate is skipped. fence: the engine's (OnDemandSpark.fence), asked when `work` failed:
    a failure met after the lease was lost (a streaming checkpoint another build wrote) is
    that loss's."""
    start = time.perf_counter()
    try:
        result = work()
    except RunStopped:
        raise
    except HeldBack as held:
        return NodeResult(name, kind, materialized, "skipped", time.perf_counter() - start,
                          message=str(held))
    except Exception as exc:
        fence()
        message = error_message(exc)
        if origin and not getattr(exc, "path", None) and origin not in message:
            message = f"{origin}: {message}"
        return NodeResult(name, kind, materialized, "error", time.perf_counter() - start,
                          message=message, detail=traceback.format_exc())
    return replace(result, seconds=time.perf_counter() - start)


def own_session(ctx: BuildContext, gate: Callable[[], None] | None = None) -> BuildContext:
    """The context with a Spark session of its own (one SparkContext for all), made when the
    node first uses Spark, timing its own phases. gate: called before the node's commits."""
    return replace(ctx, engine=ctx.engine.for_node(gate), phases=Phases())


def run_node(ctx: BuildContext, name: str, gate: Callable[[], None] | None = None) -> NodeResult:
    """Build a model or seed. gate (scheduler.py): the node started beside data tests on its
    inputs; each commit, and its result, waits for their verdict (HeldBack when one failed)."""
    node = ctx.graph.nodes[name]

    def work() -> NodeResult:
        node_ctx = own_session(ctx, gate)
        node = rendered_to_run(node_ctx, ctx.graph.nodes[name])
        origin = node.file.rel_path
        run_hooks(node_ctx, node.config.pre_hook, "pre_hook", origin, node,
                  after=" (nothing was written)")
        registered = check_name(node_ctx, node)
        check_clustering(node_ctx.engine, node.config.cluster_by, origin)
        outcome = build(node_ctx, node)
        if gate:  # a build that committed nothing has its verdict too
            gate()
        notes = (cluster_table(node_ctx, node), compact_if_due(node_ctx, node),
                 register(node_ctx, node, registered))
        write = outcome.write
        run_hooks(node_ctx, node.config.post_hook, "post_hook", origin, node,
                  after=f" after the table was written (version {write.version})"
                  if write and write.version is not None else "")
        return NodeResult(name, node.file.kind, node.config.materialized, outcome.status,
                          rows=write.rows if write else None, rows_read=outcome.rows_read,
                          files_added=write.files_added if write else None,
                          version=write.version if write else None,
                          message="; ".join(m for m in (outcome.message, *notes) if m),
                          expectations=outcome.expectations,
                          on_violation={rule: r["on_violation"] for rule, r in
                                        node.config.expectations.items()},
                          quarantine=node_ctx.project.quarantine_path(node.file),
                          rows_checked=outcome.rows_checked, stream=outcome.stream,
                          malformed=outcome.malformed, rescued=outcome.rescued,
                          phases=node_ctx.phases.rounded())

    return timed(name, node.file.kind, node.config.materialized, work, node.file.rel_path,
                 ctx.engine.fence)


def run_project_hooks(ctx: BuildContext, which: str, statements: tuple[str, ...],
                      on_result: Callable[[NodeResult], None]) -> list[NodeResult]:
    """on-run-start or on-run-end: each statement a result of kind `hook`; once one fails,
    the rest are skipped."""
    results: list[NodeResult] = []
    for number, statement in enumerate(statements, 1):
        name = f"{which} {number}"

        def work(statement: str = statement, name: str = name) -> NodeResult:
            run_hooks(own_session(ctx), (statement,), which, "medallion_project.yml",
                      first=number)
            return NodeResult(name, "hook", "", "success")

        if results and results[-1].status in ("error", "skipped"):
            result = NodeResult(name, "hook", "", "skipped", message=f"after {which} "
                                f"{number - 1} failed")
        else:
            result = timed(name, "hook", "", work)
        on_result(result)
        results.append(result)
    return results


def check_node(ctx: BuildContext, name: str, schemas: dict[str, Any]) -> NodeResult:
    """--empty: the node checked over inputs with no rows (materialize/empty.py), nothing written."""
    node = ctx.graph.nodes[name]

    def work() -> NodeResult:
        outcome = check_on_no_rows(own_session(ctx), node, schemas)
        return NodeResult(name, node.file.kind, node.config.materialized, outcome.status,
                          message=outcome.message)

    return timed(name, node.file.kind, node.config.materialized, work, node.file.rel_path)


def run_data_test(ctx: BuildContext, test: DataTest, skip_passed: bool = False,
                  passes: TestPasses | None = None) -> NodeResult:
    """Run a data test. With skip_passed (a build), one that passed or warned on its inputs as
    they are now is not run: its SQL, thresholds and every table it reads are unchanged, so it
    would reach the same verdict. A pass is reported up to date, a warning again as recorded.
    passes: the run's tests counted together, a pass per table."""
    def work() -> NodeResult:
        test_ctx = own_session(ctx)
        with test_ctx.phases.timing("fingerprint"):
            state = inputs_fingerprint(test_ctx, test.sql, test.refs, test.sources,
                                       [test.severity, test.error_if, test.warn_if])
            known = verdict_on(test_ctx, test.name, state) if skip_passed else None
        if known:
            again = "on its inputs as they are; --rerun-tests runs it again"
            if known["status"] == "success":
                return NodeResult(test.name, "test", "test", "up_to_date",
                                  message=f"passed at {known['at']} {again}")
            return NodeResult(test.name, "test", "test", "warn", rows=known["failures"],
                              message=f"warned at {known['at']} {again}\n{known['message']}",
                              recalled=True)
        with test_ctx.phases.timing("query"):
            register_relations(test_ctx, test.refs, test.sources,
                               given=with_views(test_ctx, test.refs))
            spark = test_ctx.engine.spark
            run = run_test(spark, test, counted=passes.failures(spark, test) if passes else None)
        kept = ""
        if test.store_failures:  # replaced each run, so it holds this run's failures only
            with test_ctx.phases.timing("store_failures"):
                where = test_ctx.project.test_failures_path(test.name)
                assert run.rows is not None  # such a test runs alone, its rows never counted
                test_ctx.engine.write(run.rows, where, "overwrite")
                kept = f"; kept in {where}"
        word = {"success": "passed", "warn": "warned", "error": "failed"}[run.status]
        message = (f"{word}: {run.failures} failing row(s) ({test.origin}, {test.key}){kept}\n"
                   f"{run.sample}" if run.failures else "").rstrip()
        record_test(test_ctx, test.name, state, run.status, run.failures, message)
        return NodeResult(test.name, "test", "test", run.status, rows=run.failures,
                          message=message, phases=test_ctx.phases.rounded())

    return timed(test.name, "test", "test", work, test.origin)
