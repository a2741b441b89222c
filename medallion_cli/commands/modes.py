"""`medallion plan`: per model, the mode it runs in (a stream and its trigger, a refresh per
group, on new rows or in full, a view), why (its target_lag and the choice dag/lags.py made,
or its config), and the lag it can expect to hold: its inputs' expected lag, plus its wait
(a stream's trigger, a batch's refresh interval) and the median seconds of its work from the
event log: a stream's last timed micro-batches, a batch model's last builds; and for a model
edited since its table was written, what its next build does with the edit (changes.py). No
JVM: the project is rendered, and the event log and tables' logs read with delta-rs.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..core.config import interval_seconds
from ..core.nodes import CompiledNode
from ..dag.graph import Graph
from ..dag.lags import MIN_INTERVAL, choose
from ..materialize.streaming.driver import FOLLOW_INTERVAL, watch_trigger
from ..report.lags import seconds_text
from .changes import change_effect
from .invocation import Invocation, Loaded, load, selected_nodes

LAST_RUNS = 5  # the builds whose median is a model's cost
BATCHES = ("table", "incremental")


@dataclass(frozen=True)
class ModePlan:
    name: str
    layer: str
    materialized: str
    mode: str  # in words
    target_lag: str | None  # as written
    lag_seconds: float | None
    chosen: bool  # the lag chose the mode
    wait_seconds: float | None  # a change's wait before its work starts (None: no schedule)
    why: str
    cost_seconds: float | None  # its work's median (_cost; None: not timed yet)
    expected_seconds: float | None  # behind its sources, once running to its lag
    problem: str  # why it cannot hold its lag ("" when it can, or has none)
    change: str = ""  # what the next build does with an edit since its table was written
    refused: str = ""  # the static checks' finding a build would fail it with

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _wait(graph: Graph, node: CompiledNode, slack: float | None,
          after: list[str]) -> tuple[float | None, str]:
    """Seconds a change may wait before the model's work on it starts, and the mode in words.
    slack: what its lag leaves beyond its inputs' lag and its own work; a batch refresh waits
    half of it (gathering the changes that land meanwhile), a second at least, unless it
    reads batches refreshed to a lag (`after`): then it refreshes right after them, as a
    chain of batches would otherwise halve its slack at each step."""
    config = node.config
    if config.materialized == "view":
        return 0.0, "view (computed when read)"
    if config.materialized == "streaming":
        trigger = watch_trigger(graph, node)
        seconds = interval_seconds(trigger)
        assert seconds is not None  # model_config.py accepts only intervals
        every = ("as its input commits" if trigger == FOLLOW_INTERVAL
                 else f"a micro-batch every {seconds_text(seconds)}")
        return seconds, f"stream ({config.strategy}), {every}"
    how = (f"per-group refresh by {', '.join(config.incremental_by)}" if config.incremental_by
           else f"incremental refresh ({config.strategy})"
           if config.materialized == "incremental" else "full recompute")
    if after:
        return 0.0, f"{how}, right after {', '.join(after)}"
    if slack is None:
        return None, f"{how}, when a build runs it"
    wait = max(MIN_INTERVAL, slack / 2)
    return wait, f"{how}, {seconds_text(wait)} after new input"


def _cost(node: CompiledNode, runs: list[Any], batches: list[float]) -> float | None:
    """The median seconds of a stream's last timed micro-batches (a build's run of a stream
    counts its start and whole catch-up), or of a batch model's last builds."""
    if node.config.materialized == "streaming":
        timed = batches[:LAST_RUNS]
    else:
        timed = [r.seconds for r in runs if r.status in ("success", "warn")
                 and r.seconds is not None][:LAST_RUNS]
    return statistics.median(timed) if timed else None


def plan_modes(inv: Invocation) -> list[ModePlan]:
    """The selected models' modes and lags, in DAG order."""
    from ..report.static_checks import refusals

    loaded = load(inv)
    chosen = selected_nodes(inv, loaded, ("model",))
    refused = refusals(loaded.project, loaded.graph, chosen)
    return [replace(plan, refused=refused.get(plan.name, "")) for plan in planned(loaded)
            if plan.name in chosen]


def refresh_waits(loaded: Loaded) -> dict[str, float]:
    """The batch models refreshed to a lag, each with the seconds it waits after new input
    (build --watch refreshes one at most that often)."""
    return {p.name: p.wait_seconds for p in planned(loaded) if p.wait_seconds is not None
            and p.materialized in BATCHES}


def planned(loaded: Loaded) -> list[ModePlan]:
    """Every model's mode and lag, in DAG order."""
    # delta-rs: imported here, not by every command that imports this module
    from ..report.status import batch_seconds, node_runs

    graph = loaded.graph
    choices = choose(graph)
    runs = node_runs(loaded.project.target.warehouse)
    batches = batch_seconds(loaded.project.target.warehouse)
    expected: dict[str, float | None] = {}
    scheduled: set[str] = set()  # batch models refreshed to a lag
    plans = []
    for name in graph.order:
        node = graph.nodes[name]
        if node.sql is None:
            expected[name] = 0.0  # a seed is a source
            continue
        choice = choices.get(name)
        lag = choice.lag if choice else None
        cost = _cost(node, runs.get(name, []), batches.get(name, []))
        known = [expected[p] for p in node.refs]
        inputs = None if None in known else max([e or 0.0 for e in known], default=0.0)
        slack = None if lag is None or inputs is None else lag - inputs - (cost or 0.0)
        wait, mode = _wait(graph, node, slack, [p for p in node.refs if p in scheduled])
        if wait is not None and node.config.materialized in BATCHES:
            scheduled.add(name)
        behind = None if wait is None or inputs is None else inputs + wait + (cost or 0.0)
        expected[name] = behind
        problem = ""
        if lag is not None and behind is not None and inputs is not None and behind > lag:
            problem = (f"expects to fall {seconds_text(behind)} behind its sources, over its "
                       f"target lag of {seconds_text(lag)}: its inputs "
                       f"{seconds_text(inputs)}, its wait {seconds_text(wait or 0.0)}, its "
                       "work " + (seconds_text(cost) if cost is not None else "not yet timed"))
        plans.append(ModePlan(
            name, node.file.layer, node.config.materialized, mode, node.config.target_lag,
            lag, bool(choice and choice.chosen), wait,
            choice.why if choice else "no target_lag: it refreshes when a build runs it",
            cost, behind, problem, change_effect(loaded.project, graph, node)))
    return plans
