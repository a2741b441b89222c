"""Data tests: generic tests declared in models/**/*.yml (on models, seeds and source tables)
and singular tests in tests/*.sql.

A test is a query returning the rows that fail it. Generic tests are `test_<name>` macros
(built-in or the project's own), called with the model and column they are declared on;
singular tests are SQL files. A test fails when its failing-row count meets `error_if`
(severity error) or warns when it meets `warn_if`, as in dbt.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.errors import MedallionError, ProjectError, closest
from ..core.nodes import Recorded, masked
from ..core.project import NodeFile, Project, SourceTable
from ..core.rowtext import rows_text
from .rendering import Renderer

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TEST_CONFIG_KEYS = ("severity", "error_if", "warn_if", "tags", "enabled", "name", "store_failures")
SEVERITIES = ("error", "warn")
COMPARISONS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
               "==": operator.eq, "=": operator.eq, "!=": operator.ne}
SHOW_ROWS = 10


@dataclass(frozen=True)
class DataTest:
    name: str
    sql: str
    refs: tuple[str, ...]
    sources: tuple[tuple[str, str], ...]
    origin: str  # the file that declares it
    key: str  # where in that file, e.g. models[silver_orders].columns[order_id].tests[0]
    severity: str = "error"
    error_if: str = "!=0"
    warn_if: str = "!=0"
    tags: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()  # values of secret env_var()s in the SQL
    store_failures: bool = False  # keep its failing rows in a Delta table (dbt's store_failures)

    @property
    def shown_sql(self) -> str:
        return masked(self.sql, self.secrets) or ""

    def outcome(self, failures: int) -> str:
        """success, warn or error for a failing-row count."""
        if self.severity == "error" and threshold_met(failures, self.error_if):
            return "error"
        return "warn" if threshold_met(failures, self.warn_if) else "success"


def threshold_met(failures: int, condition: str) -> bool:
    op, number = parse_threshold(condition, "")
    return bool(COMPARISONS[op](failures, number))


def parse_threshold(condition: str, where: str) -> tuple[str, int]:
    match = re.fullmatch(r"\s*(>=|<=|==|!=|>|<|=)\s*(\d+)\s*", str(condition))
    if not match:
        raise ProjectError(f"{where}: threshold {condition!r} is not a comparison",
                           hint="write e.g. '>0', '>=10' or '!=0'")
    return match.group(1), int(match.group(2))


def _test_config(raw: dict[str, Any], origin: str, key: str) -> dict[str, Any]:
    for k in raw:
        if k not in TEST_CONFIG_KEYS:
            raise ProjectError(f"{key}: unknown test config '{k}'. {closest(k, TEST_CONFIG_KEYS)}",
                               path=origin, hint="valid: " + ", ".join(TEST_CONFIG_KEYS))
    if raw.get("severity", "error") not in SEVERITIES:
        raise ProjectError(f"{key}: severity must be 'error' or 'warn'", path=origin)
    for k in ("error_if", "warn_if"):
        if k in raw:
            parse_threshold(raw[k], f"{origin}, {key}")
    return raw


def _parse_spec(spec: Any, origin: str, key: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(test name, arguments, config) from `not_null` or `{accepted_values: {values: [...]}}`."""
    if isinstance(spec, str):
        return spec, {}, {}
    if isinstance(spec, dict) and len(spec) == 1:
        name, body = next(iter(spec.items()))
        if name == "expression" and isinstance(body, str):
            body = {"expression": body}
        body = dict(body or {})
        config = dict(body.pop("config", None) or {})
        for k in ("severity", "error_if", "warn_if", "tags", "name", "store_failures"):
            if k in body:  # dbt also accepts config keys next to the arguments
                config[k] = body.pop(k)
        return name, body, _test_config(config, origin, key)
    raise ProjectError(f"{key}: a test is a name or a one-key mapping", path=origin,
                       hint="e.g. - not_null   or   - accepted_values: {values: [a, b]}")


def _generic_specs(where: str, data_tests: Iterable[Any],
                   columns: Iterable[dict[str, Any]]) -> Iterator[tuple[Any, str | None, str]]:
    """(spec, column or None, key) for every test declared on a model, seed or source table;
    `where` is its place in the properties file, e.g. models[orders]."""
    for i, spec in enumerate(data_tests):
        yield spec, None, f"{where}.tests[{i}]"
    for column in columns:
        col = column.get("name")
        for i, spec in enumerate(column.get("data_tests") or column.get("tests") or ()):
            yield spec, col, f"{where}.columns[{col}].tests[{i}]"


def _on(node: NodeFile | SourceTable) -> tuple[tuple[str, ...], str, str, str, str]:
    """What a generic test on it is called with, its name's prefix and subject (as dbt names
    them: not_null_orders_id, source_not_null_landing_orders_id), and where it is declared."""
    if isinstance(node, SourceTable):
        return (("source", node.source, node.name), "source_", f"{node.source}_{node.name}",
                node.origin, f"sources[{node.source}].tables[{node.name}]")
    return (("ref", node.name), "", node.name, node.properties or node.rel_path,
            f"models[{node.name}]")


def _unique(name: str, taken: dict[str, Any]) -> str:
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name}_{n}"
    return candidate


def load_tests(project: Project, renderer: Renderer,
               enabled_models: Collection[str]) -> dict[str, DataTest]:
    """Every enabled data test of the project, by unique name."""
    tests: dict[str, DataTest] = {}
    declared = [n for n in project.nodes.values() if n.name in enabled_models]
    for node in declared + list(project.sources.values()):
        on, prefix, label, origin, where = _on(node)
        for spec, column, key in _generic_specs(where, node.data_tests, node.columns):
            test_name, args, config = _parse_spec(spec, origin, key)
            if config.get("enabled", True) is False:
                continue
            record = Recorded(f"{origin}, {key}")
            arguments = {**args, "column_name": column} if column is not None else args
            sql = renderer.call_macro(f"test_{test_name}", arguments, record, on)
            default = prefix + "_".join(p for p in (test_name, label, column) if p)
            name = _unique(config.get("name", default), tests)
            tests[name] = _make(name, sql, record, origin, key, config)
    for path in project.singular_tests:
        rel = str(path.relative_to(project.root))
        record = Recorded(rel)
        sql = renderer.render_file(rel, renderer.context(record))
        config = _test_config(record.captured, rel, "config()")
        if config.get("enabled", True) is False:
            continue
        name = _unique(config.get("name", path.stem), tests)
        tests[name] = _make(name, sql, record, rel, "the test file", config)
    return tests


def _make(name: str, sql: str, record: Recorded, origin: str, key: str,
          config: dict[str, Any]) -> DataTest:
    tags = config.get("tags") or ()
    return DataTest(name=name, sql=sql, refs=tuple(record.refs), sources=tuple(record.sources),
                    origin=origin, key=key, severity=config.get("severity", "error"),
                    error_if=str(config.get("error_if", "!=0")),
                    warn_if=str(config.get("warn_if", "!=0")),
                    tags=(tags,) if isinstance(tags, str) else tuple(tags),
                    secrets=tuple(record.secrets),
                    store_failures=bool(config.get("store_failures", False)))


@dataclass(frozen=True)
class TestRun:
    status: str  # success | warn | error
    failures: int
    sample: str  # the first failing rows, as a table
    rows: DataFrame | None = None  # the failing rows


def run_test(spark: SparkSession, test: DataTest, limit: int = SHOW_ROWS,
             counted: int | None = None) -> TestRun:
    """Run a test whose inputs are registered; count its failing rows and show the first few.
    counted: its failing rows, counted already with other tests (run/table_test_passes.py): a test
    none of whose rows fail is not run again."""
    if counted == 0:
        return TestRun(test.outcome(0), 0, "")
    try:
        failing = spark.sql(test.sql)
        failures = failing.count()
        sample = ""
        if failures:
            sample = rows_text(failing.limit(limit).toArrow())
            if failures > limit:
                sample += f"\n... {failures - limit} more"
    except Exception as exc:
        if isinstance(exc, MedallionError):
            raise
        first = str(exc).strip().splitlines()[0]
        raise ProjectError(f"test '{test.name}' ({test.key}) cannot run: {first}",
                           path=test.origin,
                           hint="check the column and model names the test uses") from exc
    return TestRun(test.outcome(failures), failures, sample, failing)
