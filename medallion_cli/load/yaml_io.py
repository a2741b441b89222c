"""YAML files read with the line of each key (for errors), env_var() rendered where a profile or
project file uses it, and hooks' Jinja kept for when they run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jinja2
import yaml

from ..core.errors import ProjectError
from .compiled import COMPILED, strict_template


def env_var(name: str, default: str | None = None) -> str:
    value = os.environ.get(name, default)
    if value is None:
        raise ProjectError(f"environment variable {name} is not set and has no default",
                           hint=f"export {name}=... or call env_var('{name}', 'default')")
    return value


class YamlMap(dict[str, Any]):
    """A YAML mapping that knows its line and each key's line (1-based), for errors."""

    line: int | None = None
    lines: dict[str, int] = {}


class _LineLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's parser where PyYAML was built with it (several times quicker on a project's
    files, which every command and every --watch refresh reads), with the same safe types."""


def _mapping_with_lines(loader: _LineLoader, node: yaml.MappingNode) -> YamlMap:
    mapping = YamlMap(loader.construct_mapping(node, deep=True))
    mapping.line = node.start_mark.line + 1
    mapping.lines = {key.value: key.start_mark.line + 1 for key, _ in node.value
                     if isinstance(key.value, str)}
    return mapping


class _Deferred(jinja2.Undefined):
    """While the project file is read, a name other than env_var renders as itself, so hooks
    (rendered when they run, with ref, this, var and macros) keep their Jinja."""

    def __str__(self) -> str:
        return "{{ " + str(self._undefined_name) + " }}"

    def __call__(self, *args: Any, **kwargs: Any) -> str:  # type: ignore[override]
        given = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
        return "{{ " + f"{self._undefined_name}({', '.join(given)})" + " }}"

    def __getattr__(self, name: str) -> _Deferred:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Deferred(name=f"{self._undefined_name}.{name}")


DEFERRING = jinja2.Environment(undefined=_Deferred)
HOOK_KEYS = ("on-run-start", "on-run-end", "pre_hook", "post_hook", "pre-hook", "post-hook")


def _jinja_outside_hooks(data: Any, where: str = "") -> str | None:
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


def read_yaml(path: Path, render_env: bool = False, hooks: bool = False) -> dict[str, Any]:
    """Parse a YAML file (optionally rendering env_var() first; with hooks, the Jinja of hook
    keys is kept for when they run); errors name the file and line."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ProjectError(f"cannot read file: {exc.strerror}", path=path) from exc
    try:
        if render_env:
            template = (COMPILED.template(DEFERRING, "<hooks kept>", text) if hooks
                        else strict_template(text))
            text = template.render(env_var=env_var)
        data = yaml.load(text, Loader=_LineLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ProjectError(f"invalid YAML: {getattr(exc, 'problem', exc)}", path=path,
                           line=mark.line + 1 if mark else None) from exc
    except jinja2.TemplateError as exc:
        raise ProjectError(f"cannot render: {exc}", path=path,
                           line=getattr(exc, "lineno", None)) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ProjectError("expected a mapping at the top level", path=path)
    left = _jinja_outside_hooks(data) if hooks else None
    if left:
        raise ProjectError(f"cannot render {left}: only env_var() is known in this file "
                           "outside hooks", path=path)
    return data
