"""User-facing errors: each names the file (and line), says what is wrong and what to do."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


class MedallionError(Exception):
    """A project or usage error. The CLI prints it without a traceback and exits with 2."""

    exit_code = 2

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None,
                 hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.hint = hint

    def __str__(self) -> str:
        where = ""
        if self.path:
            where = f"{self.path}, line {self.line}: " if self.line else f"{self.path}: "
        text = f"{where}{self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class ProjectError(MedallionError):
    """The project's own files ask for what cannot be: medallion_project.yml, profiles.yml, a
    model's SQL or config, a property file, a source (load/, the DAG in dag/graph.py)."""


class CapabilityError(ProjectError):
    """The target's engine cannot do what the project asks of it (its declared capabilities,
    engines/base.py): a store, a Spark Connect server, a catalog, liquid clustering."""


class SelectionError(MedallionError):
    """--select, --exclude or a selector that cannot be read or names nothing there is."""


class LockHeld(MedallionError):
    """Another command is writing this warehouse: its lock here, or its lease on S3."""


class SourceError(MedallionError):
    """A node's input cannot be read as it is declared: landing files, a topic, a table that
    has not been built."""


class WriteError(MedallionError):
    """A write refused before anything was committed: a schema change its table does not
    allow, keys a MERGE cannot order."""


class RunStopped(MedallionError):
    """An error that stops the whole run as one usage error, not each node that meets it."""


class StartError(RunStopped):
    """Spark (or what it needs: Java, a master, the Delta JARs) did not start. Spark starts when
    a node first needs it, so this stops the whole run, not each node."""


def closest(name: str, candidates: Iterable[str]) -> str:
    """A 'did you mean' phrase naming the closest candidates (up to three, as close as the
    closest within a tenth: 'amont' gets 'amount' alone, not 'account' too), or ''."""
    import difflib

    matches = difflib.get_close_matches(name, sorted(candidates), n=3, cutoff=0.5)
    ratios = [difflib.SequenceMatcher(None, name, m).ratio() for m in matches]
    near = [m for m, ratio in zip(matches, ratios) if ratio >= max(ratios, default=0) - 0.1]
    return f"did you mean {', '.join(repr(m) for m in near)}?" if near else ""
