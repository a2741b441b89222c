"""`medallion source freshness`: how old the newest data of each source is, against its limits.

As dbt's: a source's `loaded_at_field` gives when each row was loaded (its newest value is read
with Spark); without one, the source's own metadata says it: the newest landing file's time, or
the Delta source's last commit (no Spark needed). Levels as in `medallion status`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..core.errors import MedallionError
from ..core.locations import data_files, is_remote
from ..core.project import SourceTable
from .status import freshness_level

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# How a source's rows are read (with Spark): its DataFrame
ReadSource = Callable[[SourceTable], "DataFrame"]


@dataclass(frozen=True)
class SourceFreshness:
    name: str  # source.table
    newest: dt.datetime | None
    age_seconds: float | None
    level: str | None  # pass | warn | error; None without limits
    reason: str
    basis: str  # what `newest` was read from

    @property
    def as_json(self) -> dict[str, Any]:
        return {"source": self.name, "newest": self.newest.isoformat() if self.newest else None,
                "age_seconds": self.age_seconds, "status": self.level, "reason": self.reason,
                "basis": self.basis}


def _newest_file(folder: Path) -> dt.datetime | None:
    times = [p.stat().st_mtime for p in data_files(folder)]
    return dt.datetime.fromtimestamp(max(times), dt.timezone.utc) if times else None


def _last_commit(path: str) -> dt.datetime | None:
    from ..engines.deltars import open_table

    last = open_table(path).history(1)
    return (dt.datetime.fromtimestamp(last[0]["timestamp"] / 1000, dt.timezone.utc)
            if last else None)


def _newest_loaded(read: ReadSource, source: SourceTable) -> dt.datetime | None:
    """The newest `loaded_at_field` value, read with Spark (as exact microseconds)."""
    from ..spark.pyspark_api import F

    rows = read(source)  # first: it starts Spark, which F.col needs
    column = F.col(f"`{source.loaded_at_field}`").cast("timestamp")
    newest = rows.agg(F.max(F.unix_micros(column))).first()
    micros = None if newest is None else newest[0]
    return (dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=micros)
            if micros is not None else None)


def newest(source: SourceTable, read: ReadSource) -> tuple[dt.datetime | None, str]:
    """(the newest load time, what it was read from)."""
    if source.loaded_at_field:
        return _newest_loaded(read, source), f"newest {source.loaded_at_field}"
    if source.format == "delta":
        return _last_commit(source.path), "last commit"
    if source.format == "kafka" or is_remote(source.path):
        raise MedallionError(f"source '{source.source}.{source.name}' has freshness limits but "
                             "no loaded_at_field", path=source.origin,
                             hint="name the column saying when each row was loaded, e.g. "
                                  "loaded_at_field: timestamp")
    return _newest_file(Path(source.path)), "newest file"


def source_freshness(sources: list[SourceTable], read: ReadSource,
                     at: dt.datetime) -> list[SourceFreshness]:
    """Each source's freshness; read(source) gives its rows as a DataFrame (Spark)."""
    found = []
    for source in sources:
        when, basis = newest(source, read)
        age = (at - when).total_seconds() if when else None
        level, reason = freshness_level(source.freshness, age)
        found.append(SourceFreshness(f"{source.source}.{source.name}", when, age, level, reason,
                                     basis))
    return found
