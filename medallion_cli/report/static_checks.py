"""Static checks of each model's SELECT against its inputs' columns, before Spark starts: the
columns of built tables (their Delta logs, read by delta-rs), of sources' declared schemas, of
seeds and of upstream models (derived with sqlglot, columns.py), in DAG order. A column or
table alias the inputs do not have, or a column two inputs have, is one finding with the
file, line and column, the model's SQL line and the closest names in scope; so is each
finding of the rules over the qualified, typed SELECT (query_checks.py: group by, union
widths, functions, comparisons, contracts). A model whose inputs' columns are not all known
is not checked, and said so once; `static_checks: false` in a model's config silences a
check Medallion gets wrong.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Collection, Mapping

from sqlglot import exp

from ..core.errors import closest
from ..core.nodes import CompiledNode
from ..core.project import Project
from ..dag.graph import Graph
from ..load.model_config import MERGE_CLAUSE_KEYS
from .columns import analysed, frozen, inputs_of, relation_columns
from .query_checks import Found, query_findings

UNRESOLVED = re.compile(r"Column '(?P<name>[^']+)' could not be resolved"
                        r"(?: for table: '(?P<table>[^']+)')?")
UNKNOWN = re.compile(r"Unknown column: (?P<name>\S+)")


@dataclass(frozen=True)
class Finding:
    model: str
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
                 table_columns: Callable[[str], dict[str, str] | None],
                 rebuilt: Collection[str] = (), texts: Mapping[str, str] | None = None,
                 derived: dict[str, dict[str, str]] | None = None) -> Checked:
    """The named models' findings, each against the columns its inputs have (rebuilt: models
    a build writes before what reads them, whose SELECT's columns win over their table's;
    texts: files as an editor holds them, rel path -> text; derived: input_columns' answer,
    when the caller has it)."""
    if derived is None:
        derived = input_columns(project, graph, names, table_columns, rebuilt)
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
        written = (texts or {}).get(node.file.rel_path) or node.file.path.read_text()
        findings += [_placed(node, written, *found) for found in _check(node, schema)]
    return Checked(findings, unchecked)


def input_columns(project: Project, graph: Graph, names: list[str],
                  table_columns: Callable[[str], dict[str, str] | None],
                  rebuilt: Collection[str] = ()) -> dict[str, dict[str, str]]:
    """The columns and types of the named models and all they read (columns.py)."""
    needed = set(names).union(*(graph.ancestors(n) for n in names))
    return relation_columns(project, graph, table_columns, derive_types=True, rebuilt=rebuilt,
                            needed=needed)


def built_columns(path: str) -> dict[str, str] | None:
    """A table's columns from its Delta log, whichever engine wrote it (delta-rs, no JVM);
    None when there is none or delta-rs cannot read it (its models go unchecked)."""
    from ..engines.deltars import open_table, table_columns

    try:
        return table_columns(open_table(path))
    except Exception:  # noqa: BLE001 - a table this cannot read is Spark's to read
        return None


def refusals(project: Project, graph: Graph, names: list[str]) -> dict[str, str]:
    """The models a build of `names` fails before Spark starts -> the one line it says: the
    first finding, and how many more."""
    found: dict[str, list[Finding]] = {}
    models = [n for n in names if graph.nodes[n].sql is not None]
    # What the build writes counts as its files say: only the tables it reads as they are
    # (unselected parents) are opened, on object storage a few requests each.
    for finding in check_models(project, graph, models, built_columns, rebuilt=names).findings:
        found.setdefault(finding.model, []).append(finding)
    return {name: str(first[0]).splitlines()[0] + (
        f" (and {len(first) - 1} more: medallion compile lists them)" if len(first) > 1 else "")
        + " (a static check: static_checks: false in its config if it is wrong)"
        for name, first in found.items()}


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


# An editor checks the project at each edit: a model's findings are kept while its SQL,
# contract and inputs' columns are unchanged (a few thousand models' worth at most).
CHECKED: dict[tuple[Any, ...], list[Found]] = {}
KEPT = 4096


def _check(node: CompiledNode, schema: dict[str, dict[str, str]]) -> list[Found]:
    """The node's findings: a column qualify cannot resolve, else the rules' findings."""
    key = (node.file.rel_path, node.sql, frozen(schema), json.dumps(
        [node.config.contract, node.file.columns, node.file.properties,
         *(getattr(node.config, key) for key in MERGE_CLAUSE_KEYS)], default=str))
    if key not in CHECKED:
        if len(CHECKED) >= KEPT:
            CHECKED.clear()
        CHECKED[key] = _check_now(node, schema)
    return CHECKED[key]


def _check_now(node: CompiledNode, schema: dict[str, dict[str, str]]) -> list[Found]:
    assert node.sql is not None
    analysis = analysed(node.sql, schema)
    if analysis.tree is None:  # (a parse error is load/sqlcheck.py's to say)
        unresolved = analysis.partial is not None and _described(analysis.error,
                                                                 analysis.partial, schema)
        return [unresolved] if unresolved else []
    in_scope = {column for relation in schema.values() for column in relation}
    try:
        return query_findings(node, analysis.tree, in_scope)
    except Exception:  # noqa: BLE001 - SQL sqlglot cannot follow is Spark's to judge
        return []


def _described(error: str, tree: exp.Expr, schema: dict[str, dict[str, str]]) -> Found | None:
    said = UNRESOLVED.search(error) or UNKNOWN.search(error)
    if not said:
        return None
    name = said.group("name").strip('"`')
    table = said.groupdict().get("table")
    # the columns as written first (qualify adds some, e.g. expanding a star, with no place)
    named = sorted((c for c in tree.find_all(exp.Column) if c.name == name),
                   key=lambda c: "line" not in c.this.meta)
    column = next((c for c in named if c.table == table), named[0] if named else None)
    meta = column.this.meta if column is not None else {}
    aliases = {t.alias_or_name: t.name for t in tree.find_all(exp.Table) if t.name in schema}
    holders = sorted(a for a, relation in aliases.items() if name in schema[relation])
    written = column is not None and not column.meta.get("unqualified")
    qualifier = column.table if written and column is not None else ""
    if qualifier in aliases:
        relation = aliases[qualifier]
        others = ", ".join(f"{h}.{name}" for h in holders)
        hint = (f"{others} has it" if others else
                closest(name, schema.get(relation, {})) or f"{relation} has no such column")
        message = f"'{qualifier}' ({relation}) has no column '{name}'; {hint}"
    elif qualifier:
        message = f"no relation '{qualifier}' with a column '{name}' in scope"
    elif len(holders) > 1:
        message = (f"column '{name}' is ambiguous: {' and '.join(holders)} both have it; "
                   f"qualify it, e.g. {holders[0]}.{name}")
    else:
        in_scope = {column for columns in schema.values() for column in columns}
        suggestion = closest(name, in_scope)
        message = f"unknown column '{name}'" + (f"; {suggestion}" if suggestion else "")
    return message, name, meta.get("line"), meta.get("col")


def _placed(node: CompiledNode, text_written: str, message: str, name: str,
            line: int | None, col: int | None) -> Finding:
    """The finding at its line in the model's file: the rendered line found as written, else
    the first line naming it (Jinja moves lines)."""
    assert node.sql is not None
    written = text_written.splitlines()
    rendered = node.sql.splitlines()
    text = rendered[line - 1] if line and line <= len(rendered) else ""
    at = next((i for i, w in enumerate(written) if text.strip() and w.strip() == text.strip()),
              None)
    if at is None:
        word = re.compile(rf"\b{re.escape(name)}\b")
        at = next((i for i, w in enumerate(written) if word.search(w)), None)
    if at is None:
        return Finding(node.name, node.file.rel_path, None, None, message, text)
    found = re.search(rf"\b{re.escape(name)}\b", written[at])
    return Finding(node.name, node.file.rel_path, at + 1, found.start() + 1 if found else col,
                   message, written[at])
