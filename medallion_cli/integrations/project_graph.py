"""What an orchestrator schedules of a project, read without Spark: its models and seeds with
their layer, description and parents, and each data test with the node it checks."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .. import commands
from ..commands.invocation import load

DECLARED_ON = re.compile(r"^(?:models|seeds)\[([^\]]+)\]")


@dataclass(frozen=True)
class Node:
    name: str
    layer: str
    kind: str  # model | seed
    description: str
    parents: tuple[str, ...]  # models and seeds it reads


@dataclass(frozen=True)
class Check:
    name: str
    node: str  # the model or seed it is declared on, else the one it reads
    severity: str  # error | warn


def project_graph(inv: commands.Invocation) -> tuple[list[Node], list[Check]]:
    """The project's nodes in DAG order, and the data tests that check one node each (a test
    reading several, declared on none, runs in the builds all the same)."""
    loaded = load(inv)
    graph = loaded.graph
    nodes = []
    for name in graph.order:  # topological: Dagster refuses a multi-asset's outputs otherwise
        compiled = graph.nodes[name]
        nodes.append(Node(name, compiled.file.layer, compiled.file.kind,
                          compiled.file.description,
                          tuple(p for p in compiled.parents if p in graph.nodes)))
    checks = []
    for test in loaded.tests.values():
        declared = DECLARED_ON.match(test.key)
        node = declared[1] if declared else (test.refs[0] if len(test.refs) == 1 else None)
        if node in graph.nodes:
            checks.append(Check(test.name, node, test.severity))
    return nodes, checks
