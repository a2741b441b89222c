"""Data tests on one table counted in one pass over it.

A test that is a row filter over one table (`select * from <table> where <condition>`:
not_null, accepted_values, expression, and a project's own tests of that shape) fails on the
rows its condition holds for. Every such test of a run on one table is counted by one Spark job
over the table, a count_if per test, instead of one scan per test as dbt runs them. A test found
failing is then run alone, for its first failing rows; a pass that cannot run (one member's SQL
is wrong) leaves each test to run alone and report its own error.
"""

from __future__ import annotations

import threading

import sqlglot
from sqlglot import exp

from ..load.datatests import DataTest

# What makes a query more than one table's rows filtered by a condition.
NOT_A_FILTER = ("joins", "group", "having", "limit", "order", "with", "distinct", "qualify",
                "laterals", "windows")


def row_filter(sql: str) -> tuple[str, str] | None:
    """(the table, the condition) when the test's SQL is `select * from <table> where
    <condition>`, in Spark SQL; else None."""
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except sqlglot.errors.SqlglotError:
        return None
    if not isinstance(tree, exp.Select) or any(tree.args.get(k) for k in NOT_A_FILTER):
        return None
    if len(tree.expressions) != 1 or not isinstance(tree.expressions[0], exp.Star):
        return None
    source, where = tree.args.get("from_"), tree.args.get("where")
    if source is None or where is None or not isinstance(source.this, exp.Table):
        return None
    if where.this.find(exp.Select):  # a subquery, which Spark takes in a filter only
        return None
    return source.this.sql("spark"), where.this.sql("spark")


class TestPasses:
    """A run's row-filter tests grouped by the table they read; each group of two or more is
    counted once, by whichever of its tests runs first (the others wait for it)."""

    def __init__(self, tests: dict[str, DataTest]):
        groups: dict[tuple, dict[str, str]] = {}
        for name, test in tests.items():
            shape = None if test.store_failures else row_filter(test.sql)
            if shape:
                groups.setdefault((shape[0], test.refs, test.sources), {})[name] = shape[1]
        self.groups = {key: members for key, members in groups.items() if len(members) > 1}
        self.group_of = {name: key for key, members in self.groups.items() for name in members}
        self.locks = {key: threading.Lock() for key in self.groups}
        self.counts: dict[tuple, dict[str, int] | None] = {}

    def failures(self, spark, test: DataTest) -> int | None:
        """The test's failing-row count from its table's pass, in a session where the test's
        relations are registered; None when it is counted alone."""
        key = self.group_of.get(test.name)
        if key is None:
            return None
        with self.locks[key]:
            if key not in self.counts:
                self.counts[key] = _count(spark, key[0], self.groups[key])
            counted = self.counts[key]
        return None if counted is None else counted[test.name]


def _count(spark, table: str, conditions: dict[str, str]) -> dict[str, int] | None:
    names = list(conditions)
    columns = ", ".join(f"count_if({conditions[n]}) as c{i}" for i, n in enumerate(names))
    try:
        row = spark.sql(f"select {columns} from {table}").first()
    except Exception:
        return None
    return {name: int(row[i] or 0) for i, name in enumerate(names)}
