"""Groups kept up to date by adding their inputs' changes (sums and counts), without reading the
inputs' unchanged rows.

A model of the form `SELECT <keys>, count(*), count(x), sum(y) FROM one_ref [WHERE ..] GROUP BY
<keys>` (its keys being its `incremental_by` columns) is maintained from the change feed alone:
its SQL runs over the rows the changes added (inserts, update post-images) and over those they
removed (deletes, update pre-images), and each touched group's new values are its stored ones
plus the first and minus the second. A group whose count(*) falls to 0 is deleted.

Exact, as a full recompute: only whole-number and decimal sums are added (floating point sums
depend on the order of addition), and sum() is null when a group has no non-null value, which
adding cannot always tell: a sum that comes out 0 after non-null values were removed may be 0 or
null, so those few groups are recomputed from the inputs' rows (groups.py's way). Where no
group can be in that doubt (the summed columns hold no null, or no group lost non-null values
without gaining any), the changes' totals are added to the stored rows by the write itself (a
MERGE, or a rewrite: change_totals, added_to), and no stored row is read first.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from ...core.nodes import CompiledNode
from .groups import in_groups

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

ADDED = ("insert", "update_postimage")
SIGN, RECOMPUTE = "_medallion_sign", "_medallion_recompute"
MAY_BE_NULL = "_medallion_may_be_null"


@dataclass(frozen=True)
class Aggregates:
    """The model's output columns by position: its keys, and per aggregate 'count' or 'sum'."""

    kinds: tuple[str | None, ...]  # None: a key column; 'rows': count(*)
    summed: tuple[str | None, ...] = ()  # per sum, the input column it adds up, if a plain one

    def rows_column(self, columns: list[str]) -> str:
        return columns[self.kinds.index("rows")]

    def keys(self, columns: list[str]) -> list[str]:
        return [c for c, kind in zip(columns, self.kinds) if kind is None]

    def values(self, columns: list[str]) -> list[str]:
        return [c for c, kind in zip(columns, self.kinds) if kind is not None]

    def may_turn_null(self, without_nulls: frozenset[str]) -> list[bool]:
        """Per column: a sum that may become null while its group has rows, as it does not
        add up an input column in `without_nulls` (which holds no null)."""
        return [kind == "sum" and summed not in without_nulls
                for kind, summed in zip(self.kinds, self.summed)]


def _aggregate_kind(projection: exp.Expression) -> str | None:
    """'rows' (count(*)), 'count', 'sum' or None for a projection that is none of them
    plainly (not inside another expression)."""
    inner = projection.unalias()
    if isinstance(inner.this, exp.Distinct):
        return None
    if isinstance(inner, exp.Count):
        everything = isinstance(inner.this, exp.Star) or (
            isinstance(inner.this, exp.Literal) and not isinstance(inner.this, exp.Null))
        return "rows" if everything else "count"
    return "sum" if isinstance(inner, exp.Sum) else None


def aggregates_of(node: CompiledNode) -> tuple[Aggregates | None, str | None]:
    """(how to add changes to the model's groups, None) or (None, why its SQL is not a single
    GROUP BY of sums and counts over one input)."""
    keys = set(node.config.incremental_by)
    assert node.sql is not None  # (a model's)
    tree = sqlglot.parse_one(node.sql, read="spark")
    if not isinstance(tree, exp.Select) or len(list(tree.find_all(exp.Select))) > 1:
        return None, "its SQL is not one SELECT"
    if tree.args.get("joins") or len(list(tree.find_all(exp.Table))) != 1 or node.sources \
            or len(node.refs) != 1:
        return None, "it reads more than one relation"
    if tree.args.get("having") or tree.args.get("distinct") or tree.find(exp.Window):
        return None, "it has HAVING, DISTINCT or a window"
    group = tree.args.get("group")
    grouped = {c.name for c in group.expressions if isinstance(c, exp.Column)} if group else set()
    if not group or grouped != keys or len(group.expressions) != len(keys):
        return None, f"it is not grouped by exactly {', '.join(sorted(keys))}"
    kinds: list[str | None] = []
    summed: list[str | None] = []
    for projection in tree.expressions:
        plain = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(plain, exp.Column) and plain.name in keys and projection.alias_or_name \
                == plain.name:
            kinds.append(None)
            summed.append(None)
            continue
        kind = _aggregate_kind(projection)
        if kind is None:
            return None, f"'{projection.sql(dialect='spark')}' is not a sum or count"
        kinds.append(kind)
        argument = projection.unalias().this
        summed.append(argument.name if kind == "sum" and isinstance(argument, exp.Column)
                      else None)
    if "rows" not in kinds:
        return None, "it has no count(*), which tells when a group has no rows left"
    return Aggregates(tuple(kinds), tuple(summed)), None


def inexact_sum(aggregates: Aggregates, added: DataFrame) -> str | None:
    """Why adding the model's sums would not equal summing again (their types), or None."""
    from ...spark.pyspark_api import T

    for kind, field in zip(aggregates.kinds, added.schema.fields):
        if kind == "sum" and not isinstance(field.dataType, (T.IntegralType, T.DecimalType)):
            return f"the sum {field.name} is of type {field.dataType.simpleString()}, " \
                   "whose additions are not exact"
    return None


def sides(changes: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(rows the changes added, rows they removed)."""
    from ...spark.pyspark_api import F

    added = F.col("_change_type").isin(*ADDED)
    return changes.where(added), changes.where(~added)


def updated_groups(aggregates: Aggregates, stored: DataFrame, touched: DataFrame,
                   added: DataFrame, removed: DataFrame, delete_column: str) -> DataFrame:
    """Per group the changes touch (`touched`, their keys): its new row (stored + added -
    removed), `delete_column` true when the group has no rows left; and a column RECOMPUTE,
    true where a sum cannot be told from 0 or null and the group is computed from its rows
    instead."""
    from ...spark.pyspark_api import F

    columns = added.columns
    keys = aggregates.keys(columns)
    rows_left = aggregates.rows_column(columns)
    changed = _signed(added, removed)
    # Only the touched groups' stored rows: the table is read, but not grouped, in full.
    stored = in_groups(stored, F.broadcast(touched))
    union = changed.unionByName(stored.select(*columns).withColumn(SIGN, F.lit(1)))
    values: list[Column] = []
    ambiguous: list[Column] = []
    for column, kind, total, kept, taken, kind_of_value in _signed_totals(aggregates, added):
        if kind != "sum":
            values.append(total.cast(kind_of_value).alias(column))
            continue
        values.append(F.when(kept, total).cast(kind_of_value).alias(column))
        ambiguous.append(kept & taken & (total == 0))
    grouped = union.groupBy(*keys).agg(
        *values, (F.lit(False) if not ambiguous else _any(ambiguous)).alias(RECOMPUTE))
    return grouped.withColumn(delete_column, F.col(rows_left) <= 0)


def _signed_totals(aggregates: Aggregates, added: DataFrame
                   ) -> Iterator[tuple[str, str, Column, Column, Column, DataType]]:
    """For each column the model aggregates (rows signed +1 added, -1 removed, in SIGN): its
    kind, the signed total of its values, whether any added and any removed row holds a
    non-null value of it, and its type."""
    from ...spark.pyspark_api import F

    sign = F.col(SIGN)
    for column, kind, field in zip(added.columns, aggregates.kinds, added.schema.fields):
        if kind is None:
            continue
        total = F.sum(sign * F.coalesce(F.col(column), F.lit(0)))
        gained = F.count_if((sign > 0) & F.col(column).isNotNull()) > 0
        lost = F.count_if((sign < 0) & F.col(column).isNotNull()) > 0
        yield column, kind, total, gained, lost, field.dataType


def change_totals(aggregates: Aggregates, added: DataFrame, removed: DataFrame,
                  without_nulls: frozenset[str]) -> DataFrame:
    """Per group the changes touch, the model's columns: each count's and sum's change (added -
    removed; a sum's is null when the changes hold none of its non-null values), to be added to
    the stored row (MergeSpec.added); and MAY_BE_NULL, true where a sum that may hold nulls
    (not of an input column in `without_nulls`) lost non-null values and gained none: whether
    it is null now, or 0, only the group's rows tell."""
    from ...spark.pyspark_api import F

    columns = added.columns
    may_turn_null = dict(zip(columns, aggregates.may_turn_null(without_nulls)))
    values: list[Column] = []
    unsure: list[Column] = []
    for column, kind, total, gained, lost, kind_of_value in _signed_totals(aggregates, added):
        if kind != "sum":
            values.append(total.cast(kind_of_value).alias(column))
            continue
        values.append(F.when(gained | lost, total).cast(kind_of_value).alias(column))
        if may_turn_null[column]:
            unsure.append(lost & ~gained)
    totals = _signed(added, removed).groupBy(*aggregates.keys(columns)).agg(
        *values, (_any(unsure) if unsure else F.lit(False)).alias(MAY_BE_NULL))
    return totals.select(*columns, MAY_BE_NULL)


def added_to(stored: DataFrame, totals: DataFrame, keys: tuple[str, ...], values: list[str],
             rows_column: str) -> DataFrame:
    """The stored table with change_totals' rows added to it, as a MERGE with MergeSpec.added
    leaves it, in one pass over the table: joined on the keys (null matching null), a group's
    `values` are the stored ones plus its totals, and a group with no rows left is dropped."""
    from ...spark.pyspark_api import F

    joined = stored.join(totals, on=reduce(lambda a, b: a & b, [
        stored[k].eqNullSafe(totals[k]) for k in keys]), how="full_outer")
    in_table, in_totals = stored[rows_column].isNotNull(), totals[rows_column].isNotNull()
    columns = []
    for field in totals.schema.fields:
        c = field.name
        value = F.when(in_table, stored[c]).otherwise(totals[c])
        if c in values:
            value = F.when(~in_totals, stored[c]).when(~in_table, totals[c]).otherwise(
                F.coalesce(F.coalesce(stored[c], F.lit(0)) + totals[c], stored[c]))
        columns.append(value.cast(field.dataType).alias(c))
    rows_left = F.coalesce(stored[rows_column], F.lit(0)) + F.coalesce(totals[rows_column],
                                                                         F.lit(0))
    return joined.where(rows_left > 0).select(*columns)


def _signed(added: DataFrame, removed: DataFrame) -> DataFrame:
    from ...spark.pyspark_api import F

    return added.withColumn(SIGN, F.lit(1)).unionByName(removed.withColumn(SIGN, F.lit(-1)))


def _any(conditions: list[Column]) -> Column:
    return reduce(lambda a, b: a | b, conditions)
