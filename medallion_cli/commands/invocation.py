"""What every command starts from: the invocation's options (Invocation), the project loaded
and rendered with its DAG and data tests (Loaded), its engine, and the nodes and tests the
selection picks.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

import yaml

from ..core.error_text import error_message, store_named, unusable_warehouse
from ..core.errors import MedallionError
from ..core.project import Project, Target
from ..dag.graph import Graph, build_graph
from ..dag.lags import choose, chosen_config
from ..dag.selection import select, select_tests
from ..engines import make_engine
from ..engines.base import Engine
from ..load.datatests import DataTest, load_tests
from ..load.project import load_project
from ..load.rendering import Renderer
from ..load.sqlcheck import check_model_sql
from ..materialize.context import FlowReset
from ..report.artifacts import (
    read_state,
    write_manifest,
)
from ..spark import jars
from ..storage.object_store import with_s3a


@dataclass(frozen=True)
class Invocation:
    project_dir: str = "."
    profiles_dir: str | None = None
    target: str | None = None
    select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    full_refresh: bool = False
    vars: dict[str, Any] = field(default_factory=dict)
    threads: int | None = None
    debug: bool = False  # Spark's own output on the terminal, not in target/spark.log
    rerun_tests: bool = False  # build: run data tests that passed on unchanged inputs too
    fail_fast: bool = False  # start nothing more after the first failure
    state: str | None = None  # a folder with an earlier run's manifest.json (state:modified)
    empty: bool = False  # build/run --empty: models checked over inputs with no rows, no writes
    defer: bool = False  # read unbuilt unselected parents' tables from the --state run's
    wait_for_lock: float = 0  # seconds to wait for another command's lock on the warehouse
    metrics_port: int | None = None  # build --watch: the tables' figures for Prometheus here
    # build/run --start/--end: the event_time range a backfill replaces (start included)
    event_range: tuple[str | None, str | None] | None = None
    flow_reset: FlowReset | None = None  # build/run --reset-flow: where the flows start again
    # model and macro files as an editor holds them, unsaved (rel path -> text): rendered
    # instead of the disk's, and no target/manifest.json written from them
    texts: dict[str, str] = field(default_factory=dict)


def parse_vars(text: str | None, option: str = "--vars") -> dict[str, Any]:
    """A mapping given on the command line (--vars, run-operation's --args) as YAML or JSON."""
    if not text:
        return {}
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise MedallionError(f"{option} is not YAML or JSON: {exc}",
                             hint=f"""e.g. {option} '{{start_date: "2024-01-01"}}'""") from exc
    if not isinstance(value, dict):
        raise MedallionError(f"{option} must be a mapping", hint=f"e.g. {option} '{{key: value}}'")
    return value


@dataclass(frozen=True)
class Loaded:
    project: Project
    graph: Graph
    tests: dict[str, DataTest]
    engine: Engine | None = None  # a build's: is_incremental() asked it whether tables exist
    previous: dict[str, Any] | None = None  # --state: the nodes of an earlier manifest.json


def project_of(inv: Invocation) -> Project:
    """The project and its target, as the invocation names them (no rendering)."""
    return load_project(inv.project_dir, inv.profiles_dir, inv.target, inv.vars)


def engine_target(project: Project) -> Target:
    """The project's target with the JARs its sources and warehouse need (Spark's Kafka
    source, S3A) and S3A's settings from the AWS variables: all that decides how its Spark
    starts."""
    bundles = jars.bundles_for(project)
    target = jars.with_bundles(project.target, bundles)
    return with_s3a(target) if "s3" in bundles else target


def engine_of(project: Project, inv: Invocation, conf: dict[str, str] | None = None) -> Engine:
    """The target's engine (engine_target), with `conf` added to its Spark settings; Spark's
    own output goes to target/spark.log unless --debug."""
    target = engine_target(project)
    if conf:
        target = replace(target, spark_conf={**target.spark_conf, **conf})
    return make_engine(target, None if inv.debug else project.target_dir / "spark.log")


def _asking(engine: Engine, target: Target) -> Callable[[str], bool]:
    """engine.table_exists for is_incremental(), its store's failures one line naming the
    table: every incremental model asks while the project loads, before anything runs. A
    warehouse its store refuses (no bucket) is the target's, said as at Spark's start."""
    def table_exists(path: str) -> bool:
        try:
            return engine.table_exists(path)
        except MedallionError:
            raise
        except Exception as exc:
            text = str(exc)
            refused = str(path).startswith(target.warehouse) and unusable_warehouse(
                target, text, store_named(text))
            raise refused or MedallionError(
                f"is_incremental() could not tell whether the table {path} exists: "
                f"{error_message(exc)}") from exc
    return table_exists


def load(inv: Invocation, engine: Engine | None = None, with_engine: bool = False) -> Loaded:
    """Load and render the project. A build asks for the engine (with_engine, or passes its
    own), so that is_incremental() asks it whether each table exists, wherever the warehouse is;
    without one (compile, ls, docs) rendering looks at the local disk only and reads no remote
    warehouse."""
    previous = read_state(inv.state)  # before this load writes target/manifest.json
    project = project_of(inv)
    made = engine or (engine_of(project, inv) if with_engine else None)
    renderer = Renderer(project, inv.full_refresh or inv.event_range is not None,
                        _asking(made, project.target) if made else None, texts=inv.texts)
    compiled = {name: renderer.render(node) for name, node in project.nodes.items()}
    graph = build_graph(compiled)
    for node in graph.nodes.values():
        if node.sql is not None:
            check_model_sql(node, graph.nodes)
    chosen = {name: choice for name, choice in choose(graph).items() if choice.chosen}
    if chosen:  # rendered again in the modes their lags chose (is_incremental() may differ)
        for name, choice in chosen.items():
            project.nodes[name] = replace(project.nodes[name],
                                          chosen_config=chosen_config(choice))
        graph = build_graph({**compiled, **{n: renderer.render(project.nodes[n])
                                            for n in chosen}})
    project.flow_targets = {n: c.config.flow_into for n, c in graph.nodes.items()
                            if c.config.flow_into}
    loaded = Loaded(project, graph, load_tests(project, renderer, graph.nodes), made, previous)
    if not inv.texts:
        write_manifest(project, graph, loaded.tests)
    return loaded


def selected_nodes(inv: Invocation, loaded: Loaded, kinds: tuple[str, ...] = ("seed", "model"),
                   tests: dict[str, DataTest] | None = None) -> list[str]:
    """The selected models and seeds of `kinds`; tests: the data tests whose names select no
    model (default: the project's)."""
    graph = loaded.graph
    return [n for n in select(graph, inv.select, inv.exclude,
                              loaded.tests if tests is None else tests, loaded.previous)
            if graph.nodes[n].file.kind in kinds]


def selected_tests(inv: Invocation, loaded: Loaded) -> list[str]:
    return select_tests(loaded.graph, loaded.tests, inv.select, inv.exclude, loaded.previous)


# The nodes each building command runs.
COMMAND_KINDS = {"build": ("seed", "model"), "run": ("model",), "seed": ("seed",)}
