"""The project as an editor sees it: loaded and rendered with the files' unsaved text, each
model's static checks (report/static_checks.py), and the columns and types of every relation,
for diagnostics, completion and hover. No JVM: built tables are read from their Delta logs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..commands.invocation import Invocation, Loaded, load
from ..core.errors import MedallionError
from ..report.static_checks import Finding, built_columns, check_models, input_columns

PROJECT_FILE = "medallion_project.yml"


@dataclass(frozen=True)
class Problem:
    """One diagnostic: a file (relative to the project), its 0-based line and column span."""
    path: str
    line: int
    start: int
    end: int
    message: str


@dataclass(frozen=True)
class Snapshot:
    root: Path
    loaded: Loaded | None  # None when the project does not load (error says why)
    error: MedallionError | None = None
    findings: list[Finding] = field(default_factory=list)
    columns: dict[str, dict[str, str]] = field(default_factory=dict)  # relation -> types
    texts: dict[str, str] = field(default_factory=dict)


def project_root(path: Path) -> Path | None:
    """The folder of the medallion_project.yml a file is under."""
    for folder in [path, *path.parents]:
        if (folder / PROJECT_FILE).is_file():
            return folder
    return None


def look(root: Path, texts: dict[str, str]) -> Snapshot:
    """The project with `texts` (rel path -> unsaved text) over its files: what a build
    would refuse, and every relation's columns."""
    try:
        loaded = load(Invocation(project_dir=str(root), texts=texts))
    except MedallionError as exc:
        return Snapshot(root, None, exc, texts=texts)
    project, graph = loaded.project, loaded.graph
    models = [n for n, node in graph.nodes.items() if node.sql is not None]
    columns = input_columns(project, graph, list(graph.nodes), built_columns, rebuilt=models)
    checked = check_models(project, graph, models, built_columns, rebuilt=models, texts=texts,
                           derived=columns)
    return Snapshot(root, loaded, None, checked.findings, columns, texts)


def problems(snapshot: Snapshot) -> list[Problem]:
    """The snapshot's diagnostics: the load's error, or each static check's finding."""
    if snapshot.error is not None:
        return [_error_problem(snapshot.root, snapshot.error)]
    found = []
    for finding in snapshot.findings:
        line = (finding.line or 1) - 1
        start = (finding.column or 1) - 1
        word = finding.sql_line[start:].split(" ", 1)[0].rstrip(",)") if finding.line else ""
        found.append(Problem(finding.path, line, start, start + max(len(word), 1),
                             finding.message))
    return found


def _error_problem(root: Path, error: MedallionError) -> Problem:
    """A load's error at its file and line (the project file when it names none)."""
    path = Path(error.path) if error.path else root / PROJECT_FILE
    if path.is_absolute():
        path = path.relative_to(root) if path.is_relative_to(root) else Path(PROJECT_FILE)
    message = error.message + (f" (hint: {error.hint})" if error.hint else "")
    return Problem(str(path), (error.line or 1) - 1, 0, 200, message)
