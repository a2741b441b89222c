"""Running selected nodes in DAG order, in parallel where the DAG allows.

A node runs once all its selected parents finished; when one fails (a data test with error
severity included), everything downstream of it is skipped rather than built on bad or stale
data. A node may instead be gated by some of its parents (data tests on its inputs, where the
engine computes a write before committing it): it starts beside them and its commit waits for
their verdict (its `gate`), so a failing test still leaves its table as it was.
"""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import Callable

from ..core.processes import deferred_ctrl_c
from .runner import HeldBack, NodeResult

NOT_STARTED = "not started: Ctrl-C stopped the run"
STOPPED = "stopped by Ctrl-C: nothing half-written (what it committed before stays)"


def interrupted(results: list[NodeResult]) -> bool:
    """Whether Ctrl-C stopped the run these results are of."""
    return any(r.message in (NOT_STARTED, STOPPED) for r in results)


def skipped_after(parent: NodeResult) -> str:
    """Why a node is skipped when `parent` failed or was skipped."""
    if parent.message in (NOT_STARTED, STOPPED):
        return NOT_STARTED
    return f"upstream '{parent.name}' {parent.status}"


def drain(running: dict[Future[NodeResult], str], finish: Callable[[NodeResult], None],
          on_interrupt: Callable[[], None] | None) -> None:
    """Wait for the running nodes. After Ctrl-C (on_interrupt given), Spark jobs they start
    are cancelled as they come, and a node that fails is said to be stopped."""
    while running:
        done, _ = wait(running, timeout=0.5 if on_interrupt else None,
                       return_when=FIRST_COMPLETED)
        for future in done:
            running.pop(future)
            result = future.result()
            if on_interrupt and result.failed:
                result = replace(result, message=STOPPED)
            finish(result)
        if on_interrupt and running:
            on_interrupt()


def execute(order: list[str], parents: dict[str, set[str]], run: Callable[..., NodeResult],
            labels: dict[str, tuple[str, str]], threads: int = 1,
            on_result: Callable[[NodeResult], None] = lambda r: None,
            on_begin: Callable[[str], None] = lambda name: None,
            fail_fast: bool = False,
            on_interrupt: Callable[[], None] = lambda: None,
            stop: threading.Event | None = None,
            gates: dict[str, set[str]] | None = None) -> list[NodeResult]:
    """Run nodes (models, seeds, tests) in `order`, each once its `parents` finished; a node with a
    parent that failed or was skipped is skipped. labels: name -> (kind, materialized).
    fail_fast: after the first failure start nothing more (what runs finishes: a commit is not
    cut short) and report the rest skipped. Ctrl-C (KeyboardInterrupt) starts nothing more
    either, and stops what runs with on_interrupt (which cancels its Spark jobs): a node either
    committed or left its table as it was. A second Ctrl-C leaves at once. `stop`, when set,
    stops the run as Ctrl-C does (under --watch, where a signal only sets it).
    gates: node -> parents it may start beside; it is run as run(name, gate), and gate()
    returns once they all finished, raising HeldBack when one failed or was skipped. At most
    threads - 1 nodes wait at their gates, so what they wait for always has a thread."""
    waiting = {n: set(parents.get(n, ())) & set(order) for n in order}
    gates = {n: set(g) & waiting[n] for n, g in (gates or {}).items() if n in waiting}
    children: dict[str, list[str]] = {}
    for name, ps in waiting.items():
        for p in ps:
            children.setdefault(p, []).append(name)
    results: dict[str, NodeResult] = {}
    verdicts = threading.Condition()  # a gated node's thread waits on it for its gates
    running: dict[Future[NodeResult], str] = {}
    by_priority = _by_priority(order, children, labels, gates)

    def gate_of(name: str) -> Callable[[], None]:
        def gate() -> None:
            with verdicts:
                verdicts.wait_for(lambda: gates[name] <= results.keys())
                failed = [results[g] for g in order if g in gates[name]
                          and results[g].status in ("error", "skipped")]
            if failed:
                raise HeldBack(skipped_after(failed[0]))
        return gate

    def record(result: NodeResult) -> None:
        with verdicts:
            results[result.name] = result
            verdicts.notify_all()

    def finish(result: NodeResult) -> None:
        record(result)
        on_result(result)
        for child in children.get(result.name, ()):
            if child in results:
                continue
            # a child started at its gate says its own result, as its gate tells it
            if result.status in ("error", "skipped") and child not in running.values():
                finish(NodeResult(child, *labels[child], "skipped",
                                  message=skipped_after(result)))
            else:
                waiting[child].discard(result.name)

    def startable(name: str) -> bool:
        if name in results or name in running.values():
            return False
        if waiting[name] - gates.get(name, set()):
            return False
        at_gates = sum(1 for n in running.values() if waiting[n])
        return not waiting[name] or at_gates < threads - 1

    def wind_down(say: Callable[[NodeResult], None], why: str,
                  stopping: Callable[[], None] | None) -> None:
        # what has not started first: a node waiting at its gate learns its verdict
        for name in order:
            if name not in results and name not in running.values():
                say(NodeResult(name, *labels[name], "skipped", message=why))
        drain(running, say, stopping)

    interrupted = False
    with deferred_ctrl_c(stop) as stop, ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        try:
            while len(results) < len(order):
                failed = fail_fast and next((r.name for r in results.values() if r.failed), None)
                if interrupted or failed:
                    why = (NOT_STARTED if interrupted
                           else f"--fail-fast: stopped after '{failed}' failed")
                    wind_down(finish, why, on_interrupt if interrupted else None)
                    break
                for name in by_priority:
                    if len(running) >= max(1, threads):  # a node starts when a thread takes it
                        break
                    if startable(name):
                        on_begin(name)
                        job = (pool.submit(run, name, gate_of(name)) if name in gates
                               else pool.submit(run, name))
                        running[job] = name
                if not running:
                    break
                try:
                    done, _ = wait(running, timeout=None if stop is None else 0.5,
                                   return_when=FIRST_COMPLETED)
                except KeyboardInterrupt:  # Ctrl-C: stop what runs, start nothing more
                    interrupted = True
                    on_interrupt()
                    continue
                if stop is not None and stop.is_set():
                    interrupted = True
                    on_interrupt()
                for future in done:
                    running.pop(future)
                    finish(future.result())
        except Exception:  # a result that could not be said: nothing left waiting for ever
            on_interrupt()
            wind_down(record, NOT_STARTED, on_interrupt)
            raise
    return [results[n] for n in order if n in results]


def _by_priority(order: list[str], children: dict[str, list[str]],
                 labels: dict[str, tuple[str, str]], gates: dict[str, set[str]]) -> list[str]:
    """Of the nodes ready at once, those with the longest chain of work after them start first,
    so a short branch does not hold a thread while the longest one waits (the build's end is
    the longest chain's). A seed (a small CSV, loaded in a moment) counts for no work: of a
    seed and a silver model that the same gold model reads, the silver model goes first. A node
    does not wait for its gates, so they do not lengthen their chain; and of chains as long, a
    gated node goes first, to compute beside its gates rather than after them."""
    below = {name: 0 if labels[name][0] == "seed" else 1 for name in order}
    for name in reversed(order):
        below[name] += max((below[c] for c in children.get(name, ())
                            if name not in gates.get(c, ())), default=0)
    return sorted(order, key=lambda name: (-below[name], name not in gates))
