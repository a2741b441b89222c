"""`medallion status`: each table's last build, rows, version and freshness, from the event log
and the tables' own Delta logs, read with delta-rs (no JVM, either engine's warehouse).

Freshness is now minus the newest value of the model's `event_time` column (from its files'
statistics), against the model's `freshness` limits (warn_after / error_after, as dbt's
source freshness). A table that is not built, or has no event time, is past its limits.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from ..core.config import size_text
from ..core.project import Project
from ..dag.graph import Graph
from ..dag.lags import lags
from .eventlog import logged_events, now
from .lags import WINDOW, AchievedLag, seconds_text, write_lags
from .tablefacts import table_facts

SUCCEEDED = ("success", "up_to_date", "warn")
LEVELS = ("pass", "warn", "error")


@dataclass(frozen=True)
class Run:
    """One finished build of a node, from the event log."""

    when: dt.datetime
    status: str
    seconds: float | None
    rows: int | None
    version: int | None
    message: str | None
    expectations: dict[str, Any] | None = None  # rule -> rows that failed it
    rows_checked: int | None = None  # rows the expectations were evaluated on

    @property
    def pass_rates(self) -> dict[str, float]:
        """rule -> share of the checked rows that met it."""
        if not self.expectations or not self.rows_checked:
            return {}
        return {rule: 1 - failed / self.rows_checked for rule, failed in self.expectations.items()}


@dataclass(frozen=True)
class TableStatus:
    name: str
    kind: str
    layer: str
    version: int | None  # None: no table yet
    rows: int | None
    last_success: Run | None
    last_failure: Run | None
    newest_event: dt.datetime | None
    age_seconds: float | None  # now minus newest_event
    freshness: str | None  # pass | warn | error; None when the model declares no limits
    reason: str  # what the freshness level rests on
    runs: tuple[Run, ...] = ()  # the latest first
    lag: AchievedLag | None = None  # against its target_lag (None: it has none)
    files: int | None = None  # the data files a full read opens
    size_bytes: int | None = None
    compacted: bool = False  # it has a compaction policy

    @property
    def last_written(self) -> Run | None:
        """The last run that wrote the table (not one that found it up to date)."""
        return next((r for r in self.runs if r.status in ("success", "warn")
                     and r.version is not None), None)

    @property
    def missing(self) -> bool:
        """A run wrote its table, and there is none now (deleted, or never restored)."""
        return self.version is None and self.last_written is not None

    @property
    def failed(self) -> bool:
        """Its latest run failed: the table is as it was before that run."""
        return bool(self.runs) and self.runs[0].status == "error"

    @property
    def as_json(self) -> dict[str, Any]:
        def run(r: Run | None) -> dict[str, Any] | None:
            return None if r is None else {
                "when": r.when.isoformat(), "status": r.status, "seconds": r.seconds,
                "rows": r.rows, "version": r.version, "message": r.message,
                "expectations": r.expectations, "rows_checked": r.rows_checked,
                "pass_rates": r.pass_rates}

        return {"name": self.name, "kind": self.kind, "layer": self.layer,
                "version": self.version, "rows": self.rows,
                "last_success": run(self.last_success), "last_failure": run(self.last_failure),
                "last_written": run(self.last_written),
                "last_run": run(self.runs[0] if self.runs else None), "failed": self.failed,
                "missing": self.missing,
                "newest_event": self.newest_event.isoformat() if self.newest_event else None,
                "age_seconds": self.age_seconds, "freshness": self.freshness,
                "reason": self.reason, "runs": [run(r) for r in self.runs],
                "lag": self.lag.as_json() if self.lag else None, "files": self.files,
                "bytes": self.size_bytes, "mean_file_bytes": self.mean_file_bytes}

    @property
    def mean_file_bytes(self) -> float | None:
        return self.size_bytes / self.files if self.files and self.size_bytes is not None \
            else None


def node_runs(warehouse: str) -> dict[str, list[Run]]:
    """Each node's finished builds and tests, latest first, from the event log (empty when
    nothing has been logged yet)."""
    events = logged_events(warehouse, ["event_time", "node", "status", "seconds",
                                       "rows_written", "failing_rows", "version", "message",
                                       "expectations", "rows_checked"],
                           [("event_type", "=", "node")])
    runs: dict[str, list[Run]] = {}
    if events is None:
        return runs
    for row in events.sort_by([("event_time", "descending")]).to_pylist():
        rows = row["rows_written"] if row["rows_written"] is not None else row["failing_rows"]
        runs.setdefault(row["node"], []).append(Run(
            row["event_time"], row["status"], row["seconds"], rows, row["version"],
            row["message"], dict(row["expectations"] or []), row.get("rows_checked")))
    return runs


def batch_seconds(warehouse: str) -> dict[str, list[float]]:
    """Each streaming model's timed micro-batches (Spark's progress times them under --watch),
    in seconds, the latest first."""
    events = logged_events(warehouse, ["event_time", "node", "seconds"],
                           [("event_type", "=", "batch")])
    timed: dict[str, list[float]] = {}
    if events is None:
        return timed
    for row in events.sort_by([("event_time", "descending")]).to_pylist():
        if row["seconds"] is not None:
            timed.setdefault(row["node"], []).append(row["seconds"])
    return timed


def _age(seconds: float) -> str:
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{days}d"] * bool(days) + [f"{hours}h"] * bool(hours) + \
        [f"{minutes}m"] * bool(minutes and not days) + [f"{secs}s"] * (not (days or hours))
    return " ".join(parts) or "0s"


def freshness_level(limits: dict[str, Any], age: float | None) -> tuple[str | None, str]:
    """(level, why) of an age against warn_after/error_after seconds; an unknown age is past
    every limit."""
    if not limits:
        return None, "no freshness limits declared"
    if age is None:
        return ("error" if "error_after" in limits else "warn"), "no event time found"
    for level, key in (("error", "error_after"), ("warn", "warn_after")):
        if key in limits and age > limits[key]:
            return level, f"{_age(age)} old, over {key.split('_')[0]} limit {_age(limits[key])}"
    return "pass", f"{_age(age)} old, within its limits"


def table_status(project: Project, graph: Graph, names: list[str],
                 runs: dict[str, list[Run]] | None = None, at: dt.datetime | None = None
                 ) -> list[TableStatus]:
    """The status of the named seeds and models (views have no table and are left out)."""
    runs = node_runs(project.target.warehouse) if runs is None else runs
    at = at or now()
    targets = lags(graph)
    achieved = write_lags(project.target.warehouse, at - WINDOW) if any(
        targets[name] for name in names) else {}
    found = []
    for name in names:
        node = graph.nodes[name]
        cfg = node.config
        if cfg.materialized == "view":
            continue
        unread = None
        try:
            facts = table_facts(project.table_path(node.file), cfg.event_time)
        except Exception as exc:  # e.g. object storage delta-rs has no credentials for
            facts, unread = None, f"table not readable here: {str(exc).splitlines()[0]}"
        newest = facts.newest if facts else None
        age = (at - newest).total_seconds() if newest else None
        level, why = freshness_level(cfg.freshness, age)
        if facts is None:
            why = (unread or "not built yet") + ("; " + why if cfg.freshness else "")
        history = runs.get(name, [])
        target = targets[name]
        found.append(TableStatus(
            name, node.file.kind, node.file.layer, facts.version if facts else None,
            facts.rows if facts else None,
            next((r for r in history if r.status in SUCCEEDED), None),
            next((r for r in history if r.status == "error"), None),
            newest, age, level, why, tuple(history[:10]),
            AchievedLag(target[0], tuple(achieved.get(name, []))) if target else None,
            facts.files if facts else None, facts.bytes if facts else None,
            cfg.compaction is not None))
    return found


RUN_WORDS = {"success": "wrote it", "warn": "wrote it, warned", "up_to_date": "up to date",
             "error": "FAILED", "skipped": "skipped"}
HEADER = ("TABLE", "TABLE NOW", "LAST WRITTEN", "LAST RUN", "FRESHNESS")


def status_lines(statuses: list[TableStatus]) -> list[str]:
    """A header, then one line per table: its version and rows, when a run last wrote it, the
    latest run and what it did, and its freshness; its last failure indented under it."""
    row = "{:<32} {:<20} {:<20} {:<32} {}"
    lines = [row.format(*HEADER)]
    for s in statuses:
        table = (f"v{s.version}, {s.rows} rows" if s.version is not None
                 else "MISSING" if s.missing else "no table")
        written = f"{s.last_written.when:%Y-%m-%d %H:%M:%S}" if s.last_written else "never"
        latest = s.runs[0] if s.runs else None
        ran = (f"{latest.when:%Y-%m-%d %H:%M:%S} {RUN_WORDS.get(latest.status, latest.status)}"
               if latest else "none logged")
        fresh = f"{s.freshness.upper()}: {s.reason}" if s.freshness else s.reason
        if s.missing:
            fresh = "its table is gone: the next build rebuilds it from its inputs"
        lines.append(row.format(s.name, table, written, ran, fresh))
        if s.lag:
            lines.append(f"{'':<32} {lag_line(s.lag)}")
        if s.compacted and s.files is not None and s.size_bytes is not None:
            lines.append(f"{'':<32} {s.files} data file(s), {size_text(s.size_bytes)}"
                         f" (mean {size_text(s.mean_file_bytes or 0)}): a full read opens "
                         f"{s.files}")
        if s.last_failure:
            message = (s.last_failure.message or "").splitlines()[0] if s.last_failure.message \
                else ""
            lines.append(f"{'':<32} last failure {s.last_failure.when:%Y-%m-%d %H:%M:%S}: "
                         f"{message}")
    return lines


def lag_line(lag: AchievedLag) -> str:
    target = f"target lag {seconds_text(lag.target or 0)}"
    if not lag.lags:
        return (f"{target}; no write with an event time in the last day (the lag is measured "
                "on a model with event_time)")
    p50, p95 = lag.percentile(0.5), lag.percentile(0.95)
    said = (f"{target}; achieved p50 {seconds_text(p50 or 0)}, p95 "
            f"{seconds_text(p95 or 0)} over {len(lag.lags)} write(s) in the last day")
    return said + (f"; BREACH: {lag.over} write(s) over it" if lag.breach else "")


def exit_code(statuses: list[TableStatus]) -> int:
    """1 when a table's latest run failed, a table once written is missing, a table is past
    an error_after limit, or its writes' lag breached its target_lag."""
    return 1 if (any(s.failed or s.missing or (s.lag and s.lag.breach) for s in statuses)
                 or worst(statuses) == "error") else 0


def worst(statuses: list[TableStatus]) -> str:
    levels = [s.freshness for s in statuses if s.freshness]
    return max(levels, key=LEVELS.index, default="pass")

