"""Project loading: medallion_project.yml (each key known or refused), its profile's target,
the model and seed files with their per-folder config, and the property files' sources.

Nothing here starts Spark: `compile` and `ls` must answer without a JVM.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from ..core.config import SPELLED_KEYS
from ..core.errors import ProjectError, closest
from ..core.project import PROJECT_FILE, NodeFile, Project
from .config_values import hook_statements
from .model_config import check_keys, merge_layers
from .profiles import load_target
from .sources import PROPERTY_KEYS, _discover, _properties, _sources
from .yaml_io import _LineLoader, _mapping_with_lines, read_yaml

# Bronze keeps whatever new columns land; other layers fail on them unless told otherwise.
LAYER_DEFAULTS = {"bronze": {"on_schema_change": "append_new_columns"}}


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_with_lines)


IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_name(name: str, kind: str, rel_path: str) -> None:
    """A model's or seed's name becomes its table's and checkpoint's folder and a SQL relation:
    only identifier-like names, so none escapes its folder (`..`) or needs quoting."""
    if not IDENTIFIER.fullmatch(name):
        raise ProjectError(
            f"the {kind} name {name!r} (from the file name) is not allowed: names are letters, "
            "digits and underscores, not starting with a digit", path=rel_path,
            hint="rename the file, e.g. " + (re.sub(r"\W+", "_", name).strip("_") or "my_model")
            + Path(rel_path).suffix)


def _folder_config(tree: dict[str, Any], rel_parts: tuple[str, ...]) -> dict[str, Any]:
    """Config for a file from the nested per-folder mapping in medallion_project.yml."""
    layers = []
    level: dict[str, Any] = tree or {}
    for part in ("",) + rel_parts:
        if part:
            below = level.get(part)
            if not isinstance(below, dict):
                break
            level = below
        layers.append({k: v for k, v in level.items() if k in SPELLED_KEYS})
    return merge_layers(*layers)


def _check_folder_tree(tree: dict[str, Any], base: Path, origin: str) -> None:
    """Every key in a per-folder config tree is a config key or an existing subfolder."""
    for key, value in (tree or {}).items():
        if key in SPELLED_KEYS:
            continue
        if isinstance(value, dict) and ((base / key).is_dir() or (base / f"{key}.csv").is_file()):
            _check_folder_tree(value, base / key, origin)
            continue
        check_keys({key: value}, origin)  # raises with the list of valid keys


PROPERTY_KEYS["seeds"] = PROPERTY_KEYS["models"]


PROJECT_KEYS = ("name", "profile", "model-paths", "seed-paths", "macro-paths", "test-paths",
                "models", "seeds", "vars", "clean-targets", "on-run-start", "on-run-end")
# dbt_project.yml keys a dbt project may bring along, which say nothing medallion acts on
DBT_ONLY_PROJECT_KEYS = ("version", "config-version", "require-dbt-version", "analysis-paths",
                         "snapshot-paths", "docs-paths", "asset-paths", "target-path",
                         "log-path", "packages-install-path", "quoting", "dispatch",
                         "query-comment", "flags")


def load_project(project_dir: str | Path = ".", profiles_dir: str | Path | None = None,
                 target: str | None = None, cli_vars: dict[str, Any] | None = None) -> Project:
    root = Path(project_dir).resolve()
    project_path = root / PROJECT_FILE
    if not project_path.is_file():
        raise ProjectError(f"no {PROJECT_FILE} here", path=root,
                           hint="run medallion from a project folder or pass --project-dir")
    spec = read_yaml(project_path, render_env=True, hooks=True)
    origin = PROJECT_FILE
    check_keys(spec, origin, PROJECT_KEYS, "key", listed="keys medallion reads",
               tolerated=DBT_ONLY_PROJECT_KEYS)
    for key in ("name", "profile"):
        if key not in spec:
            raise ProjectError(f"'{key}' is missing", path=origin)
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
    yaml_entries: dict[str, tuple[str, dict[str, Any]]] = {}
    for path, data in props:
        for kind in ("models", "seeds"):
            for entry in data.get(kind) or []:
                if "name" not in entry:
                    raise ProjectError(f"an entry under '{kind}' has no 'name'",
                                       path=path.relative_to(root))
                origin = str(path.relative_to(root))
                check_keys(entry.get("config") or {}, origin)
                if entry["name"] in yaml_entries:
                    raise ProjectError(
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
                raise ProjectError(
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
            raise ProjectError(f"properties given for '{name}', but no such model or seed. "
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
