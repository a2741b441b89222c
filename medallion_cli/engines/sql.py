"""All of medallion's SQL text, as plain functions of their inputs: quoting and table names,
the conditions and values a MERGE is made of (read by both engines' SQL: Spark's and delta-rs's
DataFusion), and the statements the delta-spark engine runs (MERGE, time travel), which tests
check with sqlglot's Spark dialect without a cluster or the Delta JARs."""

from __future__ import annotations

from collections.abc import Callable

from .base import MergeSpec

# A column's name as SQL on one side of a MERGE (`s.amount`, `t."amount"`)
Side = Callable[[str], str]

SOURCE, TARGET = "s", "t"


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def table(path: str) -> str:
    """A Delta table by path, as Delta's SQL names it."""
    return f"delta.{quote(path)}"


def updated_value(spec: MergeSpec, column: str, source: Side, target: Side) -> str:
    """SQL: the value a matched row's column is updated to."""
    if column in spec.added:
        return f"coalesce(coalesce({target(column)}, 0) + {source(column)}, {target(column)})"
    if spec.ignore_nulls and column not in spec.keys:
        return f"coalesce({source(column)}, {target(column)})"
    return source(column)


def deleted_condition(spec: MergeSpec, source: Side, target: Side) -> str | None:
    """SQL: a matched row is deleted (the spec's delete column, or no rows left in its group
    once the source's are added), None when no row is."""
    if spec.added_rows:
        return f"{target(spec.added_rows)} + {source(spec.added_rows)} <= 0"
    return source(spec.delete_column) if spec.delete_column else None


def inserted_condition(spec: MergeSpec, source: Side) -> str | None:
    """SQL: an unmatched source row is inserted (not a delete; rows to add), None: every one."""
    if spec.added_rows:
        return f"{source(spec.added_rows)} > 0"
    return f"NOT {source(spec.delete_column)}" if spec.delete_column else None


def match_condition(spec: MergeSpec, source: Side, target: Side) -> str:
    """SQL: a target row is the source row's, by the spec's keys (`source` and `target` as in
    newer_condition)."""
    keys = [f"({target(k)} IS NOT DISTINCT FROM {source(k)})" if k in spec.null_safe_keys
            else f"{target(k)} = {source(k)}" for k in spec.keys]
    markers = [source(spec.delete_column)] if spec.replace_groups and spec.delete_column else []
    return " AND ".join(keys + markers)


def newer_condition(columns: tuple[str, ...], source: Side, target: Side) -> str | None:
    """SQL: the source row is at least as new as the target row, comparing `columns` in order,
    a null older than any value (so a row with a null sequence never replaces one with a value,
    and a valid update always replaces a null); on equal sequences the source wins. `source`
    and `target` name a column as SQL (e.g. `lambda c: f"s.{quote(c)}"`). Both engines' SQL
    (Spark's and delta-rs's DataFusion) read it; DataFusion's parser binds `IS NOT DISTINCT
    FROM` looser than AND, hence its parentheses."""
    if not columns:
        return None
    s, t = source(columns[-1]), target(columns[-1])
    condition = f"({t} IS NULL OR {s} >= {t})"
    for column in reversed(columns[:-1]):
        s, t = source(column), target(column)
        condition = (f"(({t} IS NULL AND {s} IS NOT NULL) OR {s} > {t} OR "
                     f"(({s} IS NOT DISTINCT FROM {t}) AND {condition}))")
    return condition


def sql_literal(text: str | None, type_name: str) -> str:
    """A value, as Spark casts it to a string (timestamps in the session's time zone, UTC), as
    a literal of its Spark type (`simpleString()`) both engines' SQL read."""
    if text is None:
        return "NULL"
    if type_name in ("timestamp", "timestamp_ntz", "date"):
        return f"CAST('{text}' AS {'DATE' if type_name == 'date' else 'TIMESTAMP'})"
    if type_name in ("string", "binary") or type_name.startswith(("varchar", "char")):
        return "'" + text.replace("'", "''") + "'"
    return text  # numbers and booleans read as themselves


def removed_condition(spec: MergeSpec, target: Side) -> str | None:
    """SQL: a target row the source lacks is deleted (spec.expire, or not newer than the latest
    truncate); `target` names a column as SQL."""
    conditions = [spec.expire] if spec.expire else []
    if spec.truncated_through is not None:
        through = spec.truncated_through
        older = newer_condition(spec.sequence_by, lambda c: through[c], target)
        conditions.append(f"coalesce({older}, false)")  # a null truncate is the oldest
    return " OR ".join(f"({c})" for c in conditions) or None


def merge_sql(path: str, source_view: str, columns: list[str], spec: MergeSpec,
              evolve: bool = False) -> str:
    """MERGE with the same semantics as the embedded engine: match on the keys; a matched row is
    replaced only by one at least as new (sequence_by); delete_column deletes; new keys insert
    unless they are deletes. evolve: columns the table lacks are added (Delta's schema
    evolution, which resolves them only when assigned by their bare names)."""
    source: Side = lambda c: f"{SOURCE}.{quote(c)}"
    target: Side = lambda c: f"{TARGET}.{quote(c)}"
    on = match_condition(spec, source, target)
    newer = newer_condition(spec.sequence_by, source, target)
    deleting = deleted_condition(spec, source, target)
    inserting = inserted_condition(spec, source)
    written = [c for c in columns if c != spec.delete_column]
    sets = ", ".join(f"{quote(c)} = " + updated_value(spec, c, source, target) for c in written)
    clauses = []
    if deleting:
        clauses.append(f"WHEN MATCHED AND {' AND '.join(filter(None, [newer, deleting]))} "
                       "THEN DELETE")
    clauses.append(f"WHEN MATCHED{f' AND {newer}' if newer else ''} THEN UPDATE SET {sets}")
    clauses.append(f"WHEN NOT MATCHED{f' AND {inserting}' if inserting else ''} THEN INSERT "
                   f"({', '.join(map(quote, written))}) "
                   f"VALUES ({', '.join(source(c) for c in written)})")
    removed = removed_condition(spec, target)
    if removed:
        clauses.append(f"WHEN NOT MATCHED BY SOURCE AND {removed} THEN DELETE")
    return (f"MERGE {'WITH SCHEMA EVOLUTION ' if evolve else ''}INTO {table(path)} AS {TARGET} "
            f"USING {quote(source_view)} AS {SOURCE} ON {on} " + " ".join(clauses))


def snapshot_sql(path: str, as_of: int | str | None) -> str:
    if as_of is None:
        return f"SELECT * FROM {table(path)}"
    if isinstance(as_of, int):
        return f"SELECT * FROM {table(path)} VERSION AS OF {as_of}"
    return f"SELECT * FROM {table(path)} TIMESTAMP AS OF '{as_of}'"
