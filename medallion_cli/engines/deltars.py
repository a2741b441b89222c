"""delta-rs's commits, which both engines make on a local warehouse (the embedded engine for
every table, delta-spark for the event log's few rows): custom metadata and app transactions
on a commit, one line for a commit that lost to a concurrent one, and tables delta-rs cannot
write refused by name. Also a table's row count and its columns without nulls, from its log,
which both engines read, and its columns with their types as Spark names them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeGuard

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.table import TableMerger

from ..core.error_text import CONCURRENT_COMMIT, DAMAGED_LOG_FIX
from ..core.errors import MedallionError
from ..storage.object_store import storage_options
from .base import FileLayout, Json, commit_metadata
from .sql import COLUMN_MAPPING, When


def open_table(path: str, version: int | None = None) -> DeltaTable:
    """The table at a location, local or on S3 (with the AWS settings); TableNotFoundError
    when there is none, and one line naming the damaged commit when its log cannot be read."""
    try:
        return DeltaTable(str(path), version=version, storage_options=storage_options(str(path)))
    except DeltaError as exc:
        if "Json error" not in str(exc):
            raise
        reason = str(exc).splitlines()[0]
        damaged = ", ".join(unreadable_commits(str(path))) or "one of its _delta_log/*.json files"
        raise MedallionError(
            f"the Delta log of this table cannot be read ({reason}): {damaged} is damaged or "
            "was not written whole", path=str(path),
            hint=DAMAGED_LOG_FIX) from None


def unreadable_commits(path: str) -> list[str]:
    """A local table's commit files that are not JSON lines (a truncated or garbled write)."""
    log = Path(path) / "_delta_log"
    if not log.is_dir():
        return []
    damaged = []
    for commit in sorted(log.glob("*.json")):
        try:
            for line in commit.read_text().splitlines():
                if line.strip():
                    json.loads(line)
        except (ValueError, OSError):
            damaged.append(str(commit))
    return damaged


def column_mapped(dt: DeltaTable) -> bool:
    """Whether the table's data files name its columns by Delta's column mapping (columns
    renamed or dropped in place, by delta-spark), which delta-rs 1.6 neither reads nor writes."""
    return dt.metadata().configuration.get(COLUMN_MAPPING, "none") != "none"


def changed_in_place(dt: DeltaTable) -> str | None:
    """What delta-spark changed of the table's columns in place that delta-rs 1.6 can neither
    write nor read alone (it reads a renamed column as nulls); None: nothing."""
    if column_mapped(dt):
        return "column mapping (columns renamed or dropped in place, on the delta-spark engine)"
    if "typeWidening" in (dt.protocol().writer_features or []):
        return "type widening (a column's type widened in place, on the delta-spark engine)"
    return None


def writable(dt: DeltaTable, path: str) -> DeltaTable:
    """The table, when delta-rs can commit to it: not one delta-spark clustered (cluster_by),
    nor one whose columns it changed in place (changed_in_place)."""
    why = ("liquid clustering (cluster_by, on the delta-spark engine)"
           if "clustering" in (dt.protocol().writer_features or []) else changed_in_place(dt))
    if why is not None:
        raise MedallionError(
            f"this table has {why}, which the embedded engine cannot write", path=path,
            hint="build it with a delta-spark target; the embedded engine still reads it")
    return dt


def commit_properties(metadata: Json | None, txn: tuple[str, int] | None
                      ) -> CommitProperties | None:
    """Commit properties: custom metadata, and the app transaction that makes a replay a no-op."""
    if not metadata and not txn:
        return None
    return CommitProperties(
        custom_metadata={"userMetadata": commit_metadata(metadata)} if metadata else None,
        app_transactions=[Transaction(*txn)] if txn else None)


def append_rows(rows: pa.Table, path: str, txn: tuple[str, int]) -> None:
    """Rows made in Python appended to a local table by delta-rs alone, no Spark job (the
    Engine contract's append_rows); nothing when `txn` is already in the table."""
    try:
        dt = writable(open_table(path), path)
    except TableNotFoundError:
        dt = None
    if replayed(dt, txn):
        return
    with one_writer(path):
        write_deltalake(dt if dt is not None else str(path), rows, mode="append",
                        schema_mode="merge" if dt is not None else None,
                        commit_properties=commit_properties(None, txn),
                        storage_options=None if dt is not None else storage_options(str(path)))


@contextmanager
def one_writer(path: str) -> Iterator[None]:
    """A commit that lost to a concurrent one (another build writing the same table) fails with
    one line; nothing of it is in the table."""
    try:
        yield
    except CommitFailedError as exc:
        raise MedallionError(CONCURRENT_COMMIT, path=path) from exc


def replayed(dt: DeltaTable | None, txn: tuple[str, int] | None) -> TypeGuard[DeltaTable]:
    """Whether the app transaction already committed this version (or a later one): then the
    write is a replay and must change nothing, as in Delta's own txnAppId/txnVersion."""
    if txn is None or dt is None:
        return False
    done = dt.transaction_version(txn[0])
    return done is not None and done >= txn[1]


def rows_in_stats(dt: DeltaTable) -> int | None:
    """The table's rows, from its files' statistics in the log: None when a file lacks them,
    or when deletion vectors may hide some of a file's rows."""
    if "deletionVectors" in (dt.protocol().reader_features or []):
        return None
    rows = pa.table(dt.get_add_actions(flatten=True)).column("num_records")
    return None if rows.null_count else sum(rows.to_pylist())


def columns_without_nulls(dt: DeltaTable) -> frozenset[str]:
    """The table's top-level columns that hold no null, by its files' statistics (a column some
    file lacks them for is left out). Deletion vectors only hide rows, so a file's count of 0
    holds for the rows they leave."""
    actions = pa.table(dt.get_add_actions(flatten=True))
    if not actions.num_rows:
        return frozenset()
    counted = {f.name: actions.column(f"null_count.{f.name}") for f in dt.schema().fields
               if f"null_count.{f.name}" in actions.column_names}
    return frozenset(name for name, nulls in counted.items()
                     if not nulls.null_count and not any(nulls.to_pylist()))


def file_layout(dt: DeltaTable, small_below: int) -> FileLayout:
    """The table's data files by their sizes in the log (no data file read)."""
    actions = pa.table(dt.get_add_actions(flatten=True))
    sizes = actions.column("size_bytes").to_pylist() if actions.num_rows else []
    return FileLayout.of_sizes(sizes, small_below)


# Delta's primitive type names that Spark's simpleString names otherwise
SPARK_NAMES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}


def spark_type(delta_type: Any) -> str:
    """A Delta schema type as Spark's simpleString: `bigint`, `decimal(12,2)`,
    `array<struct<sku:string,qty:int>>`."""
    kind = type(delta_type).__name__
    if kind == "ArrayType":
        return f"array<{spark_type(delta_type.element_type)}>"
    if kind == "MapType":
        return f"map<{spark_type(delta_type.key_type)},{spark_type(delta_type.value_type)}>"
    if kind == "StructType":
        return "struct<" + ",".join(f"{f.name}:{spark_type(f.type)}"
                                    for f in delta_type.fields) + ">"
    name = str(delta_type.type)
    return SPARK_NAMES.get(name, name)


def table_columns(dt: DeltaTable) -> dict[str, str]:
    """Column name -> its type as Spark names it, from the log (no data file read)."""
    return {f.name: spark_type(f.type) for f in dt.schema().fields}


def with_clause(merger: TableMerger, when: When) -> TableMerger:
    """A delta-rs MERGE with one more clause (engines/sql.merge_whens), in the order given."""
    if when.rows == "matched":
        return (merger.when_matched_delete(when.condition) if when.action == "delete" else
                merger.when_matched_update(when.values, predicate=when.condition))
    if when.rows == "not_matched":
        return merger.when_not_matched_insert(when.values, predicate=when.condition)
    return (merger.when_not_matched_by_source_delete(when.condition) if when.action == "delete"
            else merger.when_not_matched_by_source_update(when.values,
                                                           predicate=when.condition))
