"""`build --empty`, as dbt's: every model's SQL, config columns, expectations and contract are
checked over inputs with no rows, across the DAG, and nothing is written."""

import pytest
from click.testing import CliRunner
from conftest import DELTA_SPARK_IN_SLOW_TIER

from medallion_cli.cli.group import main

pytestmark = DELTA_SPARK_IN_SLOW_TIER


def read_delta_columns(path):
    from deltalake import DeltaTable

    return [field.name for field in DeltaTable(str(path)).schema().fields]

MODELS = {
    "models/sources.yml": """\
sources:
  - name: landing
    path: landing
    tables:
      - {name: orders, format: json, schema: "order_id bigint, customer_id bigint, amount int, seq int"}
""",
    "landing/orders/1.json": '{"order_id": 1, "customer_id": 7, "amount": 5, "seq": 1}\n',
    "seeds/customers.csv": "customer_id,name\n7,Ada\n",
    "models/bronze/bronze_orders.sql":
        "{{ config(materialized='streaming') }}select * from {{ source('landing', 'orders') }}",
    "models/silver/silver_orders.sql": """\
{{ config(materialized='streaming', strategy='merge', unique_key='order_id', sequence_by='seq',
          scd_type=2, expectations={'positive': 'amount > 0'}) }}
select * from {{ ref('bronze_orders') }}
""",
    "models/gold/by_customer.sql": """\
select c.name, count(*) as orders, max(o.valid_from) as last_change
from {{ ref('silver_orders') }} o join {{ ref('customers') }} c using (customer_id)
where o.is_current
group by c.name
""",
}


def test_empty_build_checks_every_model_and_writes_nothing(project, build):
    root = project(MODELS)
    results = build(root, empty=True)
    assert {n: r.status for n, r in results.items()} == dict.fromkeys(
        ("customers", "bronze_orders", "silver_orders", "by_customer"), "success")
    assert results["customers"].message == "checked on no rows"
    assert not (root / "warehouse").exists() or not any((root / "warehouse").rglob("_delta_log"))
    # the columns checked are the ones a real build writes (SCD2's history columns included)
    build(root)
    for name in ("bronze_orders", "silver_orders", "by_customer"):
        columns = read_delta_columns(root / "warehouse" / ("gold" if name == "by_customer" else
                                                           name.split("_")[0]) / name)
        assert results[name].message == f"checked on no rows: {len(columns)} column(s)", (
            name, columns)


@pytest.mark.one_engine("--empty checks SQL over empty rows in Spark and writes nothing")
def test_empty_build_names_each_broken_model_and_skips_what_follows(project, build):
    broken = {**MODELS,
              "models/silver/silver_orders.sql": MODELS["models/silver/silver_orders.sql"]
              .replace("'amount > 0'", "'amout > 0'"),
              "models/gold/by_customer.sql": MODELS["models/gold/by_customer.sql"],
              "models/gold/spend.sql": "select customer, sum(amount) as spend "
                                       "from {{ ref('bronze_orders') }} group by customer",
              "models/gold/keyed.sql": "{{ config(materialized='incremental', strategy='merge', "
                                       "unique_key='id') }}select order_id from "
                                       "{{ ref('bronze_orders') }}",
              "models/gold/clustered.sql": "{{ config(cluster_by='region') }}select order_id "
                                           "from {{ ref('bronze_orders') }}"}
    root = project(broken)
    results = build(root, empty=True)
    silver = results["silver_orders"]
    assert silver.status == "error" and "models/silver/silver_orders.sql" in silver.message
    assert "expectation 'positive' cannot be evaluated on the model's rows" in silver.message
    assert results["by_customer"].status == "skipped"
    spend = results["spend"]
    assert spend.status == "error" and "customer" in spend.message
    assert "models/gold/spend.sql" in spend.message
    assert ("config 'unique_key' names id, which the model does not return"
            in results["keyed"].message)
    assert ("cluster_by names region, which the rows of model 'clustered' does not have"
            in results["clustered"].message)
    assert not any((root / "warehouse").rglob("_delta_log")) if (root / "warehouse").exists() \
        else True
    cli = CliRunner().invoke(main, ["build", "--empty", "--project-dir", str(root)])
    assert cli.exit_code == 1, cli.output
