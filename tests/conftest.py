"""Shared fixtures: one SparkSession for the whole run, and small projects written to tmp folders."""

from __future__ import annotations

import os
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from medallion_cli import tasks

DELTA_JARS = "MEDALLION_DELTA_JARS"  # a folder of Delta Lake JARs: runs the native engine's tests

PROFILE = """\
test:
  target: local
  outputs:
    local:
      engine: embedded
      warehouse: warehouse
      spark:
        master: "local[2]"
        conf:
          spark.sql.shuffle.partitions: 2
"""

PROJECT = """\
name: test_project
profile: test
"""


def write_project(root: Path, files: dict[str, str], project_yml: str = PROJECT,
                  profile: str = PROFILE) -> Path:
    """Write a project: medallion_project.yml, profiles/profiles.yml, then the given files."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "medallion_project.yml").write_text(project_yml)
    (root / "profiles").mkdir(exist_ok=True)
    (root / "profiles" / "profiles.yml").write_text(profile)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test run; engines made later pick it up via getOrCreate."""
    from medallion_cli.engines.spark import start_spark
    from medallion_cli.project import load_target

    root = write_project(Path(__import__("tempfile").mkdtemp()), {})
    target = load_target(root, "test", None, None)
    extra = {}
    if os.environ.get(DELTA_JARS):  # one session for both engines: start it with Delta's JARs
        from medallion_cli.engines.native import spark_settings

        extra = spark_settings(replace(target, delta_jars=os.environ[DELTA_JARS]))
    session = start_spark(target, extra)
    yield session
    session.stop()


@pytest.fixture
def project(tmp_path):
    """A function that writes a project into a fresh folder (one per call) and returns its path."""
    count = iter(range(1000))
    return lambda files, **kw: write_project(tmp_path / f"proj{next(count)}", files, **kw)


@pytest.fixture
def build(spark):
    """Build a project like `medallion build` does; returns {name: NodeResult}."""

    def _build(root: Path, command: str = "build", kinds=("seed", "model"), **options):
        inv = tasks.Invocation(project_dir=str(root), **options)
        return {r.name: r for r in tasks.build(inv, command, kinds)}

    return _build


def read_delta(path: Path):
    """Rows of a Delta table read by delta-rs, outside the tool, sorted for comparison."""
    from deltalake import DeltaTable

    table = DeltaTable(str(path)).to_pyarrow_table()
    return sorted(table.to_pylist(), key=lambda r: tuple(str(v) for v in r.values()))
