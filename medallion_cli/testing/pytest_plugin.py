"""pytest fixtures for a Medallion project's own tests (tests/*.py), registered as a plugin.

    def test_latest_event_wins(run_model):
        out = run_model("silver_orders", {"ref('bronze_orders')": [
            {"order_id": 1, "status": "placed", "updated_at": "2024-05-01T09:00:00Z"}]})
        assert out.count() == 1

Fixtures: `spark` (one session for the run, from the project's profile), `medallion_project`
(the loaded project: .project, .graph, .tests), and `run_model(name, inputs)`, which renders a
model against the given inputs (lists of row dicts or DataFrames, keyed by ref('x'),
source('s', 't') or a bare model name) and returns its rows as a DataFrame. No table is touched.
Set the project folder with --medallion-project-dir (default: pytest's rootdir).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import pytest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..commands.invocation import Loaded


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--medallion-project-dir", default=None,
                     help="the Medallion project the fixtures load (default: rootdir)")


@pytest.fixture(scope="session")
def medallion_project(pytestconfig: pytest.Config) -> Loaded:
    from ..commands.invocation import Invocation, load

    folder = pytestconfig.getoption("--medallion-project-dir") or str(pytestconfig.rootpath)
    return load(Invocation(project_dir=folder))


@pytest.fixture(scope="session")
def spark(medallion_project: Loaded) -> SparkSession:
    from ..spark.start import start_spark

    session: SparkSession = start_spark(medallion_project.project.target)
    return session


@pytest.fixture
def run_model(spark: SparkSession,
              medallion_project: Loaded) -> Callable[[str, dict[str, Any]], DataFrame]:
    from ..load.rendering import Renderer
    from ..run.unittests import input_relation, model_output, rows_frame

    project, graph = medallion_project.project, medallion_project.graph
    renderer = Renderer(project)

    def _run(name: str, inputs: dict[str, Any]) -> DataFrame:
        frames = {}
        for key, value in inputs.items():
            relation = input_relation(renderer, key, "run_model", f"input {key!r}")
            frames[relation] = value if hasattr(value, "schema") else rows_frame(spark, value)
        return model_output(spark, project, graph, name, frames, "run_model")

    return _run
