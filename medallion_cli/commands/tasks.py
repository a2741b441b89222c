"""What each command does, as plain functions: load, select, then compile, list or build.

cli.py parses arguments and prints; everything it runs is here.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import yaml

from ..core.errors import MedallionError
from ..core.locations import is_remote
from ..core.nodes import CompiledNode
from ..core.project import Project
from ..dag.graph import Graph, build_graph, check_flow_refresh
from ..dag.selection import select, select_sources, select_tests
from ..engines import make_engine
from ..engines.base import Engine
from ..load.datatests import DataTest, load_tests
from ..load.project import load_project
from ..load.rendering import Renderer
from ..load.sqlcheck import check_model_sql
from ..materialize.checkpoints import mark_refreshes
from ..materialize.context import BuildContext
from ..report.artifacts import (
    read_run_results,
    read_state,
    write_compiled,
    write_manifest,
    write_run_results,
    write_sources,
)
from ..run.locking import warehouse_lock
from ..run.new_input import new_landing_bytes
from ..run.runner import (
    NodeResult,
    check_node,
    execute,
    interrupted,
    run_data_test,
    run_node,
    run_project_hooks,
    timed,
)
from ..run.unittests import load_unit_tests, run_unit_test
from ..spark import jars


@dataclass(frozen=True)
class Invocation:
    project_dir: str = "."
    profiles_dir: str | None = None
    target: str | None = None
    select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    full_refresh: bool = False
    vars: dict = field(default_factory=dict)
    threads: int | None = None
    debug: bool = False  # Spark's own output on the terminal, not in target/spark.log
    rerun_tests: bool = False  # build: run data tests that passed on unchanged inputs too
    fail_fast: bool = False  # start nothing more after the first failure
    state: str | None = None  # a folder with an earlier run's manifest.json (state:modified)
    empty: bool = False  # build/run --empty: models checked over inputs with no rows, no writes
    defer: bool = False  # read unbuilt unselected parents' tables from the --state run's


def parse_vars(text: str | None, option: str = "--vars") -> dict:
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
    previous: dict | None = None  # --state: the nodes of an earlier manifest.json


def project_of(inv: Invocation) -> Project:
    """The project and its target, as the invocation names them (no rendering)."""
    return load_project(inv.project_dir, inv.profiles_dir, inv.target, inv.vars)


def engine_target(project: Project):
    """The project's target with the JARs its sources need (Spark's Kafka source): all that
    decides how its Spark starts."""
    kafka = any(source.format == "kafka" for source in project.sources.values())
    return jars.with_bundles(project.target, ["kafka"] if kafka else [])


def engine_of(project: Project, inv: Invocation) -> Engine:
    """The target's engine (engine_target); Spark's own output goes to target/spark.log unless
    --debug."""
    return make_engine(engine_target(project),
                       None if inv.debug else project.target_dir / "spark.log")


def load(inv: Invocation, engine: Engine | None = None, with_engine: bool = False) -> Loaded:
    """Load and render the project. A build asks for the engine (with_engine, or passes its
    own), so that is_incremental() asks it whether each table exists, wherever the warehouse is;
    without one (compile, ls, docs) rendering looks at the local disk only and reads no remote
    warehouse."""
    previous = read_state(inv.state)  # before this load writes target/manifest.json
    project = project_of(inv)
    made = engine or (engine_of(project, inv) if with_engine else None)
    renderer = Renderer(project, inv.full_refresh, made.table_exists if made else None)
    graph = build_graph({name: renderer.render(node) for name, node in project.nodes.items()})
    project.flow_targets = {n: c.config.flow_into for n, c in graph.nodes.items()
                            if c.config.flow_into}
    for node in graph.nodes.values():
        if node.sql is not None:
            check_model_sql(node, graph.nodes)
    loaded = Loaded(project, graph, load_tests(project, renderer, graph.nodes), made, previous)
    write_manifest(project, graph, loaded.tests)
    return loaded


def selected_nodes(inv: Invocation, loaded: Loaded, kinds=("seed", "model"),
                   tests: dict | None = None) -> list[str]:
    """The selected models and seeds of `kinds`; tests: the data tests whose names select no
    model (default: the project's)."""
    graph = loaded.graph
    return [n for n in select(graph, inv.select, inv.exclude,
                              loaded.tests if tests is None else tests, loaded.previous)
            if graph.nodes[n].file.kind in kinds]


def selected_tests(inv: Invocation, loaded: Loaded) -> list[str]:
    return select_tests(loaded.graph, loaded.tests, inv.select, inv.exclude, loaded.previous)


@dataclass(frozen=True)
class Compiled:
    nodes: list[CompiledNode]
    note: str | None  # what compiling without an engine could not know, to tell the user
    sql: dict[str, str]  # name -> SQL naming real relations, as written to target/compiled


def warn_unlanded(loaded: Loaded, names, warn: Callable[[str], None]) -> None:
    """Say which landing folders the nodes read do not exist, before a build finds out."""
    for key in dict.fromkeys(k for n in names for k in loaded.graph.nodes[n].sources):
        missing = loaded.project.sources[key].unlanded()
        if missing:
            readers = [n for n in names if key in loaded.graph.nodes[n].sources]
            warn(f"{missing.path}: {missing.message}, which {', '.join(readers)} "
                 f"read{'s' * (len(readers) == 1)}: {missing.hint}")


def compile_models(inv: Invocation, warn: Callable[[str], None] = lambda message: None
                   ) -> Compiled:
    loaded = load(inv)
    nodes = [loaded.graph.nodes[n] for n in selected_nodes(inv, loaded, ("model",))]
    warn_unlanded(loaded, [n.name for n in nodes], warn)
    sql = write_compiled(loaded.project, loaded.graph.nodes, nodes)
    return Compiled(nodes, offline_note(loaded.project, nodes), sql)


def offline_note(project: Project, nodes: list[CompiledNode]) -> str | None:
    """compile reads no remote warehouse, so is_incremental() is false in what it shows for
    incremental and streaming models; say so rather than show SQL a build would not run."""
    warehouse = project.target.warehouse
    if not is_remote(warehouse) or not any(
            n.config.materialized in ("incremental", "streaming") for n in nodes):
        return None
    return (f"is_incremental() is false in this SQL: the warehouse {warehouse} is not read "
            "offline; medallion build renders it against the tables")


@dataclass(frozen=True)
class Listing:
    name: str
    kind: str
    layer: str
    materialized: str
    depends_on: tuple[str, ...]
    path: str
    table: str | None
    checkpoint: str | None
    flows_into: str | None = None  # a flow: the model whose table it appends to


def list_nodes(inv: Invocation, warn: Callable[[str], None] = lambda message: None
               ) -> list[Listing]:
    loaded = load(inv)
    project, graph = loaded.project, loaded.graph
    rows = []
    names = selected_nodes(inv, loaded)
    warn_unlanded(loaded, names, warn)
    for name in names:
        node = graph.nodes[name]
        deps = node.refs + tuple(f"source:{s}.{t}" for s, t in node.sources)
        materialized = node.config.materialized
        table = None if materialized == "view" else project.table_path(node.file)
        checkpoint = (project.checkpoint_path(node.file) if materialized == "streaming"
                      else None)
        rows.append(Listing(name, node.file.kind, node.file.layer, materialized, deps,
                            node.file.rel_path, table, checkpoint, node.config.flow_into))
    return rows


@dataclass(frozen=True)
class Reporter:
    """How a task reports progress as it goes; the CLI prints, tests may collect."""

    start: Callable[[int, str], None] = lambda total, target: None
    begin: Callable[[str], None] = lambda name: None
    result: Callable[[NodeResult], None] = lambda result: None
    batch: Callable = lambda report: None  # a streaming micro-batch under --watch
    phase: Callable[[str | None], None] = lambda what: None  # "starting Spark"; None: done
    warn: Callable[[str], None] = lambda message: None  # a problem that fails nothing


@dataclass(frozen=True)
class Plan:
    """What to run and in which order: node names, each one's parents, and display labels."""

    order: list[str]
    parents: dict[str, set[str]]
    labels: dict[str, tuple[str, str]]


def plan(graph: Graph, tests: dict[str, DataTest], nodes: list[str], test_names: list[str]) -> Plan:
    """Nodes in DAG order with each test right after the last node it reads. A node also waits
    for the tests on its parents (when everything those tests read is upstream of it), so an
    error-severity test failure skips what is built on the data it found wrong."""
    position = {n: i for i, n in enumerate(nodes)}
    parents = {n: set(graph.parents(n)) for n in nodes}
    placed: dict[int, list[str]] = {}
    upstream: dict[str, set[str]] = {}  # ancestors, walked once per node that needs them
    for t in test_names:
        refs = set(tests[t].refs)
        parents[t] = refs
        placed.setdefault(max((position[r] for r in refs if r in position), default=-1),
                          []).append(t)
        readers = {n for n in nodes if set(graph.nodes[n].sources) & set(tests[t].sources)}
        for child in readers | {c for r in refs for c in graph.children.get(r, ())
                                if c in position}:
            if child not in upstream:
                upstream[child] = graph.ancestors(child)
            if refs <= upstream[child]:
                parents[child].add(t)
    order = placed.get(-1, [])
    for i, n in enumerate(nodes):
        order += [n] + placed.get(i, [])
    labels = {n: (graph.nodes[n].file.kind, graph.nodes[n].config.materialized) for n in nodes}
    labels.update({t: ("test", "test") for t in test_names})
    return Plan(order, parents, labels)


def runner(ctx: BuildContext, tests: dict[str, DataTest],
           skip_passed: bool = False) -> Callable[[str], NodeResult]:
    return lambda name: (run_data_test(ctx, tests[name], skip_passed) if name in tests
                         else run_node(ctx, name))


def _context(loaded: Loaded, inv: Invocation, selected=(),
             report: Reporter = Reporter(), long_queries: bool = False) -> BuildContext:
    """The build context. Its engine starts Spark when a node first needs it (a build of nodes
    that are all up to date starts none); a start that fails (no JARs, no master) stops the
    run as one usage error (errors.StartError). long_queries: the nodes will read much new
    data (new_input.py)."""
    # The session lives as long as the process: one JVM start per invocation (and per test run).
    engine = loaded.engine or engine_of(loaded.project, inv)
    engine.plan_start(lambda starting: report.phase("starting Spark" if starting else None),
                      long_queries)
    return BuildContext(loaded.project, loaded.graph, engine, inv.full_refresh,
                        frozenset(selected),
                        deferred=deferred_tables(inv, loaded, engine, selected))


def deferred_tables(inv: Invocation, loaded: Loaded, engine: Engine, selected) -> dict:
    """--defer: name -> the --state run's table, for each model or seed the selected nodes read
    (through others too) that is not selected and has no table in this target, as dbt's
    --defer reads production's relations in a development run."""
    if not inv.defer:
        return {}
    if loaded.previous is None:
        raise MedallionError("--defer reads tables of the --state run: pass --state DIR too",
                             hint="e.g. --defer --state prod-target/ (a copy of a deployed "
                                  "run's target/ folder)")
    graph, chosen, read = loaded.graph, set(selected), set()
    for name in chosen:  # models and seeds, or data tests (`medallion test --defer`)
        parents = graph.ancestors(name) if name in graph.nodes else set(loaded.tests[name].refs)
        read |= parents.union(*(graph.ancestors(p) for p in parents))
    read -= chosen
    return {name: loaded.previous[name]["table"] for name in sorted(read)
            if (loaded.previous.get(name) or {}).get("table")
            and not engine.table_exists(loaded.project.table_path(graph.nodes[name].file))}


def build(inv: Invocation, command: str, kinds=("seed", "model"), report: Reporter = Reporter(),
          watch: bool = False) -> list[NodeResult]:
    """Build the selected nodes once (with `build`, each followed by its data tests); with
    `watch`, then keep them running and fresh until SIGINT/SIGTERM (see watch.py). The
    warehouse's lock is held throughout: one writer at a time."""
    loaded = load(inv, with_engine=True)
    with warehouse_lock(loaded.project.target.warehouse, command + (" --watch" if watch else "")):
        return _build(inv, loaded, command, kinds, report, watch)


def _build(inv: Invocation, loaded: Loaded, command: str, kinds, report: Reporter,
           watch: bool) -> list[NodeResult]:
    started = time.time()
    graph, tests = loaded.graph, loaded.tests
    chosen = selected_nodes(inv, loaded, kinds)
    if inv.full_refresh:
        check_flow_refresh(graph, chosen)
    test_names = selected_tests(inv, loaded) if command == "build" and not inv.empty else []
    steps = plan(graph, tests, chosen, test_names)
    write_compiled(loaded.project, graph.nodes, [graph.nodes[n] for n in chosen])
    project = loaded.project
    hooks = 0 if inv.empty else len(project.on_run_start) + len(project.on_run_end)
    report.start(len(steps.order) + hooks * bool(steps.order), project.target.name)
    if not steps.order:
        return []
    # Imported here: the event log brings delta-rs, which ls and compile never load.
    from ..report.observers import observed_run

    # Much new data: long queries, where the JIT's second tier pays for itself (spark/conf.py)
    long_queries = not inv.empty and new_landing_bytes(project, graph, chosen, inv.full_refresh) \
        >= loaded.engine.capabilities.long_queries.landing_bytes
    ctx = _context(loaded, inv, chosen, report, long_queries)
    if inv.empty:  # nothing is written, so nothing goes to the event log or run results
        if watch:
            raise MedallionError("--empty writes nothing, so it cannot --watch",
                                 hint="drop one of the two flags")
        schemas: dict = {}
        return execute(steps.order, steps.parents, lambda name: check_node(ctx, name, schemas),
                       steps.labels, inv.threads or loaded.project.target.threads,
                       report.result, report.begin, inv.fail_fast)
    if inv.full_refresh:
        mark_refreshes(ctx, [graph.nodes[n] for n in chosen])
    with observed_run(ctx, command + " --watch" * watch, len(steps.order), report.begin,
                      report.result, report.batch, report.warn) as run:
        skip_passed = not (inv.rerun_tests or inv.full_refresh)
        results = run_project_hooks(run.ctx, "on-run-start", project.on_run_start, run.result)
        failed = next((r.name for r in results if r.failed), None)
        # a failed start hook builds nothing: every node is skipped (so `retry` runs them)
        run_one = runner(run.ctx, tests, skip_passed) if not failed else (
            lambda name: NodeResult(name, *steps.labels[name], "skipped",
                                    message=f"{failed} failed"))
        results += execute(steps.order, steps.parents, run_one, steps.labels,
                           inv.threads or project.target.threads, run.result, run.begin,
                           inv.fail_fast, ctx.engine.cancel_jobs)
        stopped = interrupted(results)
        if not stopped:
            results += run_project_hooks(run.ctx, "on-run-end", project.on_run_end, run.result)
        write_run_results(loaded.project, command, results, started, ctx.engine.start_seconds)
        if watch and not stopped:
            results += _watch(inv, run.ctx, chosen, results, command, run.result, run.batch)
    return results


def _watch(inv: Invocation, ctx: BuildContext, chosen: list[str], results: list[NodeResult],
           command: str, on_result: Callable[[NodeResult], None],
           on_batch: Callable) -> list[NodeResult]:
    """After the first pass: keep the selected nodes fresh until SIGINT/SIGTERM; returns what
    it reported."""
    from .watch import stop_on_signals, watch

    quiet = replace(inv, full_refresh=False)
    latest: list[Loaded] = []

    def reload() -> Graph:
        """The project rendered again, so is_incremental() and edited SQL are current."""
        latest[:] = [load(quiet, engine=ctx.engine)]
        return latest[0].graph

    def refresh(watch_ctx: BuildContext, held: set[str], told: Callable[[NodeResult], None],
                stop: threading.Event) -> None:
        """Batch models, and then their data tests (`build`), as they are due."""
        again = latest[0]
        names = [n for n in selected_nodes(quiet, again, COMMAND_KINDS[command])
                 if again.graph.nodes[n].config.materialized not in ("streaming", "view")
                 and n not in held]
        tests = [t for t in selected_tests(quiet, again) if not set(again.tests[t].refs) & held
                 ] if command == "build" else []
        steps = plan(again.graph, again.tests, names, tests)
        execute(steps.order, steps.parents, runner(watch_ctx, again.tests, skip_passed=True),
                steps.labels, quiet.threads or again.project.target.threads, told,
                on_interrupt=watch_ctx.engine.cancel_jobs, stop=stop)

    with stop_on_signals() as stops:
        return watch(ctx, chosen, results, reload, refresh, on_result, on_batch, stops)


def test(inv: Invocation, report: Reporter = Reporter()) -> list[NodeResult]:
    """Run the selected data tests against the tables as they are."""
    started = time.time()
    loaded = load(inv)
    names = selected_tests(inv, loaded)
    report.start(len(names), loaded.project.target.name)
    if not names:
        return []
    from ..report.observers import observed_run

    ctx = _context(loaded, inv, names, report=report)
    with observed_run(ctx, "test", len(names), report.begin, report.result, report.batch,
                      report.warn) as run:
        results = execute(names, {}, runner(run.ctx, loaded.tests),
                          {n: ("test", "test") for n in names},
                          inv.threads or loaded.project.target.threads, run.result, run.begin,
                          inv.fail_fast, ctx.engine.cancel_jobs)
        write_run_results(loaded.project, "test", results, started, ctx.engine.start_seconds)
    return results


COMMAND_KINDS = {"build": ("seed", "model"), "run": ("model",), "seed": ("seed",)}


def retry(inv: Invocation, report: Reporter = Reporter()) -> list[NodeResult]:
    """Run again what failed or was skipped in the last build, run, seed or test (its
    target/run_results.json), with the same command: dbt's retry."""
    loaded = load(inv)
    last = read_run_results(loaded.project)
    where = str(loaded.project.target_dir / "run_results.json")
    if last is None:
        raise MedallionError("nothing to retry: no run results yet", path=where,
                             hint="run medallion build first")
    if last["command"] not in (*COMMAND_KINDS, "test"):
        raise MedallionError(f"cannot retry '{last['command']}'", path=where)
    if last["target"] != loaded.project.target.name:
        raise MedallionError(f"the last run was on target '{last['target']}', not "
                             f"'{loaded.project.target.name}'", path=where,
                             hint=f"medallion retry -t {last['target']}")
    known = {*loaded.graph.nodes, *loaded.tests}
    names = tuple(r["name"] for r in last["results"]
                  if r["status"] in ("error", "skipped") and r["name"] in known)
    if not names:
        report.start(0, loaded.project.target.name)
        return []
    again = replace(inv, select=names, exclude=())
    if last["command"] == "test":
        return test(again, report)
    return build(again, last["command"], COMMAND_KINDS[last["command"]], report)


def unit_test(inv: Invocation, report: Reporter = Reporter()) -> list[NodeResult]:
    """Run model unit tests (tests/unit/*.yml) on their given rows; no table is touched (nor
    the event log: they say nothing about the warehouse)."""
    loaded = load(inv)
    models = set(selected_nodes(inv, loaded, ("model",), tests={}))
    found = {t.name: t for t in load_unit_tests(loaded.project, loaded.graph)}
    names = [n for n, t in found.items() if t.model in models or n in inv.select]
    report.start(len(names), loaded.project.target.name)
    if not names:
        return []
    spark = _context(loaded, inv, report=report).engine.spark

    def run(name: str) -> NodeResult:
        def work() -> NodeResult:
            diff = run_unit_test(spark, loaded.project, loaded.graph, found[name])
            return NodeResult(name, "unit", "unit test", "error" if diff else "success",
                              message=f"{found[name].model} ({found[name].origin}): "
                                      f"{diff}" if diff else "")

        return timed(name, "unit", "unit test", work)

    # Unit tests register temp views by model name: one at a time.
    return execute(names, {}, run, {n: ("unit", "unit test") for n in names}, 1, report.result,
                   report.begin)


def serve(inv: Invocation, run_command: Callable[[list[str]], None],
          on_ready: Callable[[Project, int], None],
          on_command: Callable[[list[str], int, float], None]) -> None:
    """medallion serve: keep the project's Spark running for its commands (server.py)."""
    from ..serve import server

    project = project_of(inv)
    target = engine_target(project)

    def declined(request: dict) -> str | None:
        try:
            theirs = project_of(Invocation(request["project_dir"], request["profiles_dir"],
                                           request["target"]))
        except MedallionError:
            return None  # the command reports it, as anywhere
        if theirs.root != project.root:
            return f"medallion serve runs the project in {project.root}"
        if engine_target(theirs) != target:
            return (f"medallion serve runs Spark for target '{target.name}' as it was when the "
                    f"server started, and target '{theirs.target.name}' starts it differently")
        return None

    server.serve(project, engine_of(project, inv), run_command, declined,
                 lambda port: on_ready(project, port), on_command)


def clean(inv: Invocation) -> list[Path]:
    """Delete the project's clean-targets (default: target/), as dbt clean; returns those
    removed. Folders outside the project, or the project itself, are refused."""
    import shutil

    project = project_of(inv)
    root = project.root.resolve()
    folders = [(root / name).resolve() for name in project.clean_targets]
    for folder in folders:
        if folder == root or root not in folder.parents:
            raise MedallionError(f"clean-targets names {folder}, which is not inside the "
                                 "project", path=str(root / "medallion_project.yml"),
                                 hint="list folders of the project, such as target")
    removed = [folder for folder in folders if folder.exists()]
    for folder in removed:
        shutil.rmtree(folder)
    return removed


def debug(inv: Invocation):
    """medallion debug: the checks of checkup.py, one by one."""
    from .checkup import run_checks

    return run_checks(lambda: project_of(inv), lambda project: engine_of(project, inv))


def source_freshness(inv: Invocation) -> list:
    """The selected sources' freshness (freshness.py), also written to target/sources.json.
    Spark starts only for a source whose loaded_at_field must be read."""
    from ..materialize.inputs import read_source
    from ..report.eventlog import now
    from ..report.freshness import source_freshness as check

    loaded = load(inv)
    engines: list[Engine] = []

    def read(source):
        if not engines:
            engines.append(engine_of(loaded.project, inv))
        return read_source(BuildContext(loaded.project, loaded.graph, engines[0]), source)

    checked = check(select_sources(loaded.project.sources, inv.select), read, now())
    write_sources(loaded.project, checked)
    return checked


def status(inv: Invocation) -> list:
    """The selected tables' status (status.py), read from the warehouse without Spark."""
    from ..report.status import table_status

    loaded = load(inv)
    return table_status(loaded.project, loaded.graph,
                        selected_nodes(inv, loaded))


def fetch_jars(bundles: tuple[str, ...]) -> list[Path]:
    """Fetch each bundle's JARs with Maven unless they are there; check them against this Spark."""
    from ..spark.jars import check_spark_jars, fetch, jar_files, recipe

    folders = []
    for bundle in bundles:
        folder = fetch(bundle)
        check_spark_jars(jar_files(folder), str(recipe(bundle)),
                         "the recipe pins JARs for another Spark: install the pyspark this "
                         "package requires, or update the recipe")
        folders.append(folder)
    return folders


# The template is this repository: cookiecutter.json at its root, beside the package.
# Installed packages carry the template (setup.py copies it in); an editable install is the
# repository, whose root is the template.
PACKAGED_TEMPLATE = Path(__file__).resolve().parent.parent / "template"
TEMPLATE_ROOT = (PACKAGED_TEMPLATE if (PACKAGED_TEMPLATE / "cookiecutter.json").is_file()
                 else PACKAGED_TEMPLATE.parent.parent)


def init(name: str, template: str | None = None, output_dir: str = ".",
         no_input: bool = False, extra: dict | None = None) -> Path:
    """Create a new project from the Medallion cookiecutter template; returns its folder."""
    from cookiecutter.exceptions import CookiecutterException
    from cookiecutter.main import cookiecutter

    if template is None:
        if not (TEMPLATE_ROOT / "cookiecutter.json").is_file():
            raise MedallionError("the Medallion template is not installed beside this package",
                                 hint="pass --template with the template's folder or git URL")
        template = str(TEMPLATE_ROOT)
    slug = re.sub(r"\W+", "_", name.strip().lower()).strip("_")
    try:
        created = cookiecutter(template, no_input=no_input, output_dir=output_dir,
                               extra_context={"project_name": name, "project_slug": slug,
                                              **(extra or {})})
    except CookiecutterException as exc:
        raise MedallionError(f"cannot create the project: {exc}", path=output_dir) from exc
    return Path(created)


def docs(inv: Invocation, out: str | None = None) -> Path:
    """Write the static documentation page; returns its path. Built tables' columns come from
    the engine (the embedded one reads the Delta log: no JVM)."""
    from ..report.docs import write_docs

    loaded = load(inv)
    return write_docs(loaded.project, loaded.graph, loaded.tests,
                      engine_of(loaded.project, inv).table_columns, Path(out) if out else None)
