"""A node's checks: its expectations, evaluated on the rows it is about to write, and the
quarantine table (`<model>_quarantine`) for rows a `drop` rule rejects."""

from __future__ import annotations

import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..core.config import NULL_KEY_RULE
from ..core.errors import MedallionError
from ..core.nodes import CompiledNode
from ..engines.sql import quote
from .clustering import check_layout_columns
from .context import (
    FAILED_RULES,
    IS_CURRENT,
    VALID_FROM,
    VALID_TO,
    BuildContext,
    cached,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Observation

CHECKED = "_medallion_rows_checked"  # beside the rule names in the one counting pass


@dataclass
class Checked:
    """The rows to write and what the model's expectations found in them: failing rows per
    rule and rows checked (None without rules), known once settled, which must be before
    anything is written. settle(computed=True) once the rows have been computed (a cache
    filled) takes the counts made on the way; settle() counts them in a pass of its own."""

    rows: DataFrame
    settle: Callable[..., None] = lambda computed=False: None
    pending: bool = False  # rules whose counts are not known yet
    counts: dict[str, int] = field(default_factory=dict)
    checked: int | None = None


@contextmanager
def checked_rows(ctx: BuildContext, node: CompiledNode, df: DataFrame, replace: bool,
                 txn: tuple[str, int] | None = None, settled: bool = True
                 ) -> Iterator[Checked]:
    """Evaluate the model's expectations on the rows it is about to write; yields Checked.

    A `fail` rule that any row breaks raises before anything is written; rows breaking a `drop`
    rule go to the `<model>_quarantine` table (with `_failed_rules` and `_quarantined_at`)
    instead of the model's table; `warn` only counts. A condition that is null for a row counts
    as broken. A model's contract and the columns its table is laid out by are checked first.
    settled=False: the caller settles the checks before its first write (writes.py, which
    counts them while it computes the rows once for several writes)."""
    check_contract(node, df)
    history = (VALID_FROM, VALID_TO, IS_CURRENT) if node.config.scd_type == 2 else ()
    check_layout_columns((*df.columns, *history), f"the rows of model '{node.name}'",
                         node.file.rel_path,
                         "; nothing was written", zorder_by=node.config.zorder_by,
                         cluster_by=node.config.cluster_by)
    rules = node.config.expectations
    if not rules:
        yield Checked(df)
        return
    from ..spark.pyspark_api import F, Observation

    # One flag column per rule, which Spark compiles with the rest of the row's work; the
    # list of a quarantined row's failed rules (a higher-order function, which Spark only
    # interprets) is made for those rows alone. As that list for every row, the checks of a
    # 411k-row batch took 0.1-0.25 s more in a warm JVM, about 0.35 s more in a cold one.
    # As SQL text: each Column object costs calls into the JVM (280 for the checks of a
    # one-row silver batch under --watch). A rule is its own text, in parentheses and ended by
    # a line break (a rule may end in a comment).
    flags = {name: f"_medallion_broken_{i}" for i, name in enumerate(rules)}
    checked = df.selectExpr("*", *[f"NOT coalesce(({r['expect']}\n), false) AS {flags[name]}"
                                   for name, r in rules.items()])
    measures = [F.expr(f"count_if({flags[name]}) AS {quote(name)}") for name in rules] + [
        F.expr(f"count(1) AS {CHECKED}")]
    # Counted whenever the rows are computed, where the engine observes rows (not over Spark
    # Connect: engines/base.py); elsewhere the counts are a pass of their own (settle).
    counted = Observation(f"medallion_checks_{uuid.uuid4().hex}") \
        if ctx.engine.capabilities.observes_rows else None
    observed = checked if counted is None else checked.observe(counted, *measures)
    dropping = [n for n, r in rules.items() if r["on_violation"] == "drop"]
    dropped = " OR ".join(flags[name] for name in dropping) or "false"
    quarantine = ctx.project.quarantine_path(node.file)
    with ExitStack() as held:
        result = Checked(observed.where(f"NOT ({dropped})").drop(*flags.values()), pending=True)

        def settle(computed: bool = False) -> None:
            if not result.pending:
                return
            totals = observed_totals(counted) if computed and counted is not None else None
            if totals is None:
                # A pass of its own; the write computes the rows again: caching them for the
                # write cost more than recomputing a typical silver model (a 500k-row batch:
                # 2.7 s against 0.9 s). Only rows split between the table and the quarantine
                # are cached, computed once.
                with ctx.phases.timing("expectations"):
                    row = checked.select(measures).first()
                    assert row is not None  # (an aggregate over all rows: one row)
                    totals = row.asDict()
            counts = {name: int(totals[name] or 0) for name in rules}
            stopping = [n for n, r in rules.items() if r["on_violation"] == "fail" and counts[n]]
            if stopping:
                raise MedallionError(
                    "expectation " + ", ".join(f"'{n}' failed on {counts[n]} row(s)"
                                               for n in stopping)
                    + "; nothing was written", path=node.file.rel_path,
                    hint="fix the data or the rule; on_violation 'drop' would quarantine the rows")
            split = any(counts[n] for n in dropping)
            if split and not computed:
                held.enter_context(cached(observed))  # the table's rows are read from it too
            # A replaced table starts a new quarantine too, so old bad rows do not linger there.
            if split or (replace and ctx.engine.table_exists(quarantine)):
                failed_rules = F.filter(F.array(*[F.when(F.col(flags[name]), F.lit(name))
                                                  for name in rules]), lambda x: x.isNotNull())
                bad = (observed.where(dropped).withColumn(FAILED_RULES, failed_rules)
                       .drop(*flags.values()).withColumn("_quarantined_at", F.current_timestamp()))
                ctx.engine.write(bad, quarantine, "overwrite" if replace else "append",
                                 merge_schema=True, txn=txn)
            # every MERGE model's own rule is said only when it kept rows apart
            result.counts.update({name: n for name, n in counts.items()
                                  if n or name != NULL_KEY_RULE})
            result.checked, result.pending = int(totals[CHECKED]), False

        result.settle = settle
        if settled:
            settle()
        yield result


def observed_totals(counted: Observation) -> dict[str, Any] | None:
    """The counts an Observation made while the rows were computed, or None when Spark has
    none: it hands an empty row to an observation whose plan it optimised away (adaptive
    execution drops the plan below a shuffle that produced no rows, as when a batch's every
    row is quarantined), which pyspark cannot read."""
    try:
        return counted.get or None
    except Exception:
        return None


def check_table_properties(ctx: BuildContext, node: CompiledNode) -> None:
    """Refuse, before anything runs, a table property the engine cannot keep."""
    for key, value in node.config.table_properties.items():
        problem = ctx.engine.property_problem(key, value)
        if problem:
            raise MedallionError(problem, path=node.file.rel_path,
                                 hint="remove it from table_properties or change engine")


def check_contract(node: CompiledNode, df: DataFrame) -> None:
    """Refuse, before anything is written, rows whose columns are not the ones the model's
    enforced contract declares (names and data types), listing every difference."""
    if not node.config.contract:
        return
    from ..spark.pyspark_api import T

    where = node.file.properties or node.file.rel_path
    declared = {c["name"]: c.get("data_type") or c.get("type") for c in node.file.columns}
    if not declared or not all(declared.values()):
        raise MedallionError("an enforced contract needs every column of the model declared "
                             "with a data_type", path=where,
                             hint="list each column with name and data_type under columns:")
    actual = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    problems = []
    for name, declared_type in declared.items():
        wanted = T._parse_datatype_string(declared_type).simpleString()
        if name not in actual:
            problems.append(f"missing column {name} ({wanted})")
        elif actual[name] != wanted:
            problems.append(f"column {name} is {actual[name]}, the contract says {wanted}")
    problems += [f"column {name} ({kind}) is not in the contract" for name, kind in actual.items()
                 if name not in declared]
    if problems:
        raise MedallionError("the model's rows break its contract: " + "; ".join(problems)
                             + "; nothing was written", path=node.file.rel_path,
                             hint=f"change the SELECT (cast the column) or the columns in {where}")
