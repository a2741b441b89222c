"""`medallion test`: the selected model unit tests, on the rows they give, touching no table,
then the selected data tests on the tables as they are; `test --unit`: the unit tests alone.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..report.artifacts import (
    write_run_results,
)
from ..run.runner import NodeResult, timed
from ..run.scheduler import execute
from ..run.unittests import UnitTest, load_unit_tests, run_unit_test
from ..spark.session import node_sessions_released
from .invocation import Invocation, Loaded, load, selected_nodes, selected_tests
from .plan import Reporter, _context, runner

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ..load.datatests import DataTest


def test(inv: Invocation, report: Reporter = Reporter()) -> list[NodeResult]:
    """Run the selected model unit tests (they touch no table), then the selected data tests
    against the tables as they are: both, as dbt's `test` runs both."""
    started = time.time()
    loaded = load(inv)
    units = _selected_unit_tests(inv, loaded, loaded.tests)
    names = selected_tests(inv, loaded)
    report.start(len(units) + len(names), loaded.project.target.name)
    if not units and not names:
        return []
    from ..report.observers import observed_run

    ctx = _context(loaded, inv, names, report=report)
    results = _run_unit_tests(ctx.engine.spark, loaded, units, report) if units else []
    if not names:
        return results
    with node_sessions_released(ctx.engine), observed_run(
            ctx, "test", len(names), report.begin, report.result, report.batch,
            report.warn) as run:
        results += execute(names, {}, runner(run.ctx, loaded.tests),
                           {n: ("test", "test") for n in names},
                           inv.threads or loaded.project.target.threads, run.result, run.begin,
                           inv.fail_fast, ctx.engine.cancel_jobs)
        write_run_results(loaded.project, "test", results, started, ctx.engine.start_seconds)
    return results


def unit_test(inv: Invocation, report: Reporter = Reporter()) -> list[NodeResult]:
    """Run model unit tests (tests/unit/*.yml) on their given rows; no table is touched (nor
    the event log: they say nothing about the warehouse)."""
    loaded = load(inv)
    units = _selected_unit_tests(inv, loaded)
    report.start(len(units), loaded.project.target.name)
    if not units:
        return []
    return _run_unit_tests(_context(loaded, inv, report=report).engine.spark, loaded, units,
                           report)


def _selected_unit_tests(inv: Invocation, loaded: Loaded,
                         data_tests: dict[str, DataTest] | None = None) -> dict[str, UnitTest]:
    """The unit tests of the selected models, and those selected by name; data_tests: names
    that select no model (a data test's: `test -s its_name` runs it alone)."""
    models = set(selected_nodes(inv, loaded, ("model",), tests=data_tests or {}))
    return {t.name: t for t in load_unit_tests(loaded.project, loaded.graph)
            if t.model in models or t.name in inv.select}


def _run_unit_tests(spark: SparkSession, loaded: Loaded, units: dict[str, UnitTest],
                    report: Reporter) -> list[NodeResult]:
    def run(name: str) -> NodeResult:
        def work() -> NodeResult:
            diff = run_unit_test(spark, loaded.project, loaded.graph, units[name])
            return NodeResult(name, "unit", "unit test", "error" if diff else "success",
                              message=f"{units[name].model} ({units[name].origin}): "
                                      f"{diff}" if diff else "")

        return timed(name, "unit", "unit test", work)

    # Unit tests register temp views by model name: one at a time.
    names = list(units)
    return execute(names, {}, run, {n: ("unit", "unit test") for n in names}, 1, report.result,
                   report.begin)
