"""Each config value checked on its own and made what NodeConfig holds: column names,
expectations, table properties, whole numbers, hook statements, a contract, names as catalogs
take them, persist_docs, meta, freshness limits, renamed columns and a compaction policy
(model_config.py checks the keys and how values go together).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from ..core.config import (
    EXPECTATION_ACTIONS,
    PERSIST_DOCS,
    CompactionPolicy,
    as_tuple,
    interval_seconds,
    size_bytes,
)
from ..core.errors import MedallionError, ProjectError

# Given with no column, these would build the model another way (an empty tags clears them)
NAMES_REQUIRED = ("unique_key", "sequence_by", "incremental_by")


def names(raw: dict[str, Any], key: str, origin: str) -> tuple[str, ...]:
    """A config value naming columns (or tags): one name, a comma-separated string, or a list
    of names."""
    value = raw.get(key)
    if value is None or isinstance(value, str) or (
            isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)):
        names = as_tuple(value)
        if value is not None and not names and key in NAMES_REQUIRED:
            raise ProjectError(f"config '{key}' names no column", path=origin,
                               hint=f"name the columns, e.g. {key}='id', or leave {key} out")
        return names
    raise ProjectError(f"config '{key}' is {value!r}", path=origin,
                       hint=f"give a name or a list of names, e.g. {key}='id' or "
                            f"{key}=['a', 'b']")


def expectations(raw: Any, origin: str) -> dict[str, dict[str, str]]:
    """{rule: {expect: SQL condition, on_violation: warn|drop|fail}}; a bare string is a warn."""
    if not isinstance(raw, dict):
        raise ProjectError("expectations must map rule names to conditions", path=origin,
                           hint="e.g. expectations: {positive_qty: {expect: 'qty > 0', "
                                "on_violation: drop}}")
    rules: dict[str, dict[str, str]] = {}
    for name, rule in raw.items():
        rule = {"expect": rule} if isinstance(rule, str) else dict(rule or {})
        unknown = set(rule) - {"expect", "on_violation"}
        if "expect" not in rule or unknown:
            raise ProjectError(f"expectation '{name}' needs 'expect' (a SQL condition) and "
                               "optionally 'on_violation'" + (
                                   f"; unknown: {', '.join(sorted(unknown))}" if unknown else ""),
                               path=origin)
        action = rule.get("on_violation", "warn")
        if action not in EXPECTATION_ACTIONS:
            raise ProjectError(f"expectation '{name}': on_violation is {action!r}; it must be "
                               "one of warn, drop, fail", path=origin)
        rules[str(name)] = {"expect": str(rule["expect"]), "on_violation": action}
    return rules


def renamed_columns(value: Any, origin: str) -> dict[str, str]:
    """{old name: new name} of columns renamed in place, each name once."""
    if value is None:
        return {}
    pairs = value.items() if isinstance(value, dict) else ()
    renamed = {str(old): str(new) for old, new in pairs if isinstance(new, str)}
    if not renamed or len(renamed) != len(value) or len(set(renamed.values())) != len(renamed) \
            or set(renamed) & set(renamed.values()):
        raise ProjectError(f"config 'renamed_columns' is {value!r}", path=origin,
                           hint="map each old column name to its new one, each name once, "
                                "e.g. renamed_columns: {cust_id: customer_id}")
    return renamed


def table_properties(raw: Any, origin: str) -> dict[str, str]:
    """{property: value} with values as Delta keeps them: strings, booleans as true/false."""
    if not isinstance(raw, dict) or any(isinstance(v, (dict, list)) for v in raw.values()):
        raise ProjectError("table_properties must map property names to values", path=origin,
                           hint="e.g. table_properties: {delta.enableChangeDataFeed: true}")
    return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in raw.items()}


def whole_number(value: Any, key: str, origin: str, least: int = 1) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ProjectError(f"config '{key}' is {value!r}; it must be a whole number of "
                           f"{least} or more", path=origin)
    return value


def hook_statements(value: Any, key: str, origin: str) -> tuple[str, ...]:
    """Hook SQL: one statement, or a list of them, run in order."""
    statements = () if value is None else (value,) if isinstance(value, str) else value
    if not isinstance(statements, (list, tuple)) or not all(
            isinstance(s, str) and s.strip() for s in statements):
        raise ProjectError(f"config '{key}' must be SQL statements (a string or a list of "
                           "strings)", path=origin,
                           hint=f"e.g. {key}: \"select assert_true(count(*) > 0) from "
                                "{{ this }}\"")
    return tuple(statements)


def contract(value: Any, origin: str) -> bool:
    """`contract: {enforced: true}` as in dbt (a bare true or false too)."""
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, dict) and set(value) <= {"enforced"} and isinstance(
            value.get("enforced", False), bool):
        return bool(value.get("enforced", False))
    raise ProjectError(f"config 'contract' is {value!r}", path=origin,
                       hint="use contract: {enforced: true}")


def identifier(value: Any, key: str, origin: str) -> str | None:
    """A schema or table name as catalogs take it unquoted: letters, digits, underscores."""
    if value is None:
        return None
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise ProjectError(f"config '{key}' is {value!r}; it must be a name of letters, "
                           "digits and underscores", path=origin,
                           hint=f"e.g. {key}: finance")
    return value


def persist_docs(value: Any, origin: str) -> tuple[str, ...]:
    """dbt's {relation: true, columns: true} as the parts whose descriptions are kept."""
    if value is None:
        return ()
    if not isinstance(value, dict) or set(value) - set(PERSIST_DOCS) or not all(
            isinstance(v, bool) for v in value.values()):
        raise ProjectError(f"config 'persist_docs' is {value!r}", path=origin,
                           hint="use persist_docs: {relation: true, columns: true}")
    return tuple(part for part in PERSIST_DOCS if value.get(part))


def meta(value: Any, origin: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProjectError(f"config 'meta' is {value!r}; it must be a mapping", path=origin,
                           hint="e.g. meta: {owner: finance-team}")
    return dict(value)


COMPACTION_SIZES = ("small_file_size", "min_small_bytes", "min_mean_file_size")
COMPACTION_KEYS = (*COMPACTION_SIZES, "min_small_files", "min_interval")


def compaction(value: Any, after_files: int | None, lagged: bool,
               origin: str) -> CompactionPolicy | None:
    """The table's compaction policy: `compaction` as written (a mapping of thresholds over
    the defaults, or false for none); else optimize_after_files N, short for
    {min_small_files: N + 1}; else the defaults for a model with a target_lag; else none."""
    if value is False or value is None and after_files is None and not lagged:
        return None
    if value is None or value is True:
        value = {}
    if not isinstance(value, dict) or set(value) - set(COMPACTION_KEYS):
        raise ProjectError(f"config 'compaction' is {value!r}", path=origin,
                           hint="false, or thresholds among " + ", ".join(COMPACTION_KEYS)
                                + ", e.g. {min_small_files: 20, min_interval: '5 minutes'}")
    policy = CompactionPolicy() if after_files is None else CompactionPolicy(
        min_small_files=after_files + 1)
    sizes = {}
    for key in set(value) & set(COMPACTION_SIZES):
        sizes[key] = None if value[key] is None and key != "small_file_size" else size_bytes(
            value[key])
        if value[key] is not None and not sizes[key]:
            raise ProjectError(f"compaction {key} is {value[key]!r}", path=origin,
                               hint="a size such as '32 MB' or '1 GB'")
    interval = value.get("min_interval")
    seconds = interval_seconds(interval) if isinstance(interval, str) else None
    if interval is not None and seconds is None:
        raise ProjectError(f"compaction min_interval is {interval!r}", path=origin,
                           hint="an interval such as '1 minute' or '30 seconds'")
    return replace(
        policy, small_file_bytes=sizes.get("small_file_size") or policy.small_file_bytes,
        min_small_files=whole_number(value.get("min_small_files"), "compaction min_small_files",
                                     origin, least=2) or policy.min_small_files,
        min_small_bytes=sizes.get("min_small_bytes", policy.min_small_bytes),
        min_mean_file_bytes=sizes.get("min_mean_file_size", policy.min_mean_file_bytes),
        min_interval=policy.min_interval if seconds is None else seconds)


FRESHNESS_LIMITS = ("warn_after", "error_after")


def _interval(value: Any, what: str, origin: str) -> float:
    """An interval as seconds: '6 hours', or dbt's {count: 6, period: hour}."""
    if isinstance(value, dict) and set(value) == {"count", "period"}:
        value = f"{value['count']} {value['period']}"
    seconds = interval_seconds(value) if isinstance(value, str) else None
    if not seconds:
        raise MedallionError(f"{what} is {value!r}", path=origin,
                             hint="an interval such as '6 hours' or {count: 6, period: hour}")
    return seconds


def freshness_limits(raw: Any, origin: str) -> dict[str, float]:
    """{warn_after: seconds, error_after: seconds}, either or both."""
    if not isinstance(raw, dict) or not raw or set(raw) - set(FRESHNESS_LIMITS):
        raise MedallionError("freshness must set warn_after and/or error_after", path=origin,
                             hint="e.g. freshness: {warn_after: '6 hours', error_after: "
                                  "{count: 1, period: day}}")
    return {key: _interval(value, f"freshness {key}", origin) for key, value in raw.items()}
