"""`medallion debug`: is this machine, profile and project ready to build, without building.

Each check says what it found; the Spark check starts the target's Spark (the JVM, the JARs, the
master) and runs one query, as a build would begin.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from ..core.errors import MedallionError
from ..core.locations import is_remote, on_s3
from ..engines import engine_class
from ..spark import jars
from ..spark.connect import shown
from ..spark.jars import delta_jar_files
from ..storage.object_store import aws_settings, bucket_problem

if TYPE_CHECKING:
    from ..core.project import Project
    from ..engines.base import Engine


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def _java() -> Check:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        return Check("java", False, "no java found: install Java 17 or 21 (or set JAVA_HOME)")
    shown = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    first = shown.splitlines()[0] if shown else "unknown version"
    major = re.search(r'version "(\d+)', first)
    if major and int(major[1]) < 17:
        return Check("java", False, f"{first} ({java}): Spark 4 needs Java 17 or later")
    return Check("java", True, f"{first} ({java})")


def _versions() -> Check:
    found = {name: importlib.metadata.version(name) for name in ("pyspark", "deltalake")}
    return Check("python", True, f"{sys.version.split()[0]} ({sys.executable}); "
                 + ", ".join(f"{k} {v}" for k, v in found.items()))


def _jars(project: Project) -> Check:
    target = project.target
    if target.spark_remote:
        return Check("jars", True, "none needed here: the Spark Connect server brings its own")
    needed = jars.bundles_for(project)
    found = []
    if "delta" in engine_class(target.engine).capabilities.jar_bundles:
        found = [p.name for p in delta_jar_files(target)]
        if not found:
            return Check("jars", False, "the Delta Lake JARs are not here: run medallion jars")
    for bundle in needed:
        folder = jars.present(bundle)
        if folder is None:
            maven = "mvn is on PATH" if shutil.which("mvn") else "mvn is NOT on PATH: install Maven"
            return Check("jars", False, f"{bundle} JARs not fetched yet: the first build fetches "
                         f"them with Maven ({maven}), or run medallion jars {bundle}")
        found.append(f"{bundle}: {len(jars.jar_files(folder))} JARs in {folder}")
    return Check("jars", True, ", ".join(found) if found else "none needed (embedded engine)")


def _warehouse(project: Project) -> Check:
    where = project.target.warehouse
    if on_s3(where):
        problem = bucket_problem(where)
        endpoint = aws_settings().endpoint or "AWS"
        if problem:
            return Check("warehouse", False, f"{where} (store: {endpoint}): {problem}")
        return Check("warehouse", True, f"{where} (store: {endpoint}): reachable, writable, "
                     "conditional writes refused as they should be")
    if is_remote(where):
        return Check("warehouse", True, f"{where} (object storage: reached through Spark below)")
    existing = next(p for p in [Path(where), *Path(where).parents] if p.exists())
    if not os.access(existing, os.W_OK):
        return Check("warehouse", False, f"{where}: {existing} is not writable")
    return Check("warehouse", True, where if existing == Path(where)
                 else f"{where} (created by the first build)")


def _spark(project: Project, start_engine: Callable[[], Engine]) -> Check:
    began = time.perf_counter()
    spark = start_engine().spark
    spark.sql("select 1").collect()
    remote = project.target.spark_remote
    where = f"the Spark Connect server {shown(remote)}" if remote else spark.sparkContext.master
    return Check("spark", True, f"Spark {spark.version} on {where}, "
                 f"{project.target.engine} engine, ready in {time.perf_counter() - began:.1f} s")


def run_checks(load: Callable[[], Project],
               start_engine: Callable[[Project], Engine]) -> Iterator[Check]:
    """Each check in turn; `load` loads the project (a failure ends the checks there) and
    `start_engine(project)` starts its engine."""
    yield _versions()
    yield _java()
    try:
        project = load()
    except MedallionError as exc:
        yield Check("project", False, str(exc))
        return
    target = project.target
    yield Check("project", True, f"{project.name} ({project.root}), {len(project.nodes)} "
                f"model(s) and seed(s)")
    where = (f"Spark Connect server {shown(target.spark_remote)}" if target.spark_remote
             else f"master {target.spark_master}")
    yield Check("profile", True, f"target '{target.name}' ({target.profiles_file}): "
                f"{target.engine} engine, {where}")
    for check in (_jars, _warehouse):
        try:
            yield check(project)
        except MedallionError as exc:
            yield Check(check.__name__.strip("_"), False, str(exc))
    try:
        yield _spark(project, lambda: start_engine(project))
    except Exception as exc:
        from ..core.error_text import error_message

        yield Check("spark", False, error_message(exc))
