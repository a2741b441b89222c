"""A rendered node as data: its SQL, config and what it reads (CompiledNode), what rendering
recorded of its Jinja (Recorded), the relation names its inputs get in Spark SQL, and secret
values masked wherever SQL is shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .config import NodeConfig
from .project import NodeFile

# env_var() values of variables named so are credentials: they are in the SQL Spark runs, but
# masked wherever SQL is written down (target/compiled, manifest.json, the docs page).
SECRET_ENV_PREFIX = "MEDALLION_SECRET_"


MASK = "*****"


def masked(text: str | None, secrets: tuple[str, ...]) -> str | None:
    for secret in secrets:
        if text is not None and secret:
            text = text.replace(secret, MASK)
    return text


@dataclass(frozen=True)
class CompiledNode:
    file: NodeFile
    config: NodeConfig
    sql: str | None  # None for seeds
    refs: tuple[str, ...]
    sources: tuple[tuple[str, str], ...]
    is_incremental: bool
    secrets: tuple[str, ...] = ()  # values of secret env_var()s in the SQL
    change_refs: tuple[str, ...] = ()  # refs read as their change feed: ref('x', changes=true)
    feed_only: tuple[str, ...] = ()  # of those, the ones never read as themselves
    # its SQL asked `execute` or called run_query(): rendered again when it runs (materialize/execute.py)
    executes: bool = False
    after: tuple[str, ...] = ()  # nodes it runs after beside its refs (graph.py: flows)
    # its SQL with is_incremental() true, as it runs once its table exists (None for seeds)
    incremental_sql: str | None = None
    asks_incremental: bool = False  # its SQL calls is_incremental(): it can read new rows only

    @property
    def shown_sql(self) -> str | None:
        """The SQL as written down for people: secrets masked."""
        return masked(self.sql, self.secrets)

    @property
    def name(self) -> str:
        return self.file.name

    @property
    def parents(self) -> tuple[str, ...]:
        return self.refs + self.after


def relation(name: str) -> str:
    """How a model, seed or source is named in compiled SQL (a temp view the engine registers)."""
    return f"`{name}`"


def changes_relation(name: str) -> str:
    """The temp view of a ref's change feed (ref('x', changes=true)). Temp views take plain
    identifiers only; the leading `__` keeps this one apart from sources' (`source__table`)."""
    return f"__changes__{name}"


@dataclass
class Recorded:
    """What rendering one file recorded: its config() calls and the relations it named."""

    origin: str
    captured: dict[str, Any] = field(default_factory=dict)
    refs: list[str] = field(default_factory=list)
    sources: list[tuple[str, str]] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)
    change_refs: list[str] = field(default_factory=list)
    direct_refs: set[str] = field(default_factory=set)  # refs read as themselves
    executes: bool = False  # it asked `execute` or called run_query()
