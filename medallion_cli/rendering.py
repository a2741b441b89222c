"""Rendering: turn each model's Jinja-templated SQL into Spark SQL, recording its config and inputs.

The Jinja context is small and flat: ref, source, config, var, env_var, this, is_incremental,
and every macro from macros/*.sql by name. Nothing here touches Spark.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import jinja2

from .config import NodeConfig, check_keys, merge_layers, resolve_config
from .errors import MedallionError, closest
from .project import NodeFile, Project, env_var


@dataclass(frozen=True)
class CompiledNode:
    file: NodeFile
    config: NodeConfig
    sql: str | None  # None for seeds
    refs: tuple[str, ...]
    sources: tuple[tuple[str, str], ...]
    is_incremental: bool

    @property
    def name(self) -> str:
        return self.file.name

    @property
    def parents(self) -> tuple[str, ...]:
        return self.refs


def relation(name: str) -> str:
    """How a model, seed or source is named in compiled SQL (a temp view the engine registers)."""
    return f"`{name}`"


def _template_line(exc: BaseException, filename: str) -> int | None:
    """The line in `filename` where a Jinja runtime error happened, from the rewritten traceback."""
    line = getattr(exc, "lineno", None)
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


class Renderer:
    """Compiles macros once and renders each model with its own context."""

    def __init__(self, project: Project, full_refresh: bool = False,
                 table_exists: Callable[[Path], bool] | None = None):
        self.project = project
        self.full_refresh = full_refresh
        self.table_exists = table_exists or _delta_table_exists
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(project.root)),
            undefined=jinja2.StrictUndefined,
            extensions=["jinja2.ext.do"],
            keep_trailing_newline=True,
        )
        self.macros = [self._load(p) for p in project.macro_files]

    def _load(self, path: Path) -> jinja2.Template:
        rel = str(path.relative_to(self.project.root))
        try:
            return self.env.get_template(rel)
        except jinja2.TemplateSyntaxError as exc:
            raise MedallionError(f"Jinja syntax error: {exc.message}", path=rel,
                                 line=exc.lineno) from exc

    def render(self, node: NodeFile) -> CompiledNode:
        if node.kind == "seed":
            cfg = resolve_config({**node.yaml_config, "materialized": "table"}, node.rel_path)
            return CompiledNode(node, cfg, None, (), (), False)
        project = self.project
        captured: dict = {}
        refs: list[str] = []
        sources: list[tuple[str, str]] = []

        def config(**kwargs) -> str:
            check_keys(kwargs, node.rel_path)
            captured.update(kwargs)
            return ""

        def ref(name: str) -> str:
            if name not in project.nodes:
                raise MedallionError(f"ref('{name}') names no model or seed. "
                                     f"{closest(name, project.nodes)}".strip(), path=node.rel_path)
            if name == node.name:
                raise MedallionError(f"model refers to itself with ref('{name}')",
                                     path=node.rel_path, hint="use {{ this }} for the model's own table")
            if name not in refs:
                refs.append(name)
            return relation(name)

        def source(source_name: str, table_name: str) -> str:
            key = (source_name, table_name)
            if key not in project.sources:
                known = [f"{s}.{t}" for s, t in project.sources]
                raise MedallionError(
                    f"source('{source_name}', '{table_name}') is not declared. "
                    f"{closest(f'{source_name}.{table_name}', known)}".strip(), path=node.rel_path,
                    hint="declare it under 'sources:' in a models/**/*.yml file")
            if key not in sources:
                sources.append(key)
            return relation(project.sources[key].relation)

        def var(name: str, default=None):
            if name in project.vars:
                return project.vars[name]
            if default is not None:
                return default
            raise MedallionError(f"var('{name}') is not set", path=node.rel_path,
                                 hint="set it under 'vars:' in medallion_project.yml or "
                                      "pass --vars '{" + name + ": ...}'")

        def is_incremental() -> bool:
            materialized = merge_layers(node.yaml_config, captured).get("materialized")
            return (materialized in ("incremental", "streaming") and not self.full_refresh
                    and self.table_exists(project.table_path(node)))

        context = {**self.env.globals, "ref": ref, "source": source, "config": config, "var": var,
                   "env_var": env_var, "this": relation(node.name),
                   "is_incremental": is_incremental}
        try:
            # shared=True makes `context` itself the macros' namespace, so macros from one file
            # can call macros from another, and all of them see this model's ref/this.
            for template in self.macros:
                module = template.make_module(vars=context, shared=True)
                context.update({k: getattr(module, k) for k in dir(module)
                                if not k.startswith("_")})
            sql = self.env.get_template(node.rel_path).render(context)
        except MedallionError as exc:
            exc.line = exc.line or _template_line(exc, str(node.path))
            raise
        except jinja2.TemplateSyntaxError as exc:
            raise MedallionError(f"Jinja syntax error: {exc.message}",
                                 path=exc.filename and Path(exc.filename).relative_to(project.root)
                                 or node.rel_path, line=exc.lineno) from exc
        except jinja2.TemplateError as exc:
            raise MedallionError(f"cannot render: {exc}", path=node.rel_path,
                                 line=_template_line(exc, str(node.path))) from exc
        cfg = resolve_config(merge_layers(node.yaml_config, captured), node.rel_path)
        return CompiledNode(node, cfg, sql, tuple(refs), tuple(sources), is_incremental())


def _delta_table_exists(path: Path) -> bool:
    # A Delta table exists once its log has a commit; checking the folder avoids loading the log.
    log = path / "_delta_log"
    return log.is_dir() and any(log.glob("*.json"))


def render_project(project: Project, full_refresh: bool = False) -> dict[str, CompiledNode]:
    renderer = Renderer(project, full_refresh)
    return {name: renderer.render(node) for name, node in project.nodes.items()}
