"""Facts about a Delta table read from its log alone, with delta-rs (no JVM, either engine's
tables): its version, its rows, files and bytes, and the newest value of a column, from the
files' statistics."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pyarrow as pa
from deltalake.exceptions import TableNotFoundError

from ..engines.deltars import open_table


@dataclass(frozen=True)
class TableFacts:
    version: int
    rows: int | None  # None when a file lacks statistics
    newest: dt.datetime | None  # the newest value of the column asked for, when known
    files: int = 0  # the data files a full read opens
    bytes: int = 0


def as_utc(value: dt.date | None) -> dt.datetime | None:
    """A timestamp or date statistic as an aware UTC time (a timestamp without zone is UTC)."""
    if value is None:
        return None
    moment = value if isinstance(value, dt.datetime) else dt.datetime.combine(value, dt.time())
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def table_facts(path: str, column: str | None = None) -> TableFacts | None:
    """The table's facts now (None when there is no table); `column`: whose newest value."""
    try:
        table = open_table(path)
    except TableNotFoundError:
        return None
    actions = pa.table(table.get_add_actions(flatten=True))
    records = actions.column("num_records") if actions.num_rows else pa.array([], pa.int64())
    rows = None if records.null_count else sum(records.to_pylist())
    newest = None
    field = f"max.{column}"
    if column and field in actions.column_names:
        # A file whose values are all null has none: the others' maximum is the table's.
        values = [v for v in actions.column(field).to_pylist() if v is not None]
        newest = as_utc(max(values, default=None))
    sizes = actions.column("size_bytes").to_pylist() if actions.num_rows else []
    return TableFacts(table.version(), rows, newest, actions.num_rows, sum(sizes))


def newest_value(path: str, column: str) -> dt.datetime | None:
    facts = table_facts(path, column)
    return facts.newest if facts else None
