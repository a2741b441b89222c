"""Printing a task's progress: one line per node, a live status line on a terminal, or JSON.

On a terminal, a status line under the results shows what is running and for how long; it is
redrawn every half second and erased before each result line. Piped output gets plain lines
only. --log-format json writes one JSON object per event (start, result, batch, done).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from ..commands.plan import Reporter
from ..run.runner import NodeResult
from ..run.scheduler import NOT_STARTED, STOPPED, interrupted

if TYPE_CHECKING:
    from ..materialize.streaming.tally import BatchReport

STATUS_LABEL = {"success": "OK", "up_to_date": "UP TO DATE", "warn": "WARN", "error": "ERROR",
                "skipped": "SKIP"}
TEST_LABEL = {"success": "PASS", "up_to_date": "UP TO DATE", "warn": "WARN", "error": "FAIL",
              "skipped": "SKIP"}
COLORS = {"OK": "green", "PASS": "green", "ERROR": "red", "FAIL": "red", "SKIP": "yellow",
          "WARN": "yellow"}
ORDER = ("success", "up_to_date", "warn", "error", "skipped")
ERASE_LINE = "\r\033[K"  # back to the start of the line, and clear it


def counts(results: list[NodeResult]) -> dict[str, int]:
    return {s: sum(r.status == s for r in results) for s in ORDER}


def kept_in(result: NodeResult, rule: str) -> str:
    """Where an expectation's failing rows went, as its line ends."""
    action = result.on_violation.get(rule)
    if action == "drop":
        return f", kept apart in {result.quarantine}"
    if action == "warn":
        return " (on_violation warn: written to the table all the same)"
    return ""


def unmet_expectations(results: list[NodeResult]) -> str:
    """The models whose rows failed expectations, as the summary's last line says them: their
    status is success (the rows went where their rules said), so a count of warnings alone
    would hide them."""
    unmet = {}
    for result in results:
        actions = {result.on_violation.get(rule) for rule, n in result.expectations.items()
                   if n} & {"drop", "warn"}  # (a failed `fail` rule failed the model)
        if actions:
            unmet[result.name] = ", ".join(text for action, text in (
                ("drop", "rows kept apart"), ("warn", "rows written with a warning"))
                if action in actions)
    if not unmet:
        return ""
    return (f"Expectations not met in {len(unmet)} model(s): "
            + "; ".join(f"{name} ({what})" for name, what in unmet.items()))


def watch_summary(results: list[NodeResult], first_pass: int, batches: int,
                  seconds: float) -> str:
    """What a --watch session did after its first pass, in a line, and which nodes failed in
    the session (each failure is said once, however often it was tried again)."""
    watched = results[first_pass:]
    refreshes = sum(r.kind in ("model", "seed") and r.status in ("success", "warn")
                    for r in watched)
    tests = [r for r in watched if r.kind == "test"]
    failed = sorted({r.name for r in results if r.failed and r.kind != "test"})
    minutes, rest = divmod(int(seconds), 60)
    return (f"Watched for {minutes}m {rest}s: {refreshes} refresh(es), {batches} micro-batch(es), "
            f"{len(tests)} data test run(s) ({sum(r.status == 'success' for r in tests)} passed, "
            f"{sum(r.status == 'warn' for r in tests)} warned, "
            f"{sum(r.status == 'error' for r in tests)} failed), "
            f"{len(failed)} node(s) failed" + (f" ({', '.join(failed)})" if failed else ""))


# The exit code of a run whose output was closed: as a process killed by SIGPIPE (128 + 13)
CLOSED_OUTPUT = 141


def closed_output(on_stderr: bool = False) -> None:
    """The reader of stdout (or stderr) left: what would still be written there goes to
    /dev/null (so no flush fails again, at exit either), and the run is stopped as Ctrl-C
    stops it: nothing half-written, the lock let go."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, (sys.stderr if on_stderr else sys.stdout).fileno())
    os.close(devnull)
    signal.raise_signal(signal.SIGINT)


class Console:
    def __init__(self, log_format: str = "text", debug: bool = False, watch: bool = False,
                 live: bool | None = None):
        self.json = log_format == "json"
        self.debug = debug
        self.watch = watch
        self.live = (sys.stdout.isatty() if live is None else live) and not self.json
        self.total = 0
        self.done = 0
        self.running: dict[str, float] = {}
        self.phase_started: tuple[str, float] | None = None  # ("starting Spark", when)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.began = time.monotonic()
        self.batches = 0  # micro-batches under --watch
        self.closed = False  # the output's reader left

    def _echo(self, text: str, **style: Any) -> None:
        """click.secho, until the output is closed (`medallion build | head` once head has
        its lines): then nothing more is written, and the run stops as on Ctrl-C, since a
        thread stuck writing, or a build no one reads, would hold the warehouse's lock."""
        if self.closed:
            return
        try:
            click.secho(text, **style)
        except BrokenPipeError:
            self.closed = True
            closed_output(style.get("err", False))

    def reporter(self) -> Reporter:
        return Reporter(self.start, self.begin, self.result, self.batch, self.phase, self.warn)

    def warn(self, message: str) -> None:
        if self.json:
            return self._emit("warning", message=message)
        with self.lock:
            if self.live:
                self._echo(ERASE_LINE, nl=False, color=True)
            self._echo(f"Warning: {message}", fg="yellow", err=True)

    def _emit(self, event: str, **fields: Any) -> None:
        at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self._echo(json.dumps({"event": event, "at": at, **fields}, default=str))

    def _line(self, text: str) -> None:
        if self.watch:  # a session of hours: each line says when
            stamp = time.strftime("%H:%M:%S ")
            text = "\n".join(stamp + line for line in text.split("\n"))
        with self.lock:
            if self.live:
                self._echo(ERASE_LINE, nl=False, color=True)
            self._echo(text)

    def start(self, total: int, target: str) -> None:
        self.total = total
        if self.json:
            return self._emit("start", nodes=total, target=target)
        then = ", then watching for new data until Ctrl-C" if self.watch else ""
        self._echo(f"Running {total} node(s) on target '{target}'{then}" if total
                   else "Nothing selected.")
        if self.live and total:
            threading.Thread(target=self._tick, daemon=True).start()

    def begin(self, name: str) -> None:
        with self.lock:
            self.running[name] = time.monotonic()

    def phase(self, what: str | None) -> None:
        with self.lock:
            self.phase_started = (what, time.monotonic()) if what else None

    def _tick(self) -> None:
        while not self.stop.wait(0.5):
            with self.lock:
                now = time.monotonic()
                busy = ", ".join(f"{n} ({now - t:.0f}s)" for n, t in self.running.items())
                if self.phase_started:
                    what, since = self.phase_started
                    status = f"  {what} ({now - since:.0f}s)"
                elif busy:
                    status = f"  [{self.done}/{self.total}] running: {busy}"
                else:
                    continue
                self._echo(ERASE_LINE + status[:150], nl=False, color=True)

    def result(self, result: NodeResult) -> None:
        with self.lock:
            self.running.pop(result.name, None)
            self.done += 1
        if self.json:
            return self._emit("result", **{k: v for k, v in asdict(result).items()
                                           if k != "detail" or self.debug})
        counter = f"{self.done:>3} of {self.total}" if self.done <= self.total else "  (watch)"
        label = (TEST_LABEL if result.kind in ("test", "unit") else STATUS_LABEL)[result.status]
        what = f"{result.kind} {result.name}" + (
            f" ({result.materialized})" if result.kind == "model" else "")
        facts = []
        if result.rows is not None:
            facts.append(f"{result.rows} {'failing ' if result.kind == 'test' else ''}rows")
        if result.version is not None:
            facts.append(f"v{result.version}")
        facts.append(f"{result.seconds:.1f}s")
        if "rows_per_second" in result.stream:
            facts.append(f"{result.stream['rows_per_second']:.0f} rows/s")
        if result.stream.get("kafka_lag"):
            facts.append(f"lag {sum(result.stream['kafka_lag'].values())}")
        color = COLORS.get(label)
        lines = [f"{counter}  " + click.style(f"{label:<10}", fg=color)
                 + f" {what:<50} [{', '.join(facts)}]"]
        lines += [f"      expectation {rule}: {n} row(s) failed" + (
                      kept_in(result, rule) if n else "")
                  for rule, n in result.expectations.items()]
        if result.message:
            lines.append(click.style("      " + result.message.replace("\n", "\n      "),
                                     fg=color, dim=result.status not in ("error", "skipped",
                                                                         "warn")))
        if result.failed and self.debug:
            lines.append(result.detail)
        self._line("\n".join(lines))

    def batch(self, report: BatchReport) -> None:
        self.batches += 1
        if self.json:
            return self._emit("batch", **asdict(report))
        facts = f"{report.rows} rows, v{report.version}"
        if report.malformed:
            facts += f", {report.malformed} malformed"
        if report.seconds:
            facts += f", {report.seconds:.1f}s ({report.rows_read / report.seconds:.0f} rows/s)"
        if report.kafka_lag:
            facts += f", lag {sum(report.kafka_lag.values())}"
        self._line(f"  (watch)  STREAM     {report.model} batch {report.batch_id}: {facts}")

    def say_aborted(self) -> None:
        self._echo("\nAborted by Ctrl-C: what finished is committed; the rest is as it was",
                   fg="yellow", err=True)

    def finish(self, results: list[NodeResult]) -> None:
        self.stop.set()
        if self.live:
            self._echo(ERASE_LINE, nl=False, color=True)
        stopped = interrupted(results)
        if self.json:
            return self._emit("done", counts=counts(results), interrupted=stopped)
        if not results:
            return
        tally = ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in counts(results).items())
        if not stopped:
            self._echo("Done. " + tally)
            unmet = unmet_expectations(results)
            if unmet:
                self._echo(unmet, fg="yellow")
            if self.watch:
                self._echo(watch_summary(results, self.total, self.batches,
                                         time.monotonic() - self.began))
            return
        committed = [f"{r.name} v{r.version}" for r in results
                     if r.status == "success" and r.version is not None]
        left = sum(r.message in (NOT_STARTED, STOPPED) for r in results)
        self._echo(f"Stopped by Ctrl-C. {tally}\n"
                   f"  committed: {', '.join(committed) or 'nothing'}\n"
                   f"  {left} node(s) stopped or not started, their tables as they were: "
                   "medallion retry runs them")
