"""Node selection, in dbt's syntax.

--select takes selectors, separated by spaces (or given several times): their union. Within one,
`,` intersects criteria: `tag:nightly,layer:gold`. A criterion is a method and a value
(`tag:x`, `layer:gold`, `path:models/silver`, `resource_type:model`, `config.materialized:streaming`,
`state:modified` / `state:new` against an earlier manifest.json (--state), `source:NAME.TABLE`
(its data tests; with `+`, the models reading it), or a bare name, with `*` and `?` wildcards),
with graph operators: `+x` (x and its ancestors),
`2+x` (two generations up), `x+` / `x+1` (descendants), `@x` (x, its descendants and their
ancestors: all a descendant needs).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from ..core.config import CONFIG_KEYS
from ..core.errors import SelectionError, closest
from .graph import Graph

if TYPE_CHECKING:
    from ..core.nodes import CompiledNode
    from ..core.project import SourceTable
    from ..load.datatests import DataTest

Tests = Mapping[str, "DataTest"]  # a project's data tests by name
Previous = dict[str, Any] | None  # an earlier manifest's nodes by name (--state)

RESOURCE_TYPES = ("model", "seed", "test")
METHODS = ("name, tag:x, path:models/silver, layer:gold, resource_type:model, config.KEY:VALUE, "
           "state:modified, source:NAME.TABLE")
_CRITERION = re.compile(r"^(?P<at>@)?(?:(?P<up>\d*)\+)?(?P<core>[^+@]+?)(?:\+(?P<down>\d*))?$")
ALL = -1  # no depth limit


@dataclass(frozen=True)
class Criterion:
    text: str  # as the user wrote it
    method: str
    value: str
    up: int | None = None  # generations of ancestors added (ALL: every one)
    down: int | None = None
    at: bool = False

    def names_test(self, name: str, test: DataTest) -> bool:
        """Whether it picks this data test by itself (not through the models it is on)."""
        return ((self.method == "name" and fnmatch.fnmatchcase(name, self.value))
                or (self.method == "tag" and self.value in test.tags)
                or (self.method == "resource_type" and self.value == "test")
                or (self.method == "source" and any(_is_source(self.value, s)
                                                     for s in test.sources)))


def _is_source(pattern: str, key: tuple[str, str]) -> bool:
    """source:NAME or source:NAME.TABLE (wildcards allowed) names this source table."""
    return (fnmatch.fnmatchcase(f"{key[0]}.{key[1]}", pattern)
            or fnmatch.fnmatchcase(key[0], pattern))


def parse(text: str) -> Criterion:
    found = _CRITERION.match(text)
    if not found or (found["at"] and found["up"] is not None):
        raise SelectionError(f"--select '{text}': cannot read it as a selector",
                             hint=f"use {METHODS}, with +x, 2+x, x+, x+1 or @x")
    method, _, value = found["core"].partition(":") if ":" in found["core"] else (
        "name", "", found["core"])

    def depth(digits: str | None) -> int | None:
        return None if digits is None else int(digits) if digits else ALL

    return Criterion(text, method, value, depth(found["up"]), depth(found["down"]),
                     bool(found["at"]))


def _config_matches(node: CompiledNode, key: str, value: str) -> bool:
    actual = getattr(node.config, key)
    if isinstance(actual, (tuple, list)):
        return value in actual
    return str(actual).lower() == value.lower()


def checksum(node: CompiledNode) -> str:
    """What decides a node's table: its file as written, its rendered SQL and its config (the
    SQL shows what a changed macro or var did to it)."""
    facts = [node.file.path.read_text(), node.shown_sql, node.config.as_dict()]
    return hashlib.sha256(json.dumps(facts, default=str).encode()).hexdigest()


def _state(graph: Graph, c: Criterion, previous: Previous) -> set[str]:
    if previous is None:
        raise SelectionError(f"--select '{c.text}' compares with an earlier run",
                             hint="pass --state with the folder of that run's manifest.json")
    if c.value == "new":
        return {n for n in graph.nodes if n not in previous}
    if c.value == "modified":
        return {n for n, node in graph.nodes.items()
                if previous.get(n, {}).get("checksum") != checksum(node)}
    raise SelectionError(f"--select '{c.text}': unknown state '{c.value}'",
                         hint="use state:modified or state:new")


def _matched(graph: Graph, c: Criterion, tests: Tests, previous: Previous) -> set[str]:
    """Models and seeds the criterion's method and value pick, before graph operators."""
    nodes = graph.nodes.items()
    if c.method == "state":
        return _state(graph, c, previous)
    if c.method == "source":  # no model itself: with `+`, the models that read it, and theirs
        return set() if c.down is None else {
            n for n, node in nodes if any(_is_source(c.value, key) for key in node.sources)}
    if c.method == "name":
        if any(ch in c.value for ch in "*?["):
            return {n for n in graph.nodes if fnmatch.fnmatchcase(n, c.value)}
        if c.value in tests:  # a data test's name selects the test, and no model
            return set()
        if c.value not in graph.nodes:
            raise SelectionError(f"--select '{c.text}': no model or seed named '{c.value}'. "
                                 f"{closest(c.value, graph.nodes)}".strip())
        return {c.value}
    if c.method == "tag":
        return {n for n, node in nodes if c.value in node.config.tags}
    if c.method == "layer":
        return {n for n, node in nodes if node.file.layer == c.value}
    if c.method == "resource_type":
        if c.value not in RESOURCE_TYPES:
            raise SelectionError(f"--select '{c.text}': unknown resource type '{c.value}'",
                                 hint="use resource_type:model, seed or test")
        return {n for n, node in nodes if node.file.kind == c.value}
    if c.method == "path":
        want = PurePath(c.value.rstrip("/"))
        return {n for n, node in nodes if PurePath(node.file.rel_path) == want
                or want in PurePath(node.file.rel_path).parents}
    if c.method.startswith("config."):
        key = c.method.removeprefix("config.")
        if key not in CONFIG_KEYS:
            raise SelectionError(f"--select '{c.text}': no config key '{key}'. "
                                 f"{closest(key, CONFIG_KEYS)}".strip())
        return {n for n, node in nodes if _config_matches(node, key, c.value)}
    raise SelectionError(f"--select '{c.text}': unknown selector method '{c.method}'",
                         hint=f"use {METHODS}")


def _nodes(graph: Graph, c: Criterion, tests: Tests, previous: Previous) -> set[str]:
    """Models and seeds the criterion picks, with its graph operators."""
    matched = _matched(graph, c, tests, previous)
    result = set(matched)
    for name in matched:
        if c.up is not None:
            result |= graph.ancestors(name, c.up)
        if c.down is not None or c.at:
            below = graph.descendants(name, ALL if c.at or c.down is None else c.down)
            result |= below
            if c.at:
                result |= set[str]().union(*(graph.ancestors(d, ALL) for d in below))
    return result


def _selectors(texts: Iterable[str] | None) -> list[list[Criterion]]:
    """Each selector as the criteria it intersects."""
    return [[parse(part) for part in selector.split(",") if part]
            for text in texts or () for selector in text.split()]


def _union(graph: Graph, selectors: list[list[Criterion]], tests: Tests,
           previous: Previous) -> set[str]:
    return set[str]().union(*(set.intersection(*(_nodes(graph, c, tests, previous) for c in criteria))
                         for criteria in selectors))


def select(graph: Graph, selectors: Iterable[str] = (), excludes: Iterable[str] = (),
           tests: Tests | None = None, previous: Previous = None) -> list[str]:
    """Selected model and seed names in DAG order; no selectors selects everything.
    previous: an earlier manifest's nodes, for state:"""
    tests = tests or {}
    chosen, dropped = _selectors(selectors), _selectors(excludes)
    names = _union(graph, chosen, tests, previous) if chosen else set(graph.nodes)
    names -= _union(graph, dropped, tests, previous)
    return [n for n in graph.order if n in names]


def select_tests(graph: Graph, tests: Tests, selectors: Iterable[str] = (),
                 excludes: Iterable[str] = (), previous: Previous = None) -> list[str]:
    """Data tests to run: a selector picks a test when each of its criteria names the test
    (by name, tag or resource_type:test) or selects a model or seed the test is on."""
    chosen, dropped = _selectors(selectors), _selectors(excludes)
    nodes = {c: _nodes(graph, c, tests, previous) for s in chosen + dropped for c in s}

    def picked(name: str, selectors: list[list[Criterion]]) -> bool:
        test = tests[name]
        return any(all(c.names_test(name, test) or nodes[c] & set(test.refs) for c in s)
                   for s in selectors)

    return [n for n in tests if (not chosen or picked(n, chosen)) and not picked(n, dropped)]


def select_sources(sources: dict[tuple[str, str], SourceTable],
                   selectors: Iterable[str] = ()) -> list[SourceTable]:
    """The sources `source:NAME` or `source:NAME.TABLE` selectors name (wildcards allowed); no
    selectors: every source with freshness limits."""
    texts = [t for text in selectors or () for t in text.split()]
    if not texts:
        return [s for s in sources.values() if s.freshness]
    chosen = []
    for text in texts:
        method, _, value = text.partition(":")
        if method != "source" or not value:
            raise SelectionError(f"--select '{text}': sources are selected as source:NAME or "
                                 "source:NAME.TABLE")
        found = [s for key, s in sources.items() if _is_source(value, key)]
        if not found:
            names = [f"{n}.{t}" for n, t in sources]
            raise SelectionError(f"--select '{text}': no such source. "
                                 f"{closest(value, names)}".strip())
        chosen += [s for s in found if s not in chosen]
    return chosen
