"""Rendering: turn each model's Jinja-templated SQL into Spark SQL, recording its config and inputs.

The Jinja context is small and flat: ref, source, config, var, env_var, this, is_incremental,
and every macro from macros/*.sql by name. Nothing here touches Spark.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator

import jinja2

from ..core.errors import MedallionError, ProjectError, closest
from ..core.locations import is_remote, local_table_exists
from ..core.nodes import (
    SECRET_ENV_PREFIX,
    CompiledNode,
    Recorded,
    changes_relation,
    relation,
)
from ..core.project import NodeFile, Project
from .compiled import COMPILED, ProjectLoader, test_blocks_as_macros
from .model_config import check_keys, merge_layers, resolve_config
from .yaml_io import env_var


def _template_line(exc: BaseException, filename: str) -> int | None:
    """The line in `filename` where a Jinja runtime error happened, from the rewritten traceback."""
    line = getattr(exc, "lineno", None)
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


BUILTIN_TESTS = Path(__file__).resolve().parent / "generic_tests.sql"
RELATION_CALL = re.compile(r"\s*(ref|source)\(.*\)\s*")  # a string argument naming a relation
Values = dict[str, Any]  # a template's context, a macro's keyword arguments


class ParseTimeExecute:
    """dbt's `execute` while a model is parsed: false, and asking it marks the model as one
    to render again when it runs, when its queries can see the tables built before it."""

    def __init__(self, record: Recorded):
        self.record = record

    def __bool__(self) -> bool:
        self.record.executes = True
        return False


class Renderer:
    """Compiles macros once and renders each model or test with its own context."""

    def __init__(self, project: Project, full_refresh: bool = False,
                 table_exists: Callable[[str], bool] | None = None,
                 relations: dict[str, str] | None = None, texts: dict[str, str] | None = None):
        self.project = project
        # relation -> the name to render instead of its temp view (catalog.real_relations)
        self.relations = relations or {}
        self.full_refresh = full_refresh
        # Without an engine (compile, ls), from the local disk: a remote warehouse is not read
        # (that needs its credentials and network), so its tables count as not built
        self.table_exists = table_exists or (
            lambda path: not is_remote(path) and local_table_exists(path))
        self.env = jinja2.Environment(
            loader=ProjectLoader(str(project.root), texts or {}), undefined=jinja2.StrictUndefined,
            extensions=["jinja2.ext.do"], keep_trailing_newline=True, bytecode_cache=COMPILED)
        # Built-in generic tests first, so a project's own macro of the same name wins.
        self.macros = [COMPILED.template(self.env, "<built-in tests>",
                                         test_blocks_as_macros(BUILTIN_TESTS.read_text()))]
        self.macros += [self._load(p) for p in project.macro_files]

    def _load(self, path: Path) -> jinja2.Template:
        rel = str(path.relative_to(self.project.root))
        try:
            return self.env.get_template(rel)
        except jinja2.TemplateSyntaxError as exc:
            raise ProjectError(f"Jinja syntax error: {exc.message}", path=rel,
                               line=exc.lineno) from exc

    def context(self, record: Recorded, self_name: str | None = None,
                is_incremental: Callable[[], bool] = lambda: False,
                extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The Jinja context: ref, source, config, var, env_var, this, is_incremental, macros;
        plus `extra` (run-operation's run_query and log), which macros see too."""
        project = self.project
        origin = record.origin

        def config(**kwargs: Any) -> str:
            record.captured.update(kwargs)
            return ""

        def ref(name: str, changes: bool = False) -> str:
            if name not in project.nodes:
                raise ProjectError(f"ref('{name}') names no model or seed. "
                                   f"{closest(name, project.nodes)}".strip(), path=origin)
            if name == self_name:
                raise ProjectError(f"model refers to itself with ref('{name}')", path=origin,
                                   hint="use {{ this }} for the model's own table")
            if name not in record.refs:
                record.refs.append(name)
            if changes:
                if name not in record.change_refs:
                    record.change_refs.append(name)
                return relation(changes_relation(name))
            record.direct_refs.add(name)
            return self.named(name)

        def source(source_name: str, table_name: str) -> str:
            key = (source_name, table_name)
            if key not in project.sources:
                known = [f"{s}.{t}" for s, t in project.sources]
                raise ProjectError(
                    f"source('{source_name}', '{table_name}') is not declared. "
                    f"{closest(f'{source_name}.{table_name}', known)}".strip(), path=origin,
                    hint="declare it under 'sources:' in a models/**/*.yml file")
            if key not in record.sources:
                record.sources.append(key)
            return self.named(project.sources[key].relation)

        def var(name: str, default: Any = None) -> Any:
            if name in project.vars:
                return project.vars[name]
            if default is not None:
                return default
            raise ProjectError(f"var('{name}') is not set", path=origin,
                               hint="set it under 'vars:' in medallion_project.yml or "
                                    "pass --vars '{" + name + ": ...}'")

        def secret_aware_env_var(name: str, default: str | None = None) -> str:
            value = env_var(name, default)
            if name.startswith(SECRET_ENV_PREFIX):
                record.secrets.append(value)
            return value

        context = {**self.env.globals, "ref": ref, "source": source, "config": config, "var": var,
                   "env_var": secret_aware_env_var, "is_incremental": is_incremental,
                   **(extra or {})}
        if self_name:
            context["this"] = self.named(self_name)
        # shared=True makes `context` itself the macros' namespace, so macros from one file
        # can call macros from another, and all of them see this render's ref/this.
        with self._errors(origin, None):
            for template in self.macros:
                module = template.make_module(vars=context, shared=True)
                context.update({k: getattr(module, k) for k in dir(module)
                                if not k.startswith("_")})
        return context

    def named(self, key: str) -> str:
        """How a model, seed or source (by its relation key) is named in the SQL rendered."""
        return self.relations.get(key) or relation(key)

    @contextmanager
    def _errors(self, origin: str, filename: str | None) -> Iterator[None]:
        """Jinja errors as MedallionErrors naming the file and line."""
        try:
            yield
        except MedallionError as exc:
            exc.line = exc.line or (_template_line(exc, filename) if filename else None)
            raise
        except jinja2.TemplateSyntaxError as exc:
            path = (Path(exc.filename).relative_to(self.project.root) if exc.filename
                    else origin)
            raise ProjectError(f"Jinja syntax error: {exc.message}", path=path,
                               line=exc.lineno) from exc
        except jinja2.TemplateError as exc:
            raise ProjectError(f"cannot render: {exc}", path=origin,
                               line=_template_line(exc, filename) if filename else None) from exc
        except Exception as exc:  # Python's, from an expression ({{ 1 // 0 }}, {{ 'a' + 1 }})
            raise ProjectError(f"cannot render: {type(exc).__name__}: {exc}", path=origin,
                               line=_template_line(exc, filename) if filename else None,
                               hint="fix the Jinja expression on that line") from exc

    def render_file(self, rel_path: str, context: dict[str, Any]) -> str:
        with self._errors(rel_path, str(self.project.root / rel_path)):
            return self.env.get_template(rel_path).render(context)

    def render_text(self, text: str, origin: str,
                    self_name: str | None = None) -> tuple[str, Recorded]:
        """Ad hoc SQL (show --inline, hooks) rendered as a model would be, with what it names;
        self_name: the model whose table `this` names (a model's hooks)."""
        record = Recorded(origin)
        with self._errors(origin, None):
            return (self.env.from_string(text).render(self.context(record, self_name)),
                    record)

    def call_macro(self, name: str, kwargs: Values, record: Recorded, on: tuple[str, ...]) -> str:
        """Render by calling a macro (a generic test) on a relation, `on` = ("ref", model) or
        ("source", source, table), with arguments; `to: ref('x')` style string arguments are
        evaluated as Jinja expressions."""
        context = self.context(record)
        kwargs = {"model": context[on[0]](*on[1:]), **kwargs}
        if name not in context:
            raise ProjectError(f"no generic test named '{name[len('test_'):]}'", path=record.origin,
                               hint="built-in: not_null, unique, accepted_values, relationships, "
                                    "expression; or define {% test name(model, column_name) %}")
        with self._errors(record.origin, None):
            args = {k: self._evaluate(v, context) for k, v in kwargs.items()}
            return str(context[name](**args))

    def call_operation(self, name: str, args: Values, record: Recorded, extra: Values) -> str:
        """Render by calling a project macro with keyword arguments (run-operation)."""
        context = self.context(record, extra=extra)
        macros = sorted(k for k, v in context.items() if isinstance(v, jinja2.runtime.Macro)
                        and not k.startswith("test_"))
        if name not in macros:
            raise ProjectError(f"no macro named '{name}'. {closest(name, macros)}".strip(),
                               hint="define it with {% macro " + name + "(...) %} in macros/")
        with self._errors(record.origin, None):
            return str(context[name](**args))

    def _evaluate(self, value: Any, context: Values) -> Any:
        if isinstance(value, str) and RELATION_CALL.fullmatch(value):
            return self.env.compile_expression(value, undefined_to_none=False)(**context)
        return value

    def relation_of(self, text: str, origin: str) -> str | None:
        """The relation `ref('x')` or `source('s', 't')` names (unit-test inputs), or None when
        `text` is neither; unknown names fail as they do in a model, with the closest ones."""
        if not RELATION_CALL.fullmatch(text):
            return None
        with self._errors(origin, None):
            return str(self._evaluate(text, self.context(Recorded(origin)))).strip("`")

    def render(self, node: NodeFile,
               run_query: Callable[[str, Recorded], list[Any]] | None = None) -> CompiledNode:
        """The model's SQL and config. run_query: how its run_query() runs, when it runs
        (`execute` true); without, it is being parsed: `execute` is false and run_query()
        returns no rows, as in dbt."""
        if node.kind == "seed":
            cfg = resolve_config({**node.yaml_config, "materialized": "table"}, node.rel_path)
            return CompiledNode(node, cfg, None, (), (), False)
        record = Recorded(node.rel_path)

        def parse_time_query(sql: str) -> list[Any]:
            record.executes = True
            return []

        extra = ({"execute": True, "run_query": lambda sql: run_query(sql, record)} if run_query
                 else {"execute": ParseTimeExecute(record), "run_query": parse_time_query})

        asked: list[bool] = []  # what is_incremental() answered the SQL

        def incremental_kind() -> bool:  # beneath its config, what its target_lag chose
            merged = merge_layers(node.chosen_config, node.yaml_config, record.captured)
            return merged.get("materialized") in ("incremental", "streaming")

        def is_incremental() -> bool:
            asked.append(incremental_kind() and not self.full_refresh
                         and self.table_exists(self.project.table_path(node)))
            return asked[-1]

        sql = self.render_file(node.rel_path, self.context(record, node.name, is_incremental,
                                                           extra))
        asks_incremental = bool(asked)
        check_keys(record.captured, node.rel_path)
        cfg = resolve_config(merge_layers(node.chosen_config, node.yaml_config, record.captured),
                             node.rel_path)
        cfg = replace(cfg, mode_by_lag=True) if node.chosen_config else cfg
        # The SQL the model runs once its table exists, which fingerprints hash: its first
        # build and every build after it then agree on the model's SQL
        incremental_sql = sql
        if asked and not all(asked) and incremental_kind():
            incremental_sql = self.render_file(node.rel_path, self.context(
                Recorded(node.rel_path), node.name, lambda: True, extra))
        return CompiledNode(node, cfg, sql, tuple(record.refs), tuple(record.sources),
                            is_incremental(), tuple(record.secrets), tuple(record.change_refs),
                            tuple(n for n in record.change_refs if n not in record.direct_refs),
                            record.executes or run_query is not None,
                            incremental_sql=incremental_sql, asks_incremental=asks_incremental)


def render_project(project: Project, full_refresh: bool = False) -> dict[str, CompiledNode]:
    renderer = Renderer(project, full_refresh)
    return {name: renderer.render(node) for name, node in project.nodes.items()}
