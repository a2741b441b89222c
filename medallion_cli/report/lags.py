"""The lag each write of a model achieved, against its target_lag: the age of the newest event
the write reflected, that is its time minus the newest value of the model's `event_time`
column just after it (the event log keeps both: `event_time` and `newest_event_time`, for a
model's builds and its streaming micro-batches alike). Over a window, its median and 95th
percentile; a p95 over the target is a breach, which `medallion status` reports and exits 1 on.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

WINDOW = dt.timedelta(days=1)


@dataclass(frozen=True)
class AchievedLag:
    target: float | None  # seconds (dag/lags.py: its own or downstream's)
    lags: tuple[float, ...]  # each write's in the window, in seconds, oldest first

    def percentile(self, share: float) -> float | None:
        """The nearest-rank percentile of the writes' lags (None: no write)."""
        ranked = sorted(self.lags)
        return ranked[max(0, math.ceil(share * len(ranked)) - 1)] if ranked else None

    @property
    def over(self) -> int:
        """Writes whose lag was over the target."""
        return sum(lag > self.target for lag in self.lags) if self.target is not None else 0

    @property
    def breach(self) -> bool:
        p95 = self.percentile(0.95)
        return self.target is not None and p95 is not None and p95 > self.target

    def as_json(self) -> dict[str, float | int | bool | None]:
        return {"target_seconds": self.target, "writes": len(self.lags),
                "p50_seconds": self.percentile(0.5), "p95_seconds": self.percentile(0.95),
                "writes_over_target": self.over, "breach": self.breach}


def seconds_text(seconds: float) -> str:
    """Seconds as people read a lag: '3.5 s', '40 s', '5 min', '12 h', '2 days'."""
    if seconds < 10:
        return f"{seconds:.1f} s".replace(".0 s", " s")
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h" if seconds < 172800 else f"{seconds / 86400:.0f} days"


def write_lags(warehouse: str, since: dt.datetime) -> dict[str, list[float]]:
    """Each node's writes since `since` with an event time found, their lags in seconds,
    oldest first: a batch model's builds that wrote, a streaming model's micro-batches (its
    build's own event counts them again)."""
    import pyarrow.compute as pc  # here: watch and plan import this module before any read

    from .eventlog import logged_events

    events = logged_events(
        warehouse, ["event_time", "event_type", "materialized", "node", "newest_event_time"],
        [("event_type", "in", ["node", "batch"]), ("status", "in", ["success", "warn"]),
         ("event_time", ">=", since)])
    if events is None:
        return {}
    events = events.filter(pc.is_valid(events["newest_event_time"]))
    found: dict[str, list[float]] = {}
    for row in events.sort_by("event_time").to_pylist():
        if row["event_type"] == "node" and row["materialized"] == "streaming":
            continue
        lag = (row["event_time"] - row["newest_event_time"]).total_seconds()
        found.setdefault(row["node"], []).append(max(0.0, lag))
    return found
