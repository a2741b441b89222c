"""Static checks of each model's SELECT against its inputs' columns, before Spark starts: the
columns of built tables (their Delta logs, read by delta-rs), of sources' declared schemas, of
seeds and of upstream models (derived with sqlglot, columns.py), in DAG order. A column or
table alias the inputs do not have, or a column two inputs have, is one finding with the
file, line and column, the model's SQL line and the closest names in scope. A model whose
inputs' columns are not all known is not checked, and said so once; `static_checks: false`
in a model's config silences a check Medallion gets wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, ParseError
from sqlglot.optimizer.qualify import qualify

from ..core.errors import closest
from ..core.nodes import CompiledNode
from ..core.project import Project
from ..dag.graph import Graph
from .columns import inputs_of, relation_columns, typed

UNRESOLVED = re.compile(r"Column '(?P<name>[^']+)' could not be resolved"
                        r"(?: for table: '(?P<table>[^']+)')?")
UNKNOWN = re.compile(r"Unknown column: (?P<name>\S+)")


@dataclass(frozen=True)
class Finding:
    path: str  # the model's file
    line: int | None  # in the file (None: not found there)
    column: int | None
    message: str
    sql_line: str  # the model's line as written

    def __str__(self) -> str:
        where = ":".join([self.path] + [str(v) for v in (self.line, self.column) if v])
        return f"{where}: {self.message}" + (f"\n    {self.sql_line.strip()}" if self.sql_line
                                              else "")


@dataclass(frozen=True)
class Checked:
    findings: list[Finding]
    unchecked: dict[str, str]  # model -> why its inputs' columns are not known


def check_models(project: Project, graph: Graph, names: list[str],
                 table_columns: Callable[[str], dict[str, str] | None]) -> Checked:
    """The named models' findings, each against the columns its inputs have."""
    derived = relation_columns(project, graph, table_columns)
    findings: list[Finding] = []
    unchecked: dict[str, str] = {}
    for name in names:
        node = graph.nodes[name]
        if node.sql is None or not node.config.static_checks:
            continue
        schema, unknown = _inputs(project, node, derived)
        if unknown:
            unchecked[name] = f"the columns of {unknown} are not known"
            continue
        found = _check(node, schema)
        if found:
            findings.append(_placed(project, node, *found))
    return Checked(findings, unchecked)


def _inputs(project: Project, node: CompiledNode, derived: dict[str, dict[str, str]]
            ) -> tuple[dict[str, dict[str, str]], str]:
    """Each relation the model reads with its columns, or the first whose are not known."""
    for ref in node.refs:
        if not derived.get(ref):
            return {}, ref
    for key in node.sources:
        source = project.sources[key]
        if not derived.get(source.relation):
            return {}, (f"source('{source.source}', '{source.name}') (declare its schema in "
                        f"{source.origin})")
    return inputs_of(project, node, derived), ""


def _check(node: CompiledNode, schema: dict[str, dict[str, str]]
           ) -> tuple[str, str, int | None, int | None] | None:
    """(message, the name to find in the file, line, column in the rendered SQL)."""
    assert node.sql is not None
    try:
        tree = sqlglot.parse_one(node.sql, read="spark")
        qualify(tree, schema=typed(schema), dialect="spark", validate_qualify_columns=True)
    except ParseError:
        return None  # load/sqlcheck.py says what does not parse
    except OptimizeError as exc:
        return _described(str(exc), tree, schema)
    except Exception:  # noqa: BLE001 - SQL sqlglot cannot follow is Spark's to judge
        return None
    return None


def _described(error: str, tree: exp.Expr, schema: dict[str, dict[str, str]]
               ) -> tuple[str, str, int | None, int | None] | None:
    said = UNRESOLVED.search(error) or UNKNOWN.search(error)
    if not said:
        return None
    name = said.group("name").strip('"`')
    table = said.groupdict().get("table")
    in_scope = {column for columns in schema.values() for column in columns}
    column = next((c for c in tree.find_all(exp.Column) if c.name == name
                   and (not table or c.table == table)), None)
    meta = column.this.meta if column is not None else {}
    if table:
        message = f"no relation '{table}' with a column '{name}' in scope"
    elif sum(name in columns for columns in schema.values()) > 1:
        holders = sorted(r for r, columns in schema.items() if name in columns)
        message = (f"column '{name}' is ambiguous: {' and '.join(holders)} both have it; "
                   f"qualify it, e.g. {holders[0]}.{name}")
    else:
        message = f"unknown column '{name}'"
        suggestion = closest(name, in_scope)
        message += f"; {suggestion}" if suggestion else ""
    return message, name, meta.get("line"), meta.get("col")


def _placed(project: Project, node: CompiledNode, message: str, name: str,
            line: int | None, col: int | None) -> Finding:
    """The finding at its line in the model's file: the rendered line found as written, else
    the first line naming it (Jinja moves lines)."""
    assert node.sql is not None
    written = node.file.path.read_text().splitlines()
    rendered = node.sql.splitlines()
    text = rendered[line - 1] if line and line <= len(rendered) else ""
    at = next((i for i, w in enumerate(written) if text.strip() and w.strip() == text.strip()),
              None)
    if at is None:
        word = re.compile(rf"\b{re.escape(name)}\b")
        at = next((i for i, w in enumerate(written) if word.search(w)), None)
    if at is None:
        return Finding(node.file.rel_path, None, None, message, text)
    found = re.search(rf"\b{re.escape(name)}\b", written[at])
    return Finding(node.file.rel_path, at + 1, found.start() + 1 if found else col, message,
                   written[at])
