"""Project loading: medallion_project.yml, profiles, and the files that make up the project.

Nothing here starts Spark: `compile` and `ls` must answer without a JVM.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import yaml

from ..core.config import (
    SPELLED_KEYS,
    as_tuple,
    check_keys,
    freshness_limits,
    hook_statements,
    merge_layers,
)
from ..core.errors import MedallionError, closest
from ..core.locations import is_remote, join, resolve

PROJECT_FILE = "medallion_project.yml"
PROFILES_FILE = "profiles.yml"
ENGINES = ("embedded", "delta-spark")
SOURCE_FORMATS = ("json", "csv", "parquet", "delta", "kafka")
# What a Kafka source must say: where the brokers are, and which topics to read.
KAFKA_BROKERS = "kafka.bootstrap.servers"
KAFKA_TOPICS = ("subscribe", "subscribePattern", "assign")
CDC_FORMATS = ("debezium",)
# What JSON fields outside the schema become; add_new_columns (an inferred schema only) widens
# the kept schema with the fields of files landed since, as Auto Loader's addNewColumns
UNKNOWN_FIELDS = ("rescue", "fail", "ignore", "add_new_columns")
QUARANTINE_SUFFIX = "_quarantine"
TOMBSTONE_SUFFIX = "_tombstones"
TRUNCATE_SUFFIX = "_truncates"
# Bronze keeps whatever new columns land; other layers fail on them unless told otherwise.
LAYER_DEFAULTS = {"bronze": {"on_schema_change": "append_new_columns"}}


@dataclass(frozen=True)
class Target:
    """One output of a profile: which engine, where the warehouse is, how Spark starts."""

    name: str
    engine: str
    warehouse: str  # a location: an absolute local path or an object-store URI (locations.py)
    spark_master: str
    spark_conf: dict
    threads: int
    delta_jars: str | None = None  # delta-spark engine: a folder of Delta JARs for spark.jars
    profiles_file: str | None = None  # where the target is defined, for errors about it
    # OpenLineage: {"namespace": str, "transport": {...openlineage-python's transport config},
    # "batch_every": N}; empty: no lineage events (lineage.py)
    lineage: dict = field(default_factory=dict)
    # Where tables are registered by name (catalog.py): None (nowhere: ref() names paths),
    # "local" (a Derby metastore in the warehouse) or "session" (the cluster's own catalog:
    # a Hive metastore or Unity Catalog)
    metastore: str | None = None


@dataclass(frozen=True)
class SourceTable:
    source: str
    name: str
    format: str
    path: str  # a location: a local folder or an object-store URI
    schema: str | None
    options: dict
    origin: str
    unknown_fields: str = "rescue"  # JSON fields outside the schema: UNKNOWN_FIELDS
    cdc: str | None = None  # "debezium": values are change events, unpacked (build/debezium.py)
    unique_key: tuple[str, ...] = ()  # a change event's key: an update that changes it is split
    # dbt's source freshness: the column saying when a row was loaded (else the files' or
    # commits' times) and {warn_after, error_after} in seconds (freshness.py)
    loaded_at_field: str | None = None
    freshness: dict = field(default_factory=dict)
    data_tests: tuple = ()  # generic tests on the table, and on its columns (in `columns`)
    columns: tuple = ()
    description: str = ""

    @property
    def relation(self) -> str:
        return f"{self.source}__{self.name}"

    def unlanded(self) -> MedallionError | None:
        """Landing files whose local folder does not exist: what reading them would raise."""
        if self.format in ("delta", "kafka") or is_remote(self.path) or Path(self.path).exists():
            return None
        return MedallionError(f"source '{self.source}.{self.name}': no files at {self.path}",
                              path=self.origin, hint="land files there or fix the source's path")


@dataclass(frozen=True)
class NodeFile:
    """A model (.sql under a model path) or a seed (.csv under a seed path)."""

    kind: str  # "model" | "seed"
    name: str
    path: Path
    rel_path: str
    layer: str
    yaml_config: dict
    description: str = ""
    columns: tuple = ()
    data_tests: tuple = ()  # model-level tests from its properties file
    properties: str | None = None  # the models/**/*.yml file describing it, if any


@dataclass
class Project:
    root: Path
    name: str
    vars: dict
    target: Target
    nodes: dict[str, NodeFile]
    sources: dict[tuple[str, str], SourceTable]
    macro_files: list[Path]
    singular_tests: list[Path] = field(default_factory=list)
    unit_test_files: list[Path] = field(default_factory=list)
    clean_targets: list[str] = field(default_factory=lambda: ["target"])  # medallion clean
    # dbt's on-run-start / on-run-end: SQL run once before and after the nodes of a build
    on_run_start: tuple[str, ...] = ()
    on_run_end: tuple[str, ...] = ()
    flow_targets: dict[str, str] = field(default_factory=dict)  # flow -> model (set by tasks.load)

    def table_path(self, node: NodeFile) -> str:
        """Its table; a flow's is the table of the model it flows into."""
        owner = self.nodes[self.flow_targets[node.name]] if node.name in self.flow_targets else node
        return join(self.target.warehouse, owner.layer, owner.name)

    def quarantine_path(self, node: NodeFile) -> str:
        """Where rows a model's `drop` expectations reject are kept, beside its table."""
        return self.table_path(node) + QUARANTINE_SUFFIX

    def tombstone_path(self, node: NodeFile) -> str:
        """Where a MERGE model with deletes remembers the keys it deleted, beside its table."""
        return self.table_path(node) + TOMBSTONE_SUFFIX

    def truncate_path(self, node: NodeFile) -> str:
        """Where a MERGE model with truncate_when remembers its latest truncate."""
        return self.table_path(node) + TRUNCATE_SUFFIX

    def inferred_schema_path(self, source: SourceTable) -> str:
        """Where the schema inferred for a streaming file source without one is kept."""
        return join(self.target.warehouse, "_medallion", "schemas", f"{source.relation}.ddl")

    def test_failures_path(self, test_name: str) -> str:
        """Where a data test with store_failures keeps its failing rows of the last run."""
        return join(self.target.warehouse, "_medallion", "test_failures", test_name)

    def checkpoint_path(self, node: NodeFile) -> str:
        """Where a streaming model's Structured Streaming checkpoint lives."""
        return join(self.target.warehouse, "_checkpoints", node.layer, node.name)

    @property
    def target_dir(self) -> Path:
        return self.root / "target"


def env_var(name: str, default: str | None = None) -> str:
    value = os.environ.get(name, default)
    if value is None:
        raise MedallionError(f"environment variable {name} is not set and has no default",
                             hint=f"export {name}=... or call env_var('{name}', 'default')")
    return value


class YamlMap(dict):
    """A YAML mapping that knows its line and each key's line (1-based), for errors."""

    line: int | None = None
    lines: dict = {}


class _LineLoader(yaml.SafeLoader):
    pass


def _mapping_with_lines(loader: _LineLoader, node) -> YamlMap:
    mapping = YamlMap(loader.construct_mapping(node, deep=True))
    mapping.line = node.start_mark.line + 1
    mapping.lines = {key.value: key.start_mark.line + 1 for key, _ in node.value
                     if isinstance(key.value, str)}
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_with_lines)


class _Deferred(jinja2.Undefined):
    """While the project file is read, a name other than env_var renders as itself, so hooks
    (rendered when they run, with ref, this, var and macros) keep their Jinja."""

    def __str__(self) -> str:
        return "{{ " + self._undefined_name + " }}"

    def __call__(self, *args, **kwargs) -> str:
        given = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
        return "{{ " + f"{self._undefined_name}({', '.join(given)})" + " }}"

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Deferred(name=f"{self._undefined_name}.{name}")


HOOK_KEYS = ("on-run-start", "on-run-end", "pre_hook", "post_hook", "pre-hook", "post-hook")


def _jinja_outside_hooks(data, where: str = "") -> str | None:
    """Where Jinja was left unrendered outside hooks (a name that is not env_var)."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key not in HOOK_KEYS:
                found = _jinja_outside_hooks(value, f"{where}.{key}" if where else str(key))
                if found:
                    return found
    elif isinstance(data, list):
        return next(filter(None, (_jinja_outside_hooks(v, where) for v in data)), None)
    elif isinstance(data, str) and "{{" in data:
        return f"{where}: {data}"
    return None


def read_yaml(path: Path, render_env: bool = False, hooks: bool = False) -> dict:
    """Parse a YAML file (optionally rendering env_var() first; with hooks, the Jinja of hook
    keys is kept for when they run); errors name the file and line."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise MedallionError(f"cannot read file: {exc.strerror}", path=path) from exc
    try:
        if render_env:
            undefined = _Deferred if hooks else jinja2.StrictUndefined
            text = jinja2.Environment(undefined=undefined).from_string(text).render(
                env_var=env_var)
        data = yaml.load(text, Loader=_LineLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise MedallionError(f"invalid YAML: {getattr(exc, 'problem', exc)}", path=path,
                             line=mark.line + 1 if mark else None) from exc
    except jinja2.TemplateError as exc:
        raise MedallionError(f"cannot render: {exc}", path=path,
                             line=getattr(exc, "lineno", None)) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise MedallionError("expected a mapping at the top level", path=path)
    left = _jinja_outside_hooks(data) if hooks else None
    if left:
        raise MedallionError(f"cannot render {left}: only env_var() is known in this file "
                             "outside hooks", path=path)
    return data


def load_target(root: Path, profile_name: str, profiles_dir: Path | None,
                target_name: str | None) -> Target:
    profiles_dir = profiles_dir or Path(os.environ.get("MEDALLION_PROFILES_DIR", root / "profiles"))
    profiles_path = Path(profiles_dir) / PROFILES_FILE
    if not profiles_path.is_file():
        raise MedallionError("profiles file not found", path=profiles_path,
                             hint="create profiles/profiles.yml or pass --profiles-dir")
    profiles = read_yaml(profiles_path, render_env=True)
    if profile_name not in profiles:
        raise MedallionError(
            f"profile '{profile_name}' not found. {closest(profile_name, profiles)}".strip(),
            path=profiles_path,
            hint=f"the project asks for profile '{profile_name}' in {PROJECT_FILE}")
    profile = profiles[profile_name] or {}
    outputs = profile.get("outputs") or {}
    name = target_name or profile.get("target")
    if name not in outputs:
        raise MedallionError(
            f"target '{name}' not found in profile '{profile_name}'. "
            f"{closest(str(name), outputs)}".strip(), path=profiles_path,
            hint="targets here: " + (", ".join(outputs) or "none"))
    out = outputs[name] or {}
    where = f"profile '{profile_name}', target '{name}'"
    check_keys(out, str(profiles_path), TARGET_KEYS, "key", where, "target keys")
    check_keys(out.get("spark") or {}, str(profiles_path), ("master", "conf"), "spark key",
               where, "spark keys")
    engine = out.get("engine", "embedded")
    if engine not in ENGINES:
        raise MedallionError(f"target '{name}' has unknown engine '{engine}'", path=profiles_path,
                             hint="engines: " + ", ".join(ENGINES))
    spark = out.get("spark") or {}
    try:
        warehouse = resolve(str(out.get("warehouse", "warehouse")), root)
    except ValueError as exc:
        raise MedallionError(f"target '{name}': warehouse {exc}", path=profiles_path,
                             hint="a folder (relative to the project or absolute), file:///path, "
                                  "or an object-store URI such as s3a://bucket/lake") from exc
    metastore = out.get("metastore")
    if metastore is not None and metastore not in METASTORES:
        raise MedallionError(f"target '{name}': metastore is {metastore!r}", path=profiles_path,
                             hint="metastore: local (a Derby metastore in the warehouse) or "
                                  "session (the cluster's Hive metastore or Unity Catalog)")
    if metastore and engine != "delta-spark":
        raise MedallionError(
            f"target '{name}': metastore needs the delta-spark engine", path=profiles_path,
            hint="the embedded engine's tables are kept by delta-rs, and no Spark catalog can "
                 "read them there; use engine: delta-spark, or drop metastore")
    if metastore == "local" and is_remote(warehouse):
        raise MedallionError(f"target '{name}': metastore: local keeps a Derby database in the "
                             f"warehouse, and {warehouse} is not on this machine",
                             path=profiles_path,
                             hint="on a cluster use metastore: session (its own catalog)")
    return Target(
        name=name,
        engine=engine,
        warehouse=warehouse,
        spark_master=str(spark.get("master", "local[*]")),
        spark_conf={str(k): str(v) for k, v in (spark.get("conf") or {}).items()},
        threads=int(out.get("threads", 1)),
        delta_jars=str(root / out["delta_jars"]) if out.get("delta_jars") else None,
        profiles_file=str(profiles_path),
        lineage=_lineage_config(out.get("lineage"), profiles_path, name),
        metastore=metastore,
    )


LINEAGE_KEYS = ("namespace", "transport", "batch_every")
TARGET_KEYS = ("engine", "warehouse", "threads", "spark", "delta_jars", "metastore", "lineage")
METASTORES = ("local", "session")


def _lineage_config(raw, profiles_path: Path, target: str) -> dict:
    """A target's `lineage:` mapping, checked: a transport as openlineage-python takes it."""
    if raw is None:
        return {}
    where = f"target '{target}': lineage"
    if not isinstance(raw, dict):
        raise MedallionError(f"{where} must be a mapping", path=profiles_path,
                             hint="e.g. lineage: {transport: {type: http, url: "
                                  "'http://localhost:5000'}}")
    check_keys(raw, str(profiles_path), LINEAGE_KEYS, "lineage key", where, "lineage keys")
    transport = raw.get("transport")
    if not isinstance(transport, dict) or not transport.get("type"):
        raise MedallionError(f"{where} needs a transport with a type (http, file, console, "
                             "kafka...)", path=profiles_path,
                             hint="e.g. transport: {type: http, url: 'http://localhost:5000'}")
    every = raw.get("batch_every", 1)
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise MedallionError(f"{where}: batch_every is {every!r}; it must be a whole number "
                             "above 0", path=profiles_path)
    return {**raw, "batch_every": every}


IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_name(name: str, kind: str, rel_path: str) -> None:
    """A model's or seed's name becomes its table's and checkpoint's folder and a SQL relation:
    only identifier-like names, so none escapes its folder (`..`) or needs quoting."""
    if not IDENTIFIER.fullmatch(name):
        raise MedallionError(
            f"the {kind} name {name!r} (from the file name) is not allowed: names are letters, "
            "digits and underscores, not starting with a digit", path=rel_path,
            hint="rename the file, e.g. " + (re.sub(r"\W+", "_", name).strip("_") or "my_model")
            + Path(rel_path).suffix)


def _folder_config(tree: dict, rel_parts: tuple[str, ...]) -> dict:
    """Config for a file from the nested per-folder mapping in medallion_project.yml."""
    layers = []
    level = tree or {}
    for part in ("",) + rel_parts:
        if part:
            level = level.get(part) if isinstance(level.get(part), dict) else None
            if level is None:
                break
        layers.append({k: v for k, v in level.items() if k in SPELLED_KEYS})
    return merge_layers(*layers)


def _check_folder_tree(tree: dict, base: Path, origin: str) -> None:
    """Every key in a per-folder config tree is a config key or an existing subfolder."""
    for key, value in (tree or {}).items():
        if key in SPELLED_KEYS:
            continue
        if isinstance(value, dict) and ((base / key).is_dir() or (base / f"{key}.csv").is_file()):
            _check_folder_tree(value, base / key, origin)
            continue
        check_keys({key: value}, origin)  # raises with the list of valid keys


def _discover(root: Path, dirs: list[str], suffix: str) -> list[tuple[Path, Path]]:
    found = []
    for d in dirs:
        base = root / d
        if base.is_dir():
            found.extend((base, p) for p in sorted(base.rglob(f"*{suffix}")) if p.is_file())
    return found


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
PROPERTY_KEYS["seeds"] = PROPERTY_KEYS["models"]


def _check_property_keys(value, kind: str, origin: str, where: str) -> None:
    """Every key of a properties mapping is one medallion reads (with file, line and the
    closest valid key otherwise); lists under `kind` are walked down to their columns."""
    if not isinstance(value, dict):
        raise MedallionError(f"{where}: expected a mapping, found {type(value).__name__}",
                             path=origin, line=getattr(value, "line", None))
    check_keys(value, origin, PROPERTY_KEYS[kind], "key", where, "keys here")
    children = {"file": ("models", "seeds", "sources"), "models": ("columns",),
                "seeds": ("columns",), "sources": ("tables",), "tables": ("columns",)}
    for child in children.get(kind, ()):
        items = value.get(child) or []
        if not isinstance(items, list):
            raise MedallionError(f"{where}: '{child}' must be a list", path=origin,
                                 line=getattr(value, "lines", {}).get(child))
        for i, item in enumerate(items):
            name = item.get("name", i) if isinstance(item, dict) else i
            _check_property_keys(item, child, origin,
                                 f"{child}[{name}]" if kind == "file" else f"{where}.{child}[{name}]")


def _properties(root: Path, model_dirs: list[str]) -> list[tuple[Path, dict]]:
    files = _discover(root, model_dirs, ".yml") + _discover(root, model_dirs, ".yaml")
    found = []
    for _, path in files:
        data = read_yaml(path)
        _check_property_keys(data, "file", str(path.relative_to(root)), "properties")
        found.append((path, data))
    return found


def _schema_ddl(table: dict, where: str) -> str | None:
    """A source table's schema as DDL: given as `schema: "a int, b string"`, or as `columns:`
    with a name and a data_type (or type) each, as in dbt."""
    if table.get("schema"):
        return str(table["schema"])
    typed = [c for c in table.get("columns") or () if c.get("data_type") or c.get("type")]
    if not typed:
        return None
    if len(typed) != len(table["columns"]):
        raise MedallionError(f"{where}: every column needs a data_type once one has one",
                             hint="or give the whole schema as schema: 'a int, b string'")
    return ", ".join(f"`{c['name']}` {c.get('data_type') or c.get('type')}" for c in typed)


def _sources(root: Path, props: list[tuple[Path, dict]]) -> dict[tuple[str, str], SourceTable]:
    sources = {}
    for path, data in props:
        origin = str(path.relative_to(root))
        for source in data.get("sources") or []:
            sname = source.get("name")
            if not sname:
                raise MedallionError("a source has no 'name'", path=origin)
            try:
                base = resolve(str(source.get("path", ".")), root)
            except ValueError as exc:
                raise MedallionError(f"source '{sname}': {exc}", path=origin) from exc
            for table in source.get("tables") or []:
                tname = table.get("name")
                fmt = table.get("format", source.get("format", "delta"))
                if fmt not in SOURCE_FORMATS:
                    raise MedallionError(
                        f"source '{sname}.{tname}' has unknown format '{fmt}'", path=origin,
                        hint="formats: " + ", ".join(SOURCE_FORMATS))
                unknown = table.get("unknown_fields", source.get("unknown_fields", "rescue"))
                if unknown not in UNKNOWN_FIELDS:
                    raise MedallionError(
                        f"source '{sname}.{tname}' has unknown_fields: {unknown!r}", path=origin,
                        line=getattr(table, "lines", {}).get("unknown_fields"),
                        hint="unknown_fields: " + " | ".join(UNKNOWN_FIELDS))
                if unknown == "add_new_columns" and (fmt != "json" or table.get("schema")
                                                     or table.get("columns")):
                    raise MedallionError(
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
                    path=_table_location(table, base, f"{origin}, source {sname}.{tname}"),
                    schema=schema, options=options, origin=origin, unknown_fields=unknown,
                    cdc=table.get("cdc"), unique_key=unique_key,
                    loaded_at_field=table.get("loaded_at_field", source.get("loaded_at_field")),
                    freshness=_source_freshness(table, source, origin, f"{sname}.{tname}"),
                    data_tests=tuple(table.get("data_tests") or table.get("tests") or ()),
                    columns=tuple(table.get("columns") or ()),
                    description=str(table.get("description") or source.get("description") or ""))
    return sources


def _source_freshness(table: dict, source: dict, origin: str, where: str) -> dict:
    """The table's freshness limits, else its source's; `freshness: null` on a table turns
    its source's off, as in dbt."""
    raw = table["freshness"] if "freshness" in table else source.get("freshness")
    return freshness_limits(raw, f"{origin}, source {where}") if raw else {}


def _rendered_options(options: dict, origin: str, where: str) -> dict[str, str]:
    """Reader options with env_var() rendered, so that addresses and credentials come from the
    environment, not the file (values are never written to target/)."""
    rendered = {}
    for key, value in options.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if "{{" in text:
            try:
                text = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(
                    text).render(env_var=env_var)
            except jinja2.TemplateError as exc:
                raise MedallionError(f"{where}: option {key}: cannot render: {exc}",
                                     path=origin) from exc
        rendered[str(key)] = text
    return rendered


def _check_kafka_options(options: dict, origin: str, where: str) -> None:
    if not options.get(KAFKA_BROKERS):
        raise MedallionError(f"{where} is a Kafka source without {KAFKA_BROKERS}", path=origin,
                             hint="add it under options:, e.g. " + KAFKA_BROKERS + ': "{{ '
                                  "env_var('KAFKA_BOOTSTRAP_SERVERS') }}\"")
    if sum(key in options for key in KAFKA_TOPICS) != 1:
        raise MedallionError(f"{where} must name its topics with exactly one of "
                             + ", ".join(KAFKA_TOPICS), path=origin,
                             hint="e.g. options: {subscribe: orders}")


def _check_cdc(table: dict, fmt: str, schema: str | None, unique_key: tuple, origin: str,
               where: str) -> None:
    """A change-event source: Debezium's JSON envelope, from Kafka or JSON files, with the
    schema of the table whose changes it carries."""
    line = getattr(table, "lines", {}).get("cdc")
    cdc = table.get("cdc")
    if cdc is None:
        if unique_key:
            raise MedallionError(f"{where}: unique_key is only read with cdc: debezium",
                                 path=origin, line=getattr(table, "lines", {}).get("unique_key"),
                                 hint="remove it; a model's unique_key goes in its config")
        return
    if cdc not in CDC_FORMATS:
        raise MedallionError(f"{where} has cdc: {cdc!r}", path=origin, line=line,
                             hint="cdc: " + " | ".join(CDC_FORMATS))
    if fmt not in ("json", "kafka"):
        raise MedallionError(f"{where}: cdc: {cdc} reads JSON change events, not {fmt}",
                             path=origin, line=line, hint="use format: json or kafka")
    if not schema:
        raise MedallionError(f"{where}: cdc: {cdc} needs the schema of the changed table",
                             path=origin, line=line,
                             hint="add schema: 'id bigint, name string, ...' (the columns of "
                                  "the events' before and after)")


def _table_location(table: dict, base: str, origin: str) -> str:
    """A source table's files: its `path` under the source's (a local folder or a URI)."""
    try:
        return resolve(str(table.get("path", table.get("name"))), base)
    except ValueError as exc:
        raise MedallionError(str(exc), path=origin) from exc


PROJECT_KEYS = ("name", "profile", "model-paths", "seed-paths", "macro-paths", "test-paths",
                "models", "seeds", "vars", "clean-targets", "on-run-start", "on-run-end")
# dbt_project.yml keys a dbt project may bring along, which say nothing medallion acts on
DBT_ONLY_PROJECT_KEYS = ("version", "config-version", "require-dbt-version", "analysis-paths",
                         "snapshot-paths", "docs-paths", "asset-paths", "target-path",
                         "log-path", "packages-install-path", "quoting", "dispatch",
                         "query-comment", "flags")


def load_project(project_dir: str | Path = ".", profiles_dir: str | Path | None = None,
                 target: str | None = None, cli_vars: dict | None = None) -> Project:
    root = Path(project_dir).resolve()
    project_path = root / PROJECT_FILE
    if not project_path.is_file():
        raise MedallionError(f"no {PROJECT_FILE} here", path=root,
                             hint="run medallion from a project folder or pass --project-dir")
    spec = read_yaml(project_path, render_env=True, hooks=True)
    origin = PROJECT_FILE
    check_keys(spec, origin, PROJECT_KEYS, "key", listed="keys medallion reads",
               tolerated=DBT_ONLY_PROJECT_KEYS)
    for key in ("name", "profile"):
        if key not in spec:
            raise MedallionError(f"'{key}' is missing", path=origin)
    model_dirs = spec.get("model-paths", ["models"])
    seed_dirs = spec.get("seed-paths", ["seeds"])
    macro_dirs = spec.get("macro-paths", ["macros"])
    test_dirs = spec.get("test-paths", ["tests"])
    models_tree = spec.get("models") or {}
    seeds_tree = spec.get("seeds") or {}
    for d in model_dirs:
        _check_folder_tree(models_tree, root / d, origin)
    for d in seed_dirs:
        _check_folder_tree(seeds_tree, root / d, origin)

    props = _properties(root, model_dirs) + _properties(root, seed_dirs)
    yaml_entries: dict[str, tuple[str, dict]] = {}
    for path, data in props:
        for kind in ("models", "seeds"):
            for entry in data.get(kind) or []:
                if "name" not in entry:
                    raise MedallionError(f"an entry under '{kind}' has no 'name'",
                                         path=path.relative_to(root))
                origin = str(path.relative_to(root))
                check_keys(entry.get("config") or {}, origin)
                if entry["name"] in yaml_entries:
                    raise MedallionError(
                        f"'{entry['name']}' is described twice: here and in "
                        f"{yaml_entries[entry['name']][0]}", path=origin,
                        line=getattr(entry, "line", None),
                        hint="keep one entry per model or seed (its tests and config would "
                             "otherwise be lost)")
                yaml_entries[entry["name"]] = (origin, entry)

    nodes: dict[str, NodeFile] = {}
    for kind, dirs, suffix, tree in (("seed", seed_dirs, ".csv", seeds_tree),
                                     ("model", model_dirs, ".sql", models_tree)):
        for base, path in _discover(root, dirs, suffix):
            rel = path.relative_to(base)
            name = path.stem
            _check_name(name, kind, str(path.relative_to(root)))
            if name in nodes:
                raise MedallionError(
                    f"two files define '{name}': {nodes[name].rel_path} and "
                    f"{path.relative_to(root)}", path=path.relative_to(root),
                    hint="model and seed names must be unique; rename one file")
            parts = rel.parts[:-1]
            folder = _folder_config(tree, parts if kind == "model" else rel.with_suffix("").parts)
            yml, entry = yaml_entries.get(name, (None, {}))
            layer = "seeds" if kind == "seed" else (parts[0] if parts else "models")
            nodes[name] = NodeFile(
                kind=kind, name=name, path=path, rel_path=str(path.relative_to(root)),
                layer=layer,
                yaml_config=merge_layers(LAYER_DEFAULTS.get(layer, {}), folder,
                                         {"meta": entry["meta"]} if entry.get("meta") else {},
                                         entry.get("config") or {}),
                description=entry.get("description", ""),
                columns=tuple(entry.get("columns") or ()),
                data_tests=tuple(entry.get("data_tests") or entry.get("tests") or ()),
                properties=yml)
    for name, (yml, _) in yaml_entries.items():
        if name not in nodes:
            raise MedallionError(f"properties given for '{name}', but no such model or seed. "
                                 f"{closest(name, nodes)}".strip(), path=yml)

    return Project(
        root=root,
        name=spec["name"],
        vars={**(spec.get("vars") or {}), **(cli_vars or {})},
        target=load_target(root, spec["profile"], Path(profiles_dir) if profiles_dir else None,
                           target),
        nodes=nodes,
        sources=_sources(root, props),
        # Custom generic tests ({% test %} blocks) may also live in tests/generic/, as in dbt.
        macro_files=[p for _, p in _discover(root, macro_dirs, ".sql")
                     + _discover(root, [f"{d}/generic" for d in test_dirs], ".sql")],
        singular_tests=[p for base, p in _discover(root, test_dirs, ".sql")
                        if p.relative_to(base).parts[0] != "generic"],
        unit_test_files=[p for _, p in _discover(root, [f"{d}/unit" for d in test_dirs], ".yml")],
        clean_targets=[str(p) for p in spec.get("clean-targets") or ["target"]],
        on_run_start=hook_statements(spec.get("on-run-start"), "on-run-start", PROJECT_FILE),
        on_run_end=hook_statements(spec.get("on-run-end"), "on-run-end", PROJECT_FILE),
    )
