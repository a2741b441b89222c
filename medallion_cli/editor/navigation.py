"""Where a name in a model leads, what can be typed at a place, and what a column is: the
language server's definition, completion and hover, as plain functions over a Snapshot
(workspace.py) and the file's text. Lines and characters are 0-based, as in LSP.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..core.nodes import CompiledNode
from ..report.columns import column_lineage
from .workspace import Snapshot

REF = re.compile(r"""\bref\(\s*['"](?P<name>[^'"]+)['"]""")
SOURCE = re.compile(r"""\bsource\(\s*['"](?P<source>[^'"]+)['"]\s*,\s*['"](?P<table>[^'"]+)['"]""")
CALL = re.compile(r"\b(?P<name>[A-Za-z_]\w*)\s*\(")
WORD = re.compile(r"\w+")
TYPING_REF = re.compile(r"""\bref\(\s*['"]\w*$""")
TYPING_SOURCE = re.compile(r"""\bsource\(\s*['"]\w*$""")
TYPING_TABLE = re.compile(r"""\bsource\(\s*['"](?P<source>\w+)['"]\s*,\s*['"]\w*$""")


@dataclass(frozen=True)
class Place:
    path: Path  # absolute
    line: int


@dataclass(frozen=True)
class Item:
    label: str
    kind: str  # "model" | "seed" | "source" | "table" | "column"
    detail: str


def _line(text: str, line: int) -> str:
    lines = text.splitlines()
    return lines[line] if 0 <= line < len(lines) else ""


def _under(pattern: re.Pattern[str], text: str, character: int) -> re.Match[str] | None:
    return next((m for m in pattern.finditer(text) if m.start() <= character <= m.end()), None)


def _line_of(path: Path, pattern: str) -> int | None:
    """The first line of a file matching pattern, if one does."""
    found = re.compile(pattern)
    lines = path.read_text().splitlines() if path.is_file() else []
    return next((i for i, line in enumerate(lines) if found.search(line)), None)


def definition(snapshot: Snapshot, text: str, line: int, character: int) -> Place | None:
    """The file a ref(), a source() or a macro call at the place is defined in."""
    if snapshot.loaded is None:
        return None
    project, graph = snapshot.loaded.project, snapshot.loaded.graph
    here = _line(text, line)
    ref = _under(REF, here, character)
    if ref and ref["name"] in graph.nodes:
        return Place(graph.nodes[ref["name"]].file.path, 0)
    source = _under(SOURCE, here, character)
    if source and (source["source"], source["table"]) in project.sources:
        origin = project.root / project.sources[(source["source"], source["table"])].origin
        table = rf"name:\s*['\"]?{re.escape(source['table'])}\b"
        return Place(origin, _line_of(origin, table) or 0)
    call = _under(CALL, here, character)
    if call:
        macro = rf"{{%-?\s*macro\s+{re.escape(call['name'])}\s*\("
        for path in project.macro_files:
            at = _line_of(path, macro)
            if at is not None:
                return Place(path, at)
    return None


def model_at(snapshot: Snapshot, rel_path: str) -> CompiledNode | None:
    if snapshot.loaded is None:
        return None
    return next((n for n in snapshot.loaded.graph.nodes.values()
                 if n.file.rel_path == rel_path), None)


def completions(snapshot: Snapshot, rel_path: str, text: str, line: int,
                character: int) -> list[Item]:
    """Model and seed names in ref(''), sources and their tables in source('', ''), else the
    columns of what the model reads."""
    if snapshot.loaded is None:
        return []
    project, graph = snapshot.loaded.project, snapshot.loaded.graph
    typed = _line(text, line)[:character]
    if TYPING_REF.search(typed):
        return [Item(name, node.file.kind, f"{node.file.kind} in {node.file.layer or 'models'}"
                     f" ({node.config.materialized})")
                for name, node in sorted(graph.nodes.items())]
    table = TYPING_TABLE.search(typed)
    if table:
        return [Item(name, "table", f"{table['source']}.{name}: {s.format} at {s.path}")
                for (source, name), s in sorted(project.sources.items())
                if source == table["source"]]
    if TYPING_SOURCE.search(typed):
        return [Item(source, "source", f"source with {tables} table(s)")
                for source, tables in sorted(Counter(s for s, _ in project.sources).items())]
    node = model_at(snapshot, rel_path)
    if node is None:
        return []
    relations = [*node.refs, *(project.sources[key].relation for key in node.sources)]
    return [Item(column, "column", f"{kind or 'type not known'} · {relation}")
            for relation in relations for column, kind in
            snapshot.columns.get(relation, {}).items()]


def hover(snapshot: Snapshot, rel_path: str, text: str, line: int, character: int
          ) -> str | None:
    """Markdown for the column under the place: the model's own column (its type, its
    description, else that of the one input column it comes from, and where it comes from),
    or the column of an input it names."""
    node = model_at(snapshot, rel_path)
    word = _under(WORD, _line(text, line), character)
    if node is None or word is None or snapshot.loaded is None:
        return None
    name, project = word.group(), snapshot.loaded.project
    own = snapshot.columns.get(node.name, {})
    if name in own:
        lineage = column_lineage(project, node, name, snapshot.columns)
        inherited = [_description(snapshot, *origin.rsplit(".", 1)) for origin in lineage]
        return _described(f"{node.name}.{name}", own[name],
                          _description(snapshot, node.name, name) or
                          (inherited[0] if len(inherited) == 1 else ""),
                          "from " + ", ".join(_labelled(snapshot, o) for o in lineage)
                          if lineage else "")
    for relation in [*node.refs, *(project.sources[k].relation for k in node.sources)]:
        kind = snapshot.columns.get(relation, {}).get(name)
        if kind is not None:
            return _described(_labelled(snapshot, f"{relation}.{name}"), kind,
                              _description(snapshot, relation, name), "")
    return None


def _documented(snapshot: Snapshot, relation: str) -> tuple[object, ...]:
    """The columns a model's, seed's or source's properties document."""
    assert snapshot.loaded is not None
    node = snapshot.loaded.graph.nodes.get(relation)
    if node is not None:
        return node.file.columns
    return next((s.columns for s in snapshot.loaded.project.sources.values()
                 if s.relation == relation), ())


def _description(snapshot: Snapshot, relation: str, name: str) -> str:
    return next((str(c.get("description") or "") for c in _documented(snapshot, relation)
                 if isinstance(c, dict) and c.get("name") == name), "")


def _labelled(snapshot: Snapshot, column: str) -> str:
    """`relation.column` as the model names it: a source's as source.table."""
    assert snapshot.loaded is not None
    relation, name = column.rsplit(".", 1)
    source = next((s for s in snapshot.loaded.project.sources.values()
                   if s.relation == relation), None)
    return f"{source.source}.{source.name}.{name}" if source else column


def _described(title: str, kind: str, description: str, lineage: str) -> str:
    parts = [f"**{title}** `{kind or 'type not known'}`", description, lineage]
    return "\n\n".join(part for part in parts if part)
