"""A micro-batch's input rows, read from the commits it stands for (materialize/sources/inputs.py)."""

from types import SimpleNamespace

import pytest
from chispa import assert_df_equality

import medallion_cli.materialize.sources.inputs as inputs_module
from medallion_cli.core.project import Target
from medallion_cli.engines import make_engine
from medallion_cli.materialize.sources.inputs import committed_inputs

ROWS = "id long, v string"


def shuffles_to_rank(rows) -> bool:
    """Whether Spark shuffles the rows to rank them per key, as a MERGE's window does."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ranked = rows.withColumn("rank", F.row_number().over(Window.partitionBy("id").orderBy("v")))
    return "Exchange" in ranked._jdf.queryExecution().executedPlan().toString()


@pytest.mark.parametrize("one_partition_rows,shuffled", [(10_000, False), (2, True)])
def test_a_batch_of_few_committed_rows_is_ranked_per_key_without_a_shuffle(
        spark, tmp_path, monkeypatch, one_partition_rows, shuffled):
    """Embedded only: it alone follows tables through their commit logs and knows a batch's
    rows before computing it (delta-spark streams with Delta's own source). A shuffle of a
    1-row silver batch under --watch cost two of its five Spark jobs."""
    monkeypatch.setattr(inputs_module, "ONE_PARTITION_ROWS", one_partition_rows)
    engine = make_engine(Target("t", "embedded", str(tmp_path), "local[2]", {}, 1))
    path = str(tmp_path / "bronze")
    engine.write(spark.createDataFrame([(1, "a")], ROWS), path, "overwrite")
    engine.write(spark.createDataFrame([(2, "b"), (3, "c")], ROWS).repartition(2), path,
                 "append")
    engine.write(spark.createDataFrame([(2, "d")], ROWS), path, "append")
    commits = spark.createDataFrame([("bronze", 1), ("bronze", 2)], "relation string, version long")
    rows, read = committed_inputs(SimpleNamespace(engine=engine), SimpleNamespace(change_refs=()),
                                  {"bronze": path}, commits, batch_id=1)
    assert read == 3
    assert_df_equality(rows["bronze"], spark.createDataFrame([(2, "b"), (3, "c"), (2, "d")], ROWS),
                       ignore_row_order=True)
    assert shuffles_to_rank(rows["bronze"]) is shuffled
