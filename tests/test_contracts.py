"""Model contracts, as dbt's: with `contract: {enforced: true}` the columns a model's properties
file declares (names and data types) are checked against its rows before anything is written,
and every difference is listed."""

import re

import pytest
from conftest import PROJECT

from medallion_cli.core.errors import MedallionError

ORDERS = "order_id,day,amount\n1,1,10\n2,1,5\n3,2,7\n"
PROPERTIES = """\
models:
  - name: by_day
    config: {contract: {enforced: true}}
    columns:
      - {name: day, data_type: int}
      - {name: orders, data_type: bigint}
      - {name: amount, data_type: "decimal(10,2)"}
  - name: streamed
    config: {contract: {enforced: true}}
    columns:
      - {name: order_id, data_type: bigint}
      - {name: day, data_type: int}
"""
BY_DAY = ("select day, count(*) as orders, cast(sum(amount) as decimal(10,2)) as amount "
          "from {{ ref('orders') }} group by day")
BROKEN = ("select cast(day as string) as day, sum(amount) as amount, 1 as extra "
          "from {{ ref('orders') }} group by day")
SOURCES = """\
sources:
  - name: landing
    path: landing
    tables:
      - {name: orders, format: json, schema: "order_id int, day int"}
"""
STREAMED = ("{{ config(materialized='streaming') }}"
            "select order_id, day from {{ source('landing', 'orders') }}")


@pytest.mark.one_engine("the contract is checked on the rows before the engine writes them")
def test_rows_that_keep_the_contract_are_written(project, build):
    root = project({"seeds/orders.csv": ORDERS, "models/by_day.sql": BY_DAY,
                    "models/properties.yml": PROPERTIES.split("  - name: streamed")[0]})
    result = build(root)["by_day"]
    assert result.status == "success", result.message
    assert (root / "warehouse/models/by_day/_delta_log").exists()


@pytest.mark.one_engine("the contract is refused on the rows, before anything is written")
def test_rows_that_break_the_contract_are_refused_listing_every_difference(project, build):
    root = project({"seeds/orders.csv": ORDERS, "models/by_day.sql": BROKEN,
                    "models/properties.yml": PROPERTIES, "models/sources.yml": SOURCES,
                    "models/streamed.sql": STREAMED,
                    "landing/orders/1.json": '{"order_id": 1, "day": 1}\n'})
    # the static checks refuse both before Spark starts, each difference they can be sure of
    refused = build(root)
    assert refused["by_day"].message.startswith(
        "models/by_day.sql:1:13: column 'day' is string, the contract in models/properties.yml "
        "says int; cast it: cast(day as int) (and 2 more")
    assert refused["streamed"].message.startswith(
        "models/streamed.sql:1:46: column 'order_id' is int, the contract in "
        "models/properties.yml says bigint")
    # with them off, the rows are checked, every difference listed
    (root / "medallion_project.yml").write_text(PROJECT + "models:\n  static_checks: false\n")
    results = build(root)
    broken = results["by_day"]
    assert broken.status == "error"
    assert "models/by_day.sql" in broken.message
    assert ("the model's rows break its contract: column day is string, the contract says int; "
            "missing column orders (bigint); column amount is bigint, the contract says "
            "decimal(10,2); column extra (int) is not in the contract; nothing was written"
            ) in broken.message
    streamed = results["streamed"]  # order_id lands as int, declared bigint
    assert streamed.status == "error"
    assert "column order_id is int, the contract says bigint" in streamed.message
    for name in ("by_day", "streamed"):
        assert not (root / f"warehouse/models/{name}/_delta_log").exists()


@pytest.mark.parametrize("engine_name", ["embedded"])  # refused before Spark reads a row
@pytest.mark.parametrize("properties, error", [
    (PROPERTIES.replace("{enforced: true}", "{enforced: yes please}", 1),
     "config 'contract' is {'enforced': 'yes please'}"),
    (PROPERTIES.replace(", data_type: int}", "}", 1),
     "an enforced contract needs every column of the model declared with a data_type"),
])
def test_a_contract_that_cannot_be_checked_names_the_file(project, build, engine_name,
                                                          properties, error):
    root = project({"seeds/orders.csv": ORDERS, "models/by_day.sql": BY_DAY,
                    "models/properties.yml": properties.split("  - name: streamed")[0]})
    if error.startswith("config"):
        with pytest.raises(MedallionError, match=re.escape(error)) as raised:
            build(root)
        assert "models/by_day.sql" in str(raised.value)  # as every config error names it
        return
    result = build(root)["by_day"]
    assert result.status == "error" and error in result.message
    assert "models/properties.yml" in result.message
