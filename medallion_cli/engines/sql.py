"""All of medallion's SQL text, as plain functions of their inputs: quoting and table names,
the conditions and values a MERGE is made of (read by both engines' SQL: Spark's and delta-rs's
DataFusion), and the statements the delta-spark engine runs (MERGE, time travel, ALTER TABLE),
which tests check with sqlglot's Spark dialect without a cluster or the Delta JARs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..core.config import MergeClause
from ..load.merge_clauses import Sides, portable


@dataclass(frozen=True)
class MergeSpec:
    """How a MERGE matches and orders rows. The source has one row per key when it is run."""

    keys: tuple[str, ...]
    # A matched row is only replaced by one at least as new, by these columns in order (null
    # sorts first: older than any value).
    sequence_by: tuple[str, ...] = ()
    delete_column: str | None = None  # boolean source column: matched rows where true are deleted
    expire: str | None = None  # condition on target rows the source lacks: those are deleted
    null_safe_keys: tuple[str, ...] = ()  # keys where null matches null
    # The source replaces whole groups of target rows: per group (its keys), one marker row
    # (delete column true) that matches every target row of the group, which are deleted, and
    # the group's new rows (delete column false), which match nothing and are inserted.
    replace_groups: bool = False
    ignore_nulls: bool = False  # a null in a matched source row keeps the stored value
    # The latest truncate's sequence_by values (SQL literals): target rows the source lacks
    # that are not newer are deleted
    truncated_through: dict[str, str] | None = None
    # Source values are changes added to the stored ones (sums and counts kept per group): a
    # matched row's `added` columns become stored + source, a stored null counting as 0 and a
    # null source keeping the stored value. The row is deleted when its `added_rows` column
    # comes to 0 or less; a source row whose `added_rows` is not above 0 inserts nothing.
    added: tuple[str, ...] = ()
    added_rows: str | None = None
    # The model's own clauses (NodeConfig's when_matched, when_not_matched_by_source), after
    # the spec's: none matched, every matched row is updated
    matched: tuple[MergeClause, ...] = ()
    not_matched_by_source: tuple[MergeClause, ...] = ()
    # The columns an update sets: these only, or all but the excluded
    update_columns: tuple[str, ...] = ()
    exclude_columns: tuple[str, ...] = ()


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


@dataclass(frozen=True)
class RowRange:
    """The rows a write replaces (build --start/--end, as Delta's replaceWhere): those whose
    `column`, of Spark type `type_name`, is at least `start` and below `end` (either may be
    open)."""

    column: str
    type_name: str
    start: str | None
    end: str | None

    def sql(self, name: Callable[[str], str] = quote) -> str:
        """The condition, as SQL both engines' writes read, the column named by `name`."""
        bounds = [(">=", self.start), ("<", self.end)]
        return " AND ".join(f"{name(self.column)} {op} {sql_literal(value, self.type_name)}"
                            for op, value in bounds if value is not None)


def removed_condition(spec: MergeSpec, target: Side) -> str | None:
    """SQL: a target row the source lacks is deleted (spec.expire, or not newer than the latest
    truncate); `target` names a column as SQL."""
    conditions = [spec.expire] if spec.expire else []
    if spec.truncated_through is not None:
        through = spec.truncated_through
        older = newer_condition(spec.sequence_by, lambda c: through[c], target)
        conditions.append(f"coalesce({older}, false)")  # a null truncate is the oldest
    return " OR ".join(f"({c})" for c in conditions) or None


@dataclass(frozen=True)
class When:
    """One WHEN clause of a MERGE, as both engines apply it: to matched rows, new rows
    ("not_matched") or stored rows the source lacks ("not_matched_by_source"), where its
    condition holds (None: always), an update or insert (`values`: column -> SQL) or a
    delete."""

    rows: str
    condition: str | None
    action: str  # "update" | "insert" | "delete"
    values: dict[str, str]


def merge_whens(spec: MergeSpec, columns: list[str], source: Side, target: Side) -> list[When]:
    """The MERGE's clauses in order: the spec's delete, the model's matched clauses (one update
    when it has none), the insert, then what happens to stored rows the source lacks. Every
    matched clause applies only to a source row at least as new as the stored one."""
    newer = newer_condition(spec.sequence_by, source, target)
    deleting = deleted_condition(spec, source, target)
    written = [c for c in columns if c != spec.delete_column]
    updated = [c for c in written if c not in spec.exclude_columns and (
        not spec.update_columns or c in spec.update_columns)]
    side: Sides = lambda alias, column: (source if alias == SOURCE else target)(column)
    whens = []
    if deleting:
        whens.append(When("matched", _both(newer, deleting), "delete", {}))
    for clause in spec.matched or (MergeClause("update"),):
        whens.append(_when("matched", clause, newer, side, {
            c: updated_value(spec, c, source, target) for c in updated}))
    whens.append(When("not_matched", inserted_condition(spec, source), "insert",
                      {c: source(c) for c in written}))
    removed = removed_condition(spec, target)
    if removed:
        whens.append(When("not_matched_by_source", removed, "delete", {}))
    whens += [_when("not_matched_by_source", clause, None, side, {})
              for clause in spec.not_matched_by_source]
    return whens


def _both(*conditions: str | None) -> str | None:
    # each is parenthesized where it has an OR (newer_condition, portable), or has none
    return " AND ".join(c for c in conditions if c) or None


def _when(rows: str, clause: MergeClause, newer: str | None, side: Sides,
          updates: dict[str, str]) -> When:
    condition = portable(clause.condition, side) if clause.condition else None
    values = {c: portable(v, side) for c, v in clause.assign} or updates
    return When(rows, _both(newer, condition), clause.then,
                values if clause.then == "update" else {})


def merge_sql(path: str, source_view: str, columns: list[str], spec: MergeSpec,
              evolve: bool = False) -> str:
    """MERGE with the same semantics as the embedded engine (merge_whens). evolve: columns the
    table lacks are added (Delta's schema evolution, which resolves them only when assigned by
    their bare names)."""
    source: Side = lambda c: f"{SOURCE}.{quote(c)}"
    target: Side = lambda c: f"{TARGET}.{quote(c)}"
    clauses = []
    for when in merge_whens(spec, columns, source, target):
        head = {"matched": "WHEN MATCHED", "not_matched": "WHEN NOT MATCHED",
                "not_matched_by_source": "WHEN NOT MATCHED BY SOURCE"}[when.rows]
        if when.condition:
            head += f" AND {when.condition}"
        if when.action == "delete":
            clauses.append(f"{head} THEN DELETE")
        elif when.action == "update":
            sets = ", ".join(f"{quote(c)} = {v}" for c, v in when.values.items())
            clauses.append(f"{head} THEN UPDATE SET {sets}")
        else:
            clauses.append(f"{head} THEN INSERT ({', '.join(map(quote, when.values))}) "
                           f"VALUES ({', '.join(when.values.values())})")
    on = match_condition(spec, source, target)
    return (f"MERGE {'WITH SCHEMA EVOLUTION ' if evolve else ''}INTO {table(path)} AS {TARGET} "
            f"USING {quote(source_view)} AS {SOURCE} ON {on} " + " ".join(clauses))


def snapshot_sql(path: str, as_of: int | str | None) -> str:
    if as_of is None:
        return f"SELECT * FROM {table(path)}"
    if isinstance(as_of, int):
        return f"SELECT * FROM {table(path)} VERSION AS OF {as_of}"
    return f"SELECT * FROM {table(path)} TIMESTAMP AS OF '{as_of}'"


@dataclass(frozen=True)
class ColumnChanges:
    """Changes to a table's columns made in its Delta metadata alone, no data file rewritten:
    renames and drops by Delta's column mapping, widened types by its type widening."""

    renamed: tuple[tuple[str, str], ...] = ()  # (old name, new name)
    dropped: tuple[str, ...] = ()
    widened: tuple[tuple[str, str], ...] = ()  # (column, its wider type as Spark names it)

    def __bool__(self) -> bool:
        return bool(self.renamed or self.dropped or self.widened)

    def said(self) -> str:
        """`renames a to b, drops c, widens d to bigint`."""
        parts = (("renames", [f"{old} to {new}" for old, new in self.renamed]),
                 ("drops", list(self.dropped)),
                 ("widens", [f"{column} to {kind}" for column, kind in self.widened]))
        return ", ".join(f"{verb} {', '.join(items)}" for verb, items in parts if items)


COLUMN_MAPPING = "delta.columnMapping.mode"
TYPE_WIDENING = "delta.enableTypeWidening"


def evolve_sql(path: str, changes: ColumnChanges, properties: dict[str, str]) -> list[str]:
    """Delta's ALTER TABLE statements for the changes, the features they need turned on first
    (a table's `properties` say which it has)."""
    name, statements = table(path), []
    if (changes.renamed or changes.dropped) and properties.get(COLUMN_MAPPING, "none") == "none":
        statements.append(f"ALTER TABLE {name} SET TBLPROPERTIES ('{COLUMN_MAPPING}' = 'name')")
    if changes.widened and properties.get(TYPE_WIDENING) != "true":
        statements.append(f"ALTER TABLE {name} SET TBLPROPERTIES ('{TYPE_WIDENING}' = 'true')")
    statements += [f"ALTER TABLE {name} RENAME COLUMN {quote(old)} TO {quote(new)}"
                   for old, new in changes.renamed]
    if changes.dropped:
        statements.append(f"ALTER TABLE {name} DROP COLUMNS "
                          f"({', '.join(quote(c) for c in changes.dropped)})")
    statements += [f"ALTER TABLE {name} ALTER COLUMN {quote(column)} TYPE {kind}"
                   for column, kind in changes.widened]
    return statements
