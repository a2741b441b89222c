"""The commands around a project: init (a new one from the template), clean, debug, jars, and
serve (its Spark kept running for its commands).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from ..core.errors import CapabilityError, MedallionError
from ..core.project import Project, Target
from .invocation import Invocation, engine_of, engine_target, project_of

if TYPE_CHECKING:
    from ..serve.protocol import Message
    from .checkup import Check


def serve(inv: Invocation, run_command: Callable[[list[str]], None],
          on_ready: Callable[[Project, int], None],
          on_command: Callable[[list[str], int, float], None],
          idle_seconds: float | None = None, sql_port: int | None = None,
          sql_host: str = "127.0.0.1") -> None:
    """medallion serve: keep the project's Spark running for its commands (server.py); a
    daemon's stops after idle_seconds without one. With sql_port, the Spark also serves SQL
    clients the catalog's tables there, at sql_host (spark/sql_endpoint.py)."""
    from ..serve import server
    from ..spark import sql_endpoint

    project = project_of(inv)
    target = engine_target(project)
    if target.spark_remote:
        raise MedallionError(
            f"target '{target.name}' reaches Spark through a Spark Connect server, which keeps "
            "its Spark running itself: medallion serve keeps a Spark of this machine's",
            path=target.profiles_file, hint="run commands directly: each reaches the server "
                                            "in a second, with no JVM to start here")

    def declined(request: Message) -> str | None:
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

    if sql_port is not None:
        _check_sql_endpoint(target, sql_host, sql_port)
    engine = engine_of(project, inv, sql_endpoint.endpoint_conf(
        sql_port, sql_host, target.spark_conf.get("spark.driver.extraClassPath"))
                       if sql_port is not None else None)

    def ready(port: int) -> None:
        if sql_port is not None:
            sql_endpoint.start_sql_endpoint(engine.spark, sql_port, sql_host)
        on_ready(project, port)

    server.serve(project, engine, run_command, declined, ready, on_command, idle_seconds)


def _check_sql_endpoint(target: Target, host: str, port: int) -> None:
    """What --sql needs, before Spark starts: a Spark that names Delta tables, names to query
    them by, and its address (beyond loopback, with a password)."""
    from ..engines import engine_class
    from ..spark.sql_endpoint import check_endpoint_address

    if engine_class(target.engine).capabilities.catalog != "spark_sql":
        raise CapabilityError(
            f"target '{target.name}': serve --sql answers in the target's Spark, and the "
            f"{target.engine} engine's Spark has no Delta catalog to read its tables by name",
            path=target.profiles_file,
            hint="serve --sql a target with engine: delta-spark on the same warehouse and "
                 "metastore (docs/engines-and-clusters.md)")
    if target.metastore is None:
        raise MedallionError(
            f"target '{target.name}' has no metastore: SQL clients would find no table by name",
            path=target.profiles_file,
            hint="set metastore: local (or a thrift:// Hive Metastore service) in the target")
    check_endpoint_address(host, port)


def on_server(inv: Invocation, argv: list[str], daemon: bool | None,
              run_command: Callable[[list[str]], None], say: Callable[[str], None]
              ) -> int | None:
    """Run a command (argv, as typed after `medallion`) on the project's server: its exit code,
    or None to run it here. With no server running, the daemon wanted (daemon.py) and Spark
    on this machine (not a cluster's, whose cores it would hold, nor a Connect server), the
    daemon is started first and runs it."""
    from ..serve import daemon as daemons
    from ..serve.client import forward
    from ..serve.protocol import _not_own, _served, listening, served_file

    code = forward(inv.project_dir, inv.profiles_dir, inv.target, argv)
    path = served_file(inv.project_dir)
    if code is not None or _served(path).get("pid") == os.getpid():
        return code  # ran on the server, or this is the server
    if not daemons.wanted(daemon, _typed_by_a_person()) or _not_own(path):
        return None
    if listening(_served(path)):
        return None  # a server that declined the command
    target = engine_target(project_of(inv))
    if target.spark_remote or not target.spark_master.startswith("local"):
        return None
    idle = daemons.idle_seconds()
    own = Invocation(str(Path(inv.project_dir).resolve()), inv.profiles_dir, inv.target,
                     vars=inv.vars)
    pid = daemons.start(inv.project_dir, lambda ready: serve(
        own, run_command, lambda project, port: ready(port),
        lambda args, exit_code, seconds: print(
            f"medallion {' '.join(args)}: exit {exit_code} in {seconds:.1f} s", flush=True),
        idle), lambda: listening(_served(path)))
    if pid is None:  # another command's daemon, if one listens now; else a JVM of its own
        return forward(inv.project_dir, inv.profiles_dir, inv.target, argv)
    say(f"Started medallion's daemon (pid {pid}): it keeps this project's Spark warm for the "
        f"next commands and stops after {idle / 60:g} idle minutes (medallion serve --stop "
        f"stops it; --no-daemon or {daemons.DAEMON_VARIABLE}=off runs without)")
    return forward(inv.project_dir, inv.profiles_dir, inv.target, argv)


def _typed_by_a_person() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def stop_server(inv: Invocation) -> int | None:
    """medallion serve --stop: the pid of the project's server (a daemon or not), stopped once
    the command it runs ends; None when none runs."""
    from ..serve.protocol import _not_own, _served, ask_to_stop, listening, served_file

    path = served_file(inv.project_dir)
    served = _served(path)
    if _not_own(path) or not listening(served):
        return None
    if not ask_to_stop(served):
        raise MedallionError(f"the project's server (pid {served['pid']}) did not stop within "
                             "2 minutes", path=str(path), hint=f"kill {served['pid']}")
    pid: int = served["pid"]
    return pid


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


def debug(inv: Invocation) -> Iterator[Check]:
    """medallion debug: the checks of checkup.py, one by one."""
    from .checkup import run_checks

    return run_checks(lambda: project_of(inv), lambda project: engine_of(project, inv))


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


# Asked of `medallion init`'s user: (key, question, default, choices or None) -> the answer
Ask = Callable[[str, str, str, "list[str] | None"], str]


def template_questions(template: str) -> list[tuple[str, str, str, list[str] | None]]:
    """What a local template asks beyond the project's name (given on the command line, its
    folder name derived from it): (key, question, default, choices or None), in its order.
    Values computed from others ("{{ cookiecutter.x }}") are not asked."""
    spec = json.loads((Path(template) / "cookiecutter.json").read_text())
    prompts = spec.get("__prompts__", {})
    questions: list[tuple[str, str, str, list[str] | None]] = []
    for key, value in spec.items():
        if key.startswith("_") or key in ("project_name", "project_slug"):
            continue
        if isinstance(value, list):
            questions.append((key, prompts.get(key, key), str(value[0]), [str(v) for v in value]))
        elif isinstance(value, str) and "{{" not in value:
            questions.append((key, prompts.get(key, key), value, None))
    return questions


def init(name: str, template: str | None = None, output_dir: str = ".",
         no_input: bool = False, extra: dict[str, str] | None = None, ask: Ask | None = None
         ) -> Path:
    """Create a new project from the Medallion cookiecutter template; returns its folder.
    `ask` answers the template's other questions (on a terminal); without it, or with
    no_input, they take the template's defaults. A template by git URL asks them itself."""
    from cookiecutter.exceptions import CookiecutterException
    from cookiecutter.main import cookiecutter

    if template is None:
        if not (TEMPLATE_ROOT / "cookiecutter.json").is_file():
            raise MedallionError("the Medallion template is not installed beside this package",
                                 hint="pass --template with the template's folder or git URL")
        template = str(TEMPLATE_ROOT)
    slug = re.sub(r"\W+", "_", name.strip().lower()).strip("_")
    answers = dict(extra or {})
    local = Path(template, "cookiecutter.json").is_file()
    if local and ask is not None and not no_input:
        answers = {key: ask(key, question, default, choices) for key, question, default, choices
                   in template_questions(template) if key not in answers} | answers
    try:
        with _temporary_files_removed():
            created = cookiecutter(template, no_input=no_input or local, output_dir=output_dir,
                                   extra_context={"project_name": name, "project_slug": slug,
                                                  **answers})
    except CookiecutterException as exc:
        raise MedallionError(f"cannot create the project: {exc}", path=output_dir) from exc
    return Path(created)


@contextmanager
def _temporary_files_removed() -> Iterator[None]:
    """cookiecutter (2.7) copies each hook it runs to a temporary file it never removes: a
    file in the system's temporary folder per project made. Here they go to a folder of
    their own, removed afterwards."""
    folder = tempfile.mkdtemp(prefix="medallion-init-")
    before = tempfile.tempdir
    tempfile.tempdir = folder
    try:
        yield
    finally:
        tempfile.tempdir = before
        shutil.rmtree(folder, ignore_errors=True)
