"""Target lags: how far behind its sources a model's table may fall (`target_lag`), and, for a
model whose config names no `materialized`, the mode its lag chooses.

A model's lag is its own `target_lag`, or with `downstream` the shortest lag of the models
reading it (when none has one, it has none: it refreshes when a build runs it). A model with a
lag and no mode runs as a stream when a stream computes what a full recompute would: its SELECT
takes rows one by one (load/sqlcheck.streaming_obstacle) and everything it reads is a feed
(a source, a streaming model that appends, a ref's change feed), one feed or several put
together by union all. A stream would not apply a table's later changes to the rows it wrote
before (a lookup joined to it, a model updated in place), and two feeds joined need watermarks.
Otherwise it refreshes as a batch: per group with `incremental_by`, on new rows only where its
SQL asks is_incremental(), by key with strategy merge, else in full.

A stream gets a trigger of half its lag (a second at least): a row landing just after a
micro-batch waits an interval, then the work.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ..core.config import interval_seconds
from ..core.nodes import CompiledNode
from ..load.sqlcheck import statements, streaming_obstacle
from .graph import Graph

DOWNSTREAM = "downstream"
MIN_INTERVAL = 1.0  # seconds: a trigger shorter than this costs a JVM's micro-batch overhead


@dataclass(frozen=True)
class Choice:
    """A model's lag and the mode it runs in."""

    lag: float | None  # seconds behind its sources; None: no lag to keep
    materialized: str
    chosen: bool  # the lag chose the mode (the config names none)
    why: str

    @property
    def interval(self) -> float | None:
        """Seconds between a stream's micro-batches that its lag allows."""
        return None if self.lag is None else max(MIN_INTERVAL, self.lag / 2)


def declared_seconds(node: CompiledNode) -> float | None:
    lag = node.config.target_lag
    return None if lag in (None, DOWNSTREAM) else interval_seconds(str(lag))


def lags(graph: Graph) -> dict[str, tuple[float, str] | None]:
    """Each node's lag in seconds and the model that declares it (None: no lag), `downstream`
    taking its readers' shortest."""
    found: dict[str, tuple[float, str] | None] = {}
    for name in reversed(graph.order):
        node = graph.nodes[name]
        if node.config.target_lag == DOWNSTREAM:
            readers = [lag for c in graph.children.get(name, ()) if (lag := found[c])]
            found[name] = min(readers) if readers else None
        else:
            seconds = declared_seconds(node)
            found[name] = None if seconds is None else (seconds, name)
    return found


def _feeds(node: CompiledNode, modes: dict[str, tuple[str, str]]) -> tuple[list[str], list[str]]:
    """(its feeds, the other tables it reads): modes holds each model's (materialized,
    strategy) as chosen so far."""
    feeds = [f"{s}.{t}" for s, t in node.sources] + list(node.change_refs)
    others = []
    for name in node.refs:
        if name in node.feed_only:
            continue
        if modes.get(name) == ("streaming", "append"):
            feeds.append(name)
        else:
            others.append(name)
    return feeds, others


def _why_not_streamed(node: CompiledNode, modes: dict[str, tuple[str, str]]) -> str:
    """Why a stream would not compute what a full recompute does ("" when it would)."""
    query = statements(node.sql or "")[0]  # one query: load/sqlcheck.py checked it
    obstacle = streaming_obstacle(query)
    if obstacle:
        return obstacle
    feeds, others = _feeds(node, modes)
    if others:
        updated = [n for n in others if modes.get(n, ("", ""))[1] == "merge"]
        if updated:
            return (f"it reads {', '.join(updated)}, updated in place (strategy merge): a "
                    "stream sees appends only")
        return (f"it reads {', '.join(others)}, whose later changes a stream would not apply "
                "to the rows it wrote before")
    if not feeds:
        return "it reads no feed"
    if len(feeds) > 1 and query.find(exp.Join) is not None:
        return f"it joins {len(feeds)} feeds ({', '.join(feeds)}): a stream join needs watermarks"
    return ""


def _batch_materialized(node: CompiledNode) -> str:
    """What a model refreshed as a batch materializes as: a table per group with
    incremental_by; incremental on new rows where its SQL asks is_incremental(), or by key with
    strategy merge (its SELECT merged, as a stream would merge its rows); else a table."""
    config = node.config
    if config.incremental_by:
        return "table"
    return "incremental" if node.asks_incremental or config.strategy == "merge" else "table"


def _asks_for_batches(node: CompiledNode) -> str:
    """What in its config or SQL asks for batch refreshes ("" when nothing does)."""
    if node.config.incremental_by:
        return "its incremental_by asks for a refresh per group"
    if node.asks_incremental:
        return "its SQL asks is_incremental(): it reads new rows itself, as a batch"
    return ""


def _choice(node: CompiledNode, declared: tuple[float, str] | None,
            modes: dict[str, tuple[str, str]]) -> Choice:
    config = node.config
    lag = declared[0] if declared else None
    if not config.mode_by_lag:
        return Choice(lag, config.materialized, False,
                      f"its config sets materialized '{config.materialized}'")
    obstacle = _why_not_streamed(node, modes) or _asks_for_batches(node)
    why = obstacle or f"its rows come one by one from {', '.join(_feeds(node, modes)[0])}"
    if config.target_lag == DOWNSTREAM:
        said = ("downstream, and nothing reading it has a lag" if declared is None
                else f"downstream: the lag of {declared[1]}, {_seconds(declared[0])}")
        why = f"{said}; {why}"
    return Choice(lag, _batch_materialized(node) if obstacle else "streaming", True, why)


def choose(graph: Graph) -> dict[str, Choice]:
    """The lag and mode of every model with a target_lag, in DAG order (a model's choice
    depends on the modes of what it reads)."""
    lag_of = lags(graph)
    modes: dict[str, tuple[str, str]] = {}
    choices: dict[str, Choice] = {}
    for name in graph.order:
        node = graph.nodes[name]
        if node.sql is not None and node.config.target_lag:
            choices[name] = _choice(node, lag_of[name], modes)
        modes[name] = (choices[name].materialized if name in choices
                       else node.config.materialized, node.config.strategy)
    return choices


def chosen_config(choice: Choice) -> dict[str, str]:
    """The config a choice sets beneath the model's own."""
    config = {"materialized": choice.materialized}
    if choice.materialized == "streaming" and choice.interval is not None:
        config["trigger"] = _seconds(choice.interval)
    return config


def _seconds(value: float) -> str:
    """Seconds as an interval the config vocabulary reads: '5 seconds', '500 milliseconds'."""
    whole = int(value)
    return f"{whole} seconds" if whole == value else f"{int(value * 1000)} milliseconds"
