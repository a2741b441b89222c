"""The DAG of models and seeds: ordering, cycle detection and node selection."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

from .errors import MedallionError, closest
from .rendering import CompiledNode


@dataclass(frozen=True)
class Graph:
    nodes: dict[str, CompiledNode]
    order: tuple[str, ...]  # topological, stable by name within a level
    children: dict[str, tuple[str, ...]]

    def parents(self, name: str) -> tuple[str, ...]:
        return self.nodes[name].parents

    def ancestors(self, name: str) -> set[str]:
        return _walk(name, self.parents)

    def descendants(self, name: str) -> set[str]:
        return _walk(name, lambda n: self.children.get(n, ()))


def _walk(start: str, step) -> set[str]:
    seen: set[str] = set()
    stack = list(step(start))
    while stack:
        name = stack.pop()
        if name not in seen:
            seen.add(name)
            stack.extend(step(name))
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


RESOURCE_TYPES = ("model", "seed", "test")


def _match(graph: Graph, selector: str) -> set[str]:
    """Nodes matched by one selector: name, tag:x, path:dir, layer:x, resource_type:x, with +/+
    graph operators."""
    up = selector.startswith("+")
    down = selector.endswith("+")
    core = selector.strip("+")
    method, _, value = core.partition(":") if ":" in core else ("name", "", core)
    if method == "name":
        if value not in graph.nodes:
            raise MedallionError(f"--select '{selector}': no model or seed named '{value}'. "
                                 f"{closest(value, graph.nodes)}".strip())
        matched = {value}
    elif method == "tag":
        matched = {n for n, c in graph.nodes.items() if value in c.config.tags}
    elif method == "layer":
        matched = {n for n, c in graph.nodes.items() if c.file.layer == value}
    elif method == "resource_type":
        if value not in RESOURCE_TYPES:
            raise MedallionError(f"--select '{selector}': unknown resource type '{value}'",
                                 hint="use resource_type:model, seed or test")
        matched = {n for n, c in graph.nodes.items() if c.file.kind == value}
    elif method == "path":
        want = PurePath(value.rstrip("/"))
        matched = {n for n, c in graph.nodes.items()
                   if PurePath(c.file.rel_path) == want or want in PurePath(c.file.rel_path).parents}
    else:
        raise MedallionError(f"--select '{selector}': unknown selector method '{method}'",
                             hint="use name, +name, name+, tag:x, path:models/silver, layer:gold "
                                  "or resource_type:model")
    result = set(matched)
    for name in matched:
        if up:
            result |= graph.ancestors(name)
        if down:
            result |= graph.descendants(name)
    return result


def _split(selectors) -> list[str]:
    return [part for s in selectors or () for part in s.replace(",", " ").split()]


def _models(graph: Graph, parts: list[str], tests) -> set[str]:
    """Models and seeds matched by the selectors that do not name a test."""
    return set().union(*(_match(graph, s) for s in parts if s not in tests))


def select(graph: Graph, selectors=(), excludes=(), tests=None) -> list[str]:
    """Selected node names in DAG order; no selectors selects everything. A selector that names
    a data test selects no model."""
    tests = tests or {}
    chosen = set(graph.nodes)
    if _split(selectors):
        chosen = _models(graph, _split(selectors), tests)
    chosen -= _models(graph, _split(excludes), tests)
    return [n for n in graph.order if n in chosen]


def select_tests(graph: Graph, tests, selectors=(), excludes=()) -> list[str]:
    """Data tests to run: those named, those tagged (tag:x), and those on selected models."""
    parts, out = _split(selectors), _split(excludes)
    models = {id(parts): _models(graph, parts, tests), id(out): _models(graph, out, tests)}

    def matched(name: str, chosen_parts: list[str]) -> bool:
        test = tests[name]
        if name in chosen_parts or any(p == f"tag:{t}" for p in chosen_parts for t in test.tags):
            return True
        if "resource_type:test" in chosen_parts:
            return True
        return bool(set(test.refs) & models[id(chosen_parts)])

    names = [n for n in tests if not parts or matched(n, parts)]
    return [n for n in names if not (out and matched(n, out))]
