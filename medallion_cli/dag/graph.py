"""The DAG of models and seeds: ordering and cycle detection (selection.py selects from it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from ..core.errors import ProjectError, closest
from ..core.nodes import CompiledNode


@dataclass(frozen=True)
class Graph:
    nodes: dict[str, CompiledNode]
    order: tuple[str, ...]  # topological, stable by name within a level
    children: dict[str, tuple[str, ...]]

    def parents(self, name: str) -> tuple[str, ...]:
        return self.nodes[name].parents

    def ancestors(self, name: str, depth: int = -1) -> set[str]:
        """Nodes it reads from, up to `depth` generations (-1: all)."""
        return _walk(name, self.parents, depth)

    def descendants(self, name: str, depth: int = -1) -> set[str]:
        return _walk(name, lambda n: self.children.get(n, ()), depth)


def _walk(start: str, step: Callable[[str], Iterable[str]], depth: int) -> set[str]:
    seen: set[str] = set()
    level, generation = set(step(start)), 1
    while level and (depth < 0 or generation <= depth):
        seen |= level
        level = {n for name in level for n in step(name)} - seen
        generation += 1
    return seen


def _find_cycle(nodes: dict[str, CompiledNode], remaining: set[str]) -> list[str]:
    """One cycle among the nodes left when topological sorting stalls, as a closed path."""
    start = min(remaining)
    path, index = [start], {start: 0}
    while True:
        nxt = min(p for p in nodes[path[-1]].parents if p in remaining)
        if nxt in index:
            return path[index[nxt]:] + [nxt]
        index[nxt] = len(path)
        path.append(nxt)


def flows_into(nodes: dict[str, CompiledNode], target: str) -> list[str]:
    """The flows appending to `target`'s table, in the order they run (by name)."""
    return sorted(n for n, c in nodes.items() if c.config.flow_into == target)


def _check_flow(flow: CompiledNode, nodes: dict[str, CompiledNode]) -> None:
    target = flow.config.flow_into
    where = flow.file.rel_path
    if target is None or target not in nodes:
        raise ProjectError(f"flow_into names no enabled model: '{target}'. "
                           f"{closest(target or '', nodes)}".strip(), path=where)
    cfg = nodes[target].config
    if cfg.materialized != "streaming" or cfg.strategy != "append" or cfg.flow_into:
        raise ProjectError(f"flow_into names '{target}', which is not a streaming table of its "
                           "own that appends", path=where,
                           hint="a flow appends to a model with materialized='streaming' and "
                                "strategy 'append' (not to another flow)")
    if target in flow.refs:
        raise ProjectError(f"a flow cannot read the table it writes: ref('{target}')",
                           path=where, hint="read the sources or models upstream of it")


def _with_flow_order(nodes: dict[str, CompiledNode]) -> dict[str, CompiledNode]:
    """Flows run after the model whose table they append to, one after another, and whatever
    reads that table runs after them all, so it sees every flow's rows."""
    ordered = dict(nodes)
    for node in nodes.values():
        # (a ref to a disabled model is build_graph's to report)
        read = next((r for r in node.refs if r in nodes and nodes[r].config.flow_into), None)
        if read:
            raise ProjectError(f"ref('{read}') names a flow, which has no table of its own",
                               path=node.file.rel_path,
                               hint=f"read the table it flows into: "
                                    f"ref('{nodes[read].config.flow_into}')")
    for target in {c.config.flow_into for c in nodes.values() if c.config.flow_into}:
        flows = flows_into(nodes, target)
        for flow in flows:
            _check_flow(nodes[flow], nodes)
        for before, flow in zip([target, *flows], flows):
            ordered[flow] = replace(ordered[flow], after=(before,))
        for name, node in nodes.items():
            if target in node.refs:
                ordered[name] = replace(ordered[name], after=ordered[name].after + tuple(flows))
    return ordered


def check_flow_refresh(graph: Graph, chosen: list[str]) -> None:
    """--full-refresh replaces a streaming table and starts its flows over: all of them run
    together, or a flow's rows would be lost (the table refreshed alone) or doubled (a flow
    refreshed alone appends what the table has already)."""
    for name in chosen:
        target = graph.nodes[name].config.flow_into or name
        group = [target, *flows_into(graph.nodes, target)]
        missing = [n for n in group if n not in chosen]
        if len(group) > 1 and missing:
            raise ProjectError(
                f"--full-refresh of {name} replaces the table of {target}, which "
                f"{' and '.join(group[1:])} flow into; {', '.join(missing)} would not run again",
                path=graph.nodes[name].file.rel_path,
                hint=f"refresh them together: medallion build --full-refresh -s {target}+")


def build_graph(compiled: dict[str, CompiledNode]) -> Graph:
    nodes = _with_flow_order({n: c for n, c in compiled.items() if c.config.enabled})
    for node in nodes.values():
        for parent in node.parents:
            if parent not in nodes:
                raise ProjectError(f"ref('{parent}') names a disabled model",
                                   path=node.file.rel_path,
                                   hint=f"enable '{parent}' or disable this model too")
    children: dict[str, list[str]] = {n: [] for n in nodes}
    for node in nodes.values():
        for parent in node.parents:
            children[parent].append(node.name)
    pending = {n: len(set(c.parents)) for n, c in nodes.items()}
    ready = sorted(n for n, count in pending.items() if count == 0)
    order: list[str] = []
    while ready:
        order.extend(ready)
        nxt = []
        for name in ready:
            for child in children[name]:
                pending[child] -= 1
                if pending[child] == 0:
                    nxt.append(child)
        ready = sorted(set(nxt))
    if len(order) != len(nodes):
        cycle = _find_cycle(nodes, set(nodes) - set(order))
        # Printed in data-flow order: each model feeds the next.
        flow = list(reversed(cycle))
        raise ProjectError("dependency cycle: " + " -> ".join(flow),
                           path=nodes[flow[0]].file.rel_path,
                           hint="a model cannot depend on itself, directly or through others")
    return Graph(nodes, tuple(order), {n: tuple(c) for n, c in children.items()})
