"""The suite's tiers (docs/testing.md) and the order the workers take the tests in.

A test is in the default tier (the README's test command) unless it is marked `slow`; the slow
tier runs only when `-m` names it. `one_engine("why")` marks a behaviour that does not depend on
the engine: its embedded case is the default tier's, its delta-spark case the slow tier's.
`slow_case("why", name=value, ...)` sends the cases whose parameters have those values (the
fixtures' too, e.g. engine_name and store) to the slow tier.

The workers take groups of tests (a file, or a test alone in a file of SPLIT_ACROSS_WORKERS)
longest first, by each test's seconds in tests/durations.json: a long group started last would
leave the other worker idle at the end. (pytest-xdist's own --dist loadgroup cannot do this
with pytest 9: its group marks rename nodeids, which pytest 9 no longer lets it do.)
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

ONE_ENGINE_SLOW = "delta-spark"
# In a file marked so, the delta-spark cases are the slow tier's: the file checks behaviours
# whose engine-specific paths (reads, writes, MERGE, streams exactly once, admin) the engine
# contract runs on both engines in the default tier (test_engine_contract.py,
# test_merge_semantics.py, test_streaming.py, test_cross_engine.py, test_cdc*.py)
DELTA_SPARK_IN_SLOW_TIER = pytest.mark.slow_case(
    "a repeat on delta-spark of what the engine contract covers in the default tier",
    engine_name="delta-spark")
# Each test's seconds (setup, call and teardown) in the last full run, refreshed with
# `pytest -m "slow or not slow" --store-durations`; a test not in it yet counts as
# DEFAULT_SECONDS.
DURATIONS = Path(__file__).with_name("durations.json")
# Files whose tests share nothing but session fixtures (each test builds projects, buckets or
# servers of its own): their tests go to the workers one by one. Every other file stays on one
# worker, so that its module's fixtures (a cluster, a built sample) start once.
SPLIT_ACROSS_WORKERS = ("test_s3.py", "test_streaming.py", "test_connect_builds.py",
                        "test_watch.py", "test_template.py", "test_s3_lease.py")
DEFAULT_SECONDS = 5.0
SECONDS: dict[str, float] = {}  # this run's, as the controller hears of them


def pytest_addoption(parser):
    parser.addoption("--store-durations", action="store_true",
                     help="write each test's seconds to tests/durations.json at the end")


def tier_marks(item) -> None:
    """The slow mark on the cases that one_engine and slow_case name."""
    params = getattr(item, "callspec", None)
    for mark in item.iter_markers():
        if mark.name not in ("one_engine", "slow_case"):
            continue
        if not mark.args:
            raise pytest.UsageError(f"{item.nodeid}: {mark.name} needs its reason, e.g. "
                                    f"@pytest.mark.{mark.name}(\"the same on both engines\")")
        case = {"engine_name": ONE_ENGINE_SLOW} if mark.name == "one_engine" else mark.kwargs
        if params is not None and all(params.params.get(k) == v for k, v in case.items()):
            item.add_marker(pytest.mark.slow(mark.args[0]))


def asks_for_slow(config) -> bool:
    """The slow tier runs only when the -m expression names it: `-m slow` alone, or
    `-m "slow or not slow"` for every tier (`-m unit` is the default tier's unit tests)."""
    return re.search(r"\bslow\b", config.getoption("markexpr") or "") is not None


def worker_group(nodeid: str) -> str:
    """What one worker runs together: a test's file, or the test alone (SPLIT_ACROSS_WORKERS)."""
    path = nodeid.split("::", 1)[0]
    return nodeid if path.rsplit("/", 1)[-1] in SPLIT_ACROSS_WORKERS else path


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """Groups of worker_group to the workers, in the order the items come (longest first)."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    return GroupScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto` for the unit tier alone (`-m unit`): a worker more than the cores, as its
    tests mostly wait on clocks (S3 leases that lapse by the store's whole seconds, pollers)
    rather than compute: on 2 cores it took 36.8 s on 2 workers, 29.8 s on 3. Other tiers:
    pytest-xdist's own count (a worker per core: their Spark keeps each one busy)."""
    if (config.getoption("markexpr") or "").strip() == "unit":
        return len(os.sched_getaffinity(0)) + 1
    return None


def stored_seconds() -> dict[str, float]:
    return json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks given here
def pytest_collection_modifyitems(config, items):
    """Tier marks, the slow tier left out unless asked for, then the groups longest first."""
    for item in items:
        tier_marks(item)
    if not asks_for_slow(config):
        slow = [item for item in items if item.get_closest_marker("slow")]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if not item.get_closest_marker("slow")]
    seconds = stored_seconds()
    per_group: dict[str, float] = {}
    for item in items:
        group = worker_group(item.nodeid)
        per_group[group] = per_group.get(group, 0.0) + seconds.get(item.nodeid,
                                                                   DEFAULT_SECONDS)
    items.sort(key=lambda item: -per_group[worker_group(item.nodeid)])  # stable in a group


def pytest_runtest_logreport(report):
    SECONDS[report.nodeid] = SECONDS.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session):
    """With --store-durations, the controller (not an xdist worker) merges this run's seconds
    into durations.json: tests that did not run keep theirs."""
    config = session.config
    if not config.getoption("store_durations") or hasattr(config, "workerinput"):
        return
    merged = {**stored_seconds(), **{nodeid: round(value, 2) for nodeid, value
                                     in SECONDS.items()}}
    DURATIONS.write_text(json.dumps(dict(sorted(merged.items())), indent=0) + "\n")
