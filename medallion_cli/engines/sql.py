"""The Spark SQL the native (delta-spark) engine runs, as plain functions of their inputs, so it
can be checked with sqlglot's Spark dialect without a cluster or the Delta JARs. (Compaction,
vacuum and restore go through delta-spark's Python API instead: no SQL to check there.)"""

from __future__ import annotations

from . import MergeSpec, match_condition, newer_condition, removed_condition, updated_value

SOURCE, TARGET = "s", "t"


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def table(path: str) -> str:
    """A Delta table by path, as Delta's SQL names it."""
    return f"delta.{quote(path)}"


def merge_sql(path: str, source_view: str, columns: list[str], spec: MergeSpec,
              evolve: bool = False) -> str:
    """MERGE with the same semantics as the embedded engine: match on the keys; a matched row is
    replaced only by one at least as new (sequence_by); delete_column deletes; new keys insert
    unless they are deletes. evolve: columns the table lacks are added (Delta's schema
    evolution, which resolves them only when assigned by their bare names)."""
    on = match_condition(spec, lambda c: f"{SOURCE}.{quote(c)}", lambda c: f"{TARGET}.{quote(c)}")
    newer = newer_condition(spec.sequence_by, lambda c: f"{SOURCE}.{quote(c)}",
                            lambda c: f"{TARGET}.{quote(c)}")
    deleting = f"{SOURCE}.{quote(spec.delete_column)}" if spec.delete_column else None
    written = [c for c in columns if c != spec.delete_column]
    sets = ", ".join(f"{quote(c)} = " + updated_value(spec, c, lambda n: f"{SOURCE}.{quote(n)}",
                                                      lambda n: f"{TARGET}.{quote(n)}")
                     for c in written)
    clauses = []
    if deleting:
        clauses.append(f"WHEN MATCHED AND {' AND '.join(filter(None, [newer, deleting]))} "
                       "THEN DELETE")
    clauses.append(f"WHEN MATCHED{f' AND {newer}' if newer else ''} THEN UPDATE SET {sets}")
    clauses.append(f"WHEN NOT MATCHED{f' AND NOT {deleting}' if deleting else ''} THEN INSERT "
                   f"({', '.join(map(quote, written))}) "
                   f"VALUES ({', '.join(f'{SOURCE}.{quote(c)}' for c in written)})")
    removed = removed_condition(spec, lambda c: f"{TARGET}.{quote(c)}")
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
