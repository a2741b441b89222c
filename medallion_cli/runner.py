"""Running selected nodes in DAG order, in parallel where the DAG allows.

A node runs once all its selected parents succeeded; when one fails, everything downstream of
it is skipped rather than built on stale data.
"""

from __future__ import annotations

import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Callable

from .errors import MedallionError
from .materializations import BuildContext, build_node


@dataclass(frozen=True)
class NodeResult:
    name: str
    kind: str
    materialized: str
    status: str  # success | up_to_date | error | skipped
    seconds: float = 0.0
    rows: int | None = None
    version: int | None = None
    message: str = ""
    detail: str = ""  # the traceback, for --debug

    @property
    def failed(self) -> bool:
        return self.status == "error"


def _error_message(exc: BaseException) -> str:
    if isinstance(exc, MedallionError):
        return str(exc)
    text = str(exc).strip() or type(exc).__name__
    # Spark errors go on with the whole query plan; the first line says what is wrong.
    return text.splitlines()[0]


def run_node(ctx: BuildContext, name: str) -> NodeResult:
    node = ctx.graph.nodes[name]
    start = time.perf_counter()
    base = dict(name=name, kind=node.file.kind, materialized=node.config.materialized)
    try:
        outcome = build_node(ctx, node)
    except Exception as exc:  # a model failing must not stop the others
        return NodeResult(**base, status="error", seconds=time.perf_counter() - start,
                          message=_error_message(exc), detail=traceback.format_exc())
    write = outcome.write
    return NodeResult(**base, status=outcome.status, seconds=time.perf_counter() - start,
                      rows=write.rows if write else None,
                      version=write.version if write else None, message=outcome.message)


def execute(ctx: BuildContext, selected: list[str], threads: int = 1,
            on_result: Callable[[NodeResult], None] = lambda r: None) -> list[NodeResult]:
    chosen = set(selected)
    waiting = {n: {p for p in ctx.graph.parents(n) if p in chosen} for n in selected}
    results: dict[str, NodeResult] = {}

    def finish(result: NodeResult) -> None:
        results[result.name] = result
        on_result(result)
        for child in ctx.graph.children.get(result.name, ()):
            if child in waiting and child not in results:
                if result.status in ("error", "skipped"):
                    node = ctx.graph.nodes[child]
                    finish(NodeResult(child, node.file.kind, node.config.materialized, "skipped",
                                      message=f"upstream '{result.name}' {result.status}"))
                else:
                    waiting[child].discard(result.name)

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        running = {}
        while len(results) < len(selected):
            for name in selected:  # DAG order, so earlier layers start first
                if name not in results and name not in running.values() and not waiting[name]:
                    running[pool.submit(run_node, ctx, name)] = name
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                running.pop(future)
                finish(future.result())
    return [results[n] for n in selected if n in results]
