"""Model unit tests: render a model against given input rows and compare with expected rows.

tests/unit/*.yml:

    unit_tests:
      - name: latest_event_wins
        model: silver_orders
        given:
          - input: ref('bronze_orders')
            schema: "order_id bigint, status string, updated_at timestamp"   # optional
            rows: [{order_id: 1, status: placed, updated_at: "2024-05-01T09:00:00Z"}]
        expect:
          rows: [{order_id: 1, status: placed}]

The model's SQL runs on temp views made from the given rows (no Delta table is read or
written), and the result is what a first build would write: merge models keep the latest row
per key and drop deletes, SCD2 models give their history. Expected rows are compared on the
columns they name, in any order, with chispa.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.errors import MedallionError, ProjectError, closest
from ..core.project import Project
from ..dag.graph import Graph
from ..load.rendering import Renderer
from ..load.yaml_io import read_yaml
from ..materialize.writing.writes import first_build_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class UnitTest:
    name: str
    model: str
    given: dict[str, dict[str, Any]]  # relation name -> {"rows": [...], "schema": DDL or None}
    expect: list[dict[str, Any]]
    origin: str


def input_relation(renderer: Renderer, text: str, origin: str, key: str) -> str:
    """The temp view name for `ref('x')`, `source('s', 't')` or a bare model name."""
    name = renderer.relation_of(text, f"{origin}, {key}")
    if name is not None:
        return name
    if text in renderer.project.nodes:
        return text
    raise MedallionError(f"{key}: input {text!r} is not ref('model') or source('name', 'table')",
                         path=origin)


def load_unit_tests(project: Project, graph: Graph) -> list[UnitTest]:
    renderer = Renderer(project)
    found = []
    for path in project.unit_test_files:
        origin = str(path.relative_to(project.root))
        for i, entry in enumerate(read_yaml(path).get("unit_tests") or []):
            key = f"unit_tests[{i}]"
            model = entry.get("model")
            if model not in graph.nodes:
                raise MedallionError(f"{key}: model {model!r} does not exist. "
                                     f"{closest(str(model), graph.nodes)}".strip(), path=origin)
            if graph.nodes[model].sql is None:
                raise ProjectError(f"{key}: model {model!r} is a seed: a unit test checks a "
                                   "model's SQL on the rows given to it", path=origin,
                                   hint="name the model that reads the seed, and give the "
                                        "seed's rows under 'given:'")
            given = {}
            for j, item in enumerate(entry.get("given") or []):
                name = input_relation(renderer, str(item.get("input", "")), origin,
                                      f"{key}.given[{j}]")
                given[name] = {"rows": item.get("rows") or [], "schema": item.get("schema")}
            found.append(UnitTest(entry.get("name") or f"{model}_{i}", model, given,
                                  (entry.get("expect") or {}).get("rows") or [], origin))
    return found


def rows_frame(spark: SparkSession, rows: list[dict[str, Any]],
               schema: Any = None) -> DataFrame:
    """A DataFrame from YAML rows; with a schema (DDL or StructType) values are cast like JSON,
    and a value that does not fit is an error rather than a null. Without one, Spark infers
    their types as it does reading JSON (one array of the rows, whose elements' fields it
    merges), in SQL: a Spark Connect session has no RDDs to read JSON lines from."""
    from ..spark.pyspark_api import F, T

    if not rows and schema is None:
        raise MedallionError("an input with no rows needs a schema")
    text = F.lit(json.dumps(rows, default=str))
    one = spark.range(1)
    if schema is None:
        inferred = one.select(F.schema_of_json(text)).first()
        assert inferred is not None  # (a select over range(1): one row)
        array = inferred[0]
    else:
        array = (T.ArrayType(schema) if isinstance(schema, T.StructType)
                 else f"array<struct<{schema}>>")
    rows_of = F.from_json(text, array, {"mode": "FAILFAST"})
    return one.select(F.explode(rows_of).alias("row")).select("row.*")


def model_output(spark: SparkSession, project: Project, graph: Graph, model: str,
                 inputs: dict[str, DataFrame], origin: str) -> DataFrame:
    """The model's rows computed from `inputs` ({relation name: DataFrame}) alone."""
    node = graph.nodes[model]
    missing = [r for r in node.refs if r not in inputs] + [
        project.sources[s].relation for s in node.sources
        if project.sources[s].relation not in inputs]
    if missing:
        raise MedallionError(f"the unit test of {model} gives no rows for: {', '.join(missing)}",
                             path=origin, hint="add them under 'given:' (rows may be empty, with "
                                               "a schema)")
    rendered = Renderer(project, table_exists=lambda path: False).render(node.file)
    assert rendered.sql is not None  # a seed has no unit test (load_unit_tests)
    for name, frame in inputs.items():
        frame.createOrReplaceTempView(name)
    output: DataFrame = first_build_rows(rendered, spark.sql(rendered.sql))
    return output


def run_unit_test(spark: SparkSession, project: Project, graph: Graph, test: UnitTest) -> str | None:
    """None when the model gives the expected rows; otherwise chispa's description of the diff."""
    from chispa import assert_df_equality
    from chispa.dataframe_comparer import DataFramesNotEqualError
    from chispa.schema_comparer import SchemasNotEqualError

    inputs = {name: rows_frame(spark, g["rows"], g["schema"]) for name, g in test.given.items()}
    actual = model_output(spark, project, graph, test.model, inputs, test.origin)
    columns = list(dict.fromkeys(c for row in test.expect for c in row)) or actual.columns
    unknown = [c for c in columns if c not in actual.columns]
    if unknown:
        raise MedallionError(f"unit test {test.name}: expected columns {', '.join(unknown)} are "
                             f"not in {test.model}'s output ({', '.join(actual.columns)})",
                             path=test.origin)
    actual = actual.select(columns)
    expected = rows_frame(spark, test.expect, actual.schema)
    try:
        assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
    except (DataFramesNotEqualError, SchemasNotEqualError) as exc:
        # chispa calls the two sides df1 and df2: say which is which
        return str(exc).replace("df1", "actual").replace("df2", "expected")
    return None
