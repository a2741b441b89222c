"""The DAG of models and seeds: ordering and cycle detection (selection.py selects from it)."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import MedallionError
from .rendering import CompiledNode


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


def _walk(start: str, step, depth: int) -> set[str]:
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


def build_graph(compiled: dict[str, CompiledNode]) -> Graph:
    nodes = {n: c for n, c in compiled.items() if c.config.enabled}
    for node in nodes.values():
        for parent in node.parents:
            if parent not in nodes:
                raise MedallionError(f"ref('{parent}') names a disabled model",
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
        raise MedallionError("dependency cycle: " + " -> ".join(flow),
                             path=nodes[flow[0]].file.rel_path,
                             hint="a model cannot depend on itself, directly or through others")
    return Graph(nodes, tuple(order), {n: tuple(c) for n, c in children.items()})
