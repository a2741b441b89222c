"""run_query() in models, as dbt's `{% if execute %}`: parsed with execute false, rendered again
when the model runs, over the tables built before it in the same build."""

import pytest
from chispa import assert_df_equality
from conftest import DELTA_SPARK_IN_SLOW_TIER, read_delta
from deltalake import DeltaTable

from medallion_cli import commands

pytestmark = DELTA_SPARK_IN_SLOW_TIER

MODEL = """\
    -- depends_on: {{ ref('thresholds') }}
    {% set limit = 0 %}
    {% if execute %}
      {% set limit = run_query("select value from " ~ ref('thresholds')
                               ~ " where name = 'big'")[0][0] %}
    {% endif %}
    select id, amount from {{ ref('orders') }} where amount > {{ limit }}
"""
FILES = {
    "seeds/orders.csv": "id,amount\n1,10\n2,20\n3,30\n",
    "seeds/thresholds.csv": "name,value\nbig,15\n",
    "models/gold/big_orders.sql": MODEL,
}


def test_run_query_sees_the_tables_built_before_the_model_in_the_same_build(
        project, build, spark):
    root = project(FILES)
    assert not build(root)["big_orders"].failed
    expected = spark.createDataFrame([(2, 20), (3, 30)], "id int, amount int")
    assert_df_equality(spark.read.parquet(*DeltaTable(str(root / "warehouse/gold/big_orders"))
                                          .file_uris()), expected,
                       ignore_row_order=True, ignore_nullable=True)

    # A new threshold in the seed: the one build loads it, then the model's query sees it.
    (root / "seeds/thresholds.csv").write_text("name,value\nbig,25\n")
    results = build(root)
    assert results["thresholds"].status == "success" and results["big_orders"].rows == 1
    assert read_delta(root / "warehouse/gold/big_orders") == [{"id": 3, "amount": 30}]
    # Parsing runs no query: what compile shows is the SQL with execute false.
    compiled = commands.compile_models(commands.Invocation(project_dir=str(root)))
    assert compiled.nodes[0].executes and "where amount > 0" in compiled.nodes[0].sql


@pytest.mark.one_engine("the refusal is the render's, raised before the model's table is written")
def test_a_ref_named_only_under_execute_is_refused_before_anything_is_written(project, build):
    root = project({**FILES, "models/gold/big_orders.sql": MODEL.split("\n", 1)[1]})
    result = build(root)["big_orders"]
    assert result.failed
    assert ("ref('thresholds') is named only when the model runs (under execute)"
            in result.message and "-- depends_on: {{ ref('thresholds') }}" in result.message)
    assert not (root / "warehouse/gold/big_orders").exists()


@pytest.mark.one_engine("the failure is Spark SQL's over the refs, said by run_query's "
                        "wrapper: the same for any engine")
def test_a_failing_run_query_names_the_model(project, build):
    root = project({**FILES, "models/gold/big_orders.sql": MODEL.replace("where name", "where nme")})
    result = build(root)["big_orders"]
    assert result.failed and result.message.startswith(
        "models/gold/big_orders.sql, line 4: run_query in the model failed:")
    assert "nme" in result.message
