"""Property files (models/**/*.yml): their keys checked, and the sources they declare (landing
files, Delta tables, Kafka topics, CDC), with schemas, options and freshness limits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from ..core.config import as_tuple
from ..core.errors import ProjectError
from ..core.locations import resolve
from ..core.project import CDC_FORMATS, SOURCE_FORMATS, UNKNOWN_FIELDS, SourceTable
from .compiled import strict_template
from .config_values import freshness_limits
from .model_config import check_keys
from .yaml_io import env_var, read_yaml

# What a Kafka source must say: where the brokers are, and which topics to read.
KAFKA_BROKERS = "kafka.bootstrap.servers"


KAFKA_TOPICS = ("subscribe", "subscribePattern", "assign")


# The keys each mapping of a properties file (models/**/*.yml, seeds/*.yml) may have: a
# misspelled one (`colums:`) would otherwise be ignored, and the tests under it with it.
PROPERTY_KEYS = {
    "file": ("version", "models", "seeds", "sources"),
    "models": ("name", "description", "config", "columns", "tests", "data_tests", "meta", "docs"),
    "columns": ("name", "description", "tests", "data_tests", "data_type", "type", "meta",
                "quote"),
    "sources": ("name", "description", "path", "format", "options", "tables", "meta",
                "unknown_fields", "loaded_at_field", "freshness"),
    "tables": ("name", "description", "format", "path", "schema", "columns", "options", "meta",
               "unknown_fields", "cdc", "unique_key", "loaded_at_field", "freshness", "tests",
               "data_tests"),
}


def _check_property_keys(value: Any, kind: str, origin: str, where: str) -> None:
    """Every key of a properties mapping is one medallion reads (with file, line and the
    closest valid key otherwise); lists under `kind` are walked down to their columns."""
    if not isinstance(value, dict):
        raise ProjectError(f"{where}: expected a mapping, found {type(value).__name__}",
                           path=origin, line=getattr(value, "line", None))
    check_keys(value, origin, PROPERTY_KEYS[kind], "key", where, "keys here")
    children = {"file": ("models", "seeds", "sources"), "models": ("columns",),
                "seeds": ("columns",), "sources": ("tables",), "tables": ("columns",)}
    for child in children.get(kind, ()):
        items = value.get(child) or []
        if not isinstance(items, list):
            raise ProjectError(f"{where}: '{child}' must be a list", path=origin,
                               line=getattr(value, "lines", {}).get(child))
        for i, item in enumerate(items):
            name = item.get("name", i) if isinstance(item, dict) else i
            _check_property_keys(item, child, origin,
                                 f"{child}[{name}]" if kind == "file" else f"{where}.{child}[{name}]")


def _discover(root: Path, dirs: list[str], suffix: str) -> list[tuple[Path, Path]]:
    found: list[tuple[Path, Path]] = []
    for d in dirs:
        base = root / d
        if base.is_dir():
            found.extend((base, p) for p in sorted(base.rglob(f"*{suffix}")) if p.is_file())
    return found


def _properties(root: Path, model_dirs: list[str]) -> list[tuple[Path, dict[str, Any]]]:
    files = _discover(root, model_dirs, ".yml") + _discover(root, model_dirs, ".yaml")
    found = []
    for _, path in files:
        data = read_yaml(path)
        _check_property_keys(data, "file", str(path.relative_to(root)), "properties")
        found.append((path, data))
    return found


def _schema_ddl(table: dict[str, Any], where: str) -> str | None:
    """A source table's schema as DDL: given as `schema: "a int, b string"`, or as `columns:`
    with a name and a data_type (or type) each, as in dbt."""
    if table.get("schema"):
        return str(table["schema"])
    typed = [c for c in table.get("columns") or () if c.get("data_type") or c.get("type")]
    if not typed:
        return None
    if len(typed) != len(table["columns"]):
        raise ProjectError(f"{where}: every column needs a data_type once one has one",
                           hint="or give the whole schema as schema: 'a int, b string'")
    return ", ".join(f"`{c['name']}` {c.get('data_type') or c.get('type')}" for c in typed)


def _sources(root: Path, props: list[tuple[Path, dict[str, Any]]]) -> dict[tuple[str, str],
             SourceTable]:
    sources = {}
    for path, data in props:
        origin = str(path.relative_to(root))
        for source in data.get("sources") or []:
            sname = source.get("name")
            if not sname:
                raise ProjectError("a source has no 'name'", path=origin)
            try:
                base = resolve(_rendered(source.get("path", "."), origin,
                                         f"source '{sname}': path"), root)
            except ValueError as exc:
                raise ProjectError(f"source '{sname}': {exc}", path=origin) from exc
            for table in source.get("tables") or []:
                tname = table.get("name")
                fmt = table.get("format", source.get("format", "delta"))
                if fmt not in SOURCE_FORMATS:
                    raise ProjectError(
                        f"source '{sname}.{tname}' has unknown format '{fmt}'", path=origin,
                        hint="formats: " + ", ".join(SOURCE_FORMATS))
                unknown = table.get("unknown_fields", source.get("unknown_fields", "rescue"))
                if unknown not in UNKNOWN_FIELDS:
                    raise ProjectError(
                        f"source '{sname}.{tname}' has unknown_fields: {unknown!r}", path=origin,
                        line=getattr(table, "lines", {}).get("unknown_fields"),
                        hint="unknown_fields: " + " | ".join(UNKNOWN_FIELDS))
                if unknown == "add_new_columns" and (fmt != "json" or table.get("schema")
                                                     or table.get("columns")):
                    raise ProjectError(
                        f"source '{sname}.{tname}': unknown_fields: add_new_columns widens the "
                        "schema inferred for a JSON table that declares none", path=origin,
                        line=getattr(table, "lines", {}).get("unknown_fields"),
                        hint="drop its schema to have one inferred and kept, or use "
                             "unknown_fields: rescue")
                options = _rendered_options(
                    {**(source.get("options") or {}), **(table.get("options") or {})},
                    origin, f"source '{sname}.{tname}'")
                if fmt == "kafka":
                    _check_kafka_options(options, origin, f"source '{sname}.{tname}'")
                schema = _schema_ddl(table, f"{origin}, source {sname}.{tname}")
                unique_key = as_tuple(table.get("unique_key"))
                _check_cdc(table, fmt, schema, unique_key, origin, f"source '{sname}.{tname}'")
                sources[(sname, tname)] = SourceTable(
                    source=sname, name=tname, format=fmt,
                    path=_table_location(table, base, origin, f"source '{sname}.{tname}'"),
                    schema=schema, options=options, origin=origin, unknown_fields=unknown,
                    cdc=table.get("cdc"), unique_key=unique_key,
                    loaded_at_field=table.get("loaded_at_field", source.get("loaded_at_field")),
                    freshness=_source_freshness(table, source, origin, f"{sname}.{tname}"),
                    data_tests=tuple(table.get("data_tests") or table.get("tests") or ()),
                    columns=tuple(table.get("columns") or ()),
                    description=str(table.get("description") or source.get("description") or ""))
    return sources


def _source_freshness(table: dict[str, Any], source: dict[str, Any], origin: str,
                      where: str) -> dict[str, Any]:
    """The table's freshness limits, else its source's; `freshness: null` on a table turns
    its source's off, as in dbt."""
    raw = table["freshness"] if "freshness" in table else source.get("freshness")
    return freshness_limits(raw, f"{origin}, source {where}") if raw else {}


def _rendered_options(options: dict[str, Any], origin: str, where: str) -> dict[str, str]:
    """Reader options with env_var() rendered, so that addresses and credentials come from the
    environment, not the file (values are never written to target/)."""
    return {str(key): _rendered(value, origin, f"{where}: option {key}")
            for key, value in options.items()}


def _rendered(value: Any, origin: str, where: str) -> str:
    """A value with env_var() rendered (a reader option, a source's path: a landing zone that
    is a local folder on a laptop and a bucket in production)."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if "{{" not in text:
        return text
    try:
        return strict_template(text).render(env_var=env_var)
    except jinja2.TemplateError as exc:
        raise ProjectError(f"{where}: cannot render: {exc}", path=origin) from exc


def _check_kafka_options(options: dict[str, Any], origin: str, where: str) -> None:
    if not options.get(KAFKA_BROKERS):
        raise ProjectError(f"{where} is a Kafka source without {KAFKA_BROKERS}", path=origin,
                           hint="add it under options:, e.g. " + KAFKA_BROKERS + ': "{{ '
                                "env_var('KAFKA_BOOTSTRAP_SERVERS') }}\"")
    if sum(key in options for key in KAFKA_TOPICS) != 1:
        raise ProjectError(f"{where} must name its topics with exactly one of "
                           + ", ".join(KAFKA_TOPICS), path=origin,
                           hint="e.g. options: {subscribe: orders}")


def _check_cdc(table: dict[str, Any], fmt: str, schema: str | None, unique_key: tuple[Any, ...],
               origin: str,
               where: str) -> None:
    """A change-event source: Debezium's JSON envelope, from Kafka or JSON files, with the
    schema of the table whose changes it carries."""
    line = getattr(table, "lines", {}).get("cdc")
    cdc = table.get("cdc")
    if cdc is None:
        if unique_key:
            raise ProjectError(f"{where}: unique_key is only read with cdc: debezium",
                               path=origin, line=getattr(table, "lines", {}).get("unique_key"),
                               hint="remove it; a model's unique_key goes in its config")
        return
    if cdc not in CDC_FORMATS:
        raise ProjectError(f"{where} has cdc: {cdc!r}", path=origin, line=line,
                           hint="cdc: " + " | ".join(CDC_FORMATS))
    if fmt not in ("json", "kafka"):
        raise ProjectError(f"{where}: cdc: {cdc} reads JSON change events, not {fmt}",
                           path=origin, line=line, hint="use format: json or kafka")
    if not schema:
        raise ProjectError(f"{where}: cdc: {cdc} needs the schema of the changed table",
                           path=origin, line=line,
                           hint="add schema: 'id bigint, name string, ...' (the columns of "
                                "the events' before and after)")


def _table_location(table: dict[str, Any], base: str, origin: str, where: str) -> str:
    """A source table's files: its `path` under the source's (a local folder or a URI)."""
    try:
        return resolve(_rendered(table.get("path", table.get("name")), origin, f"{where}: path"),
                       base)
    except ValueError as exc:
        raise ProjectError(f"{where}: {exc}", path=origin) from exc
