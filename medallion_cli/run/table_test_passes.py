"""Data tests on one table counted in one pass over it.

A test that is a row filter over one table (`select * from <table> where <condition>`:
not_null, accepted_values, expression, and a project's own tests of that shape) fails on the
rows its condition holds for; a uniqueness test (`select <column>, count(*) ... group by
<column> having count(*) > 1`) passes when the column's values are as many as its distinct
ones. Every such test of a run on one table is answered by one Spark job over the table (a
count_if, or a count against a distinct count, per test) instead of one scan per test as dbt
runs them. A test found failing is then run alone, for its exact count and first failing rows;
a pass that cannot run (one member's SQL is wrong) leaves each test to run alone and report
its own error.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from ..load.datatests import DataTest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# What makes a query more than one table's rows, filtered or grouped by one column.
NOT_ONE_TABLE = ("joins", "limit", "order", "with", "distinct", "qualify", "laterals", "windows")


# The tests answered by one pass: those over one table, with the same refs and sources.
GroupKey = tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class Measure:
    table: str
    sql: str  # an aggregate over the table
    exact: bool  # the failing rows themselves; else only whether there are any (0 or not)


def measure(sql: str) -> Measure | None:
    """What answers the test in a pass over its table, or None: it runs alone."""
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except sqlglot.errors.SqlglotError:
        return None
    if not isinstance(tree, exp.Select) or any(tree.args.get(k) for k in NOT_ONE_TABLE):
        return None
    source, where = tree.args.get("from_"), tree.args.get("where")
    if source is None or not isinstance(source.this, exp.Table):
        return None
    if any(inner is not tree for inner in tree.find_all(exp.Select)):  # a subquery
        return None
    table = source.this.sql("spark")
    if tree.args.get("group") or tree.args.get("having"):
        column = _unique_column(tree)
        return (Measure(table, f"count({column}) - count(distinct {column})", False)
                if column else None)
    shown = tree.expressions
    if where is None or len(shown) != 1 or not isinstance(shown[0], exp.Star):
        return None
    return Measure(table, f"count_if({where.this.sql('spark')})", True)


def _unique_column(tree: exp.Select) -> str | None:
    """The column of `select c, count(*) ... [where c is not null] group by c having
    count(*) > 1`, else None."""
    group, having, where = tree.args.get("group"), tree.args.get("having"), tree.args.get("where")
    keys = group.expressions if group else []
    if len(keys) != 1 or not isinstance(keys[0], exp.Column):
        return None
    column = keys[0].sql("spark")
    wanted = sqlglot.parse_one("count(*) > 1", read="spark")
    if having is None or having.this != wanted:
        return None
    if where is not None and where.this != sqlglot.parse_one(f"{column} is not null",
                                                             read="spark"):
        return None
    return column


class TestPasses:
    """A run's tests grouped by the table they read; each group of two or more is answered
    once, by whichever of its tests runs first (the others wait for it)."""

    def __init__(self, tests: dict[str, DataTest]):
        groups: dict[GroupKey, dict[str, Measure]] = {}
        for name, test in tests.items():
            found = None if test.store_failures else measure(test.sql)
            if found:
                groups.setdefault((found.table, test.refs, test.sources), {})[name] = found
        self.groups = {key: members for key, members in groups.items() if len(members) > 1}
        self.group_of = {name: key for key, members in self.groups.items() for name in members}
        self.locks = {key: threading.Lock() for key in self.groups}
        self.counts: dict[GroupKey, dict[str, int] | None] = {}

    def failures(self, spark: SparkSession, test: DataTest) -> int | None:
        """The test's failing-row count from its table's pass, in a session where the test's
        relations are registered; None when it is to run alone."""
        key = self.group_of.get(test.name)
        if key is None:
            return None
        with self.locks[key]:
            if key not in self.counts:
                self.counts[key] = _count(spark, key[0], self.groups[key])
            counted = self.counts[key]
        if counted is None:
            return None
        found = counted[test.name]
        return found if self.groups[key][test.name].exact or found == 0 else None


def _count(spark: SparkSession, table: str, measures: dict[str, Measure]) -> dict[str, int] | None:
    names = list(measures)
    columns = ", ".join(f"{measures[n].sql} as c{i}" for i, n in enumerate(names))
    try:
        row = spark.sql(f"select {columns} from {table}").first()
    except Exception:
        return None
    if row is None:  # (an aggregate has its one row)
        return None
    return {name: int(row[i] or 0) for i, name in enumerate(names)}
