"""Orchestrators run the project (issue 90): Dagster assets from it, materialized in Dagster's
own process with the real package (dagster.materialize), a subset as `medallion build -s`."""

import dagster as dg
import pytest
from deltalake import DeltaTable

from medallion_cli.integrations.dagster import medallion_assets

FILES = {
    "seeds/orders.csv": "id,amount\n1,10\n2,20\n3,30\n",
    "models/silver/clean_orders.sql": "select id, amount * 2 as amount from {{ ref('orders') }}",
    "models/gold/big_orders.sql": "select id, amount from {{ ref('clean_orders') }} "
                                  "where amount > 25",
    "models/properties.yml": """\
        models:
          - name: clean_orders
            description: Orders, cleaned
            columns:
              - name: id
                tests: [not_null, unique]
    """,
}
SEED, SILVER, GOLD = (dg.AssetKey(["seeds", "orders"]), dg.AssetKey(["silver", "clean_orders"]),
                      dg.AssetKey(["gold", "big_orders"]))


def materialized(result) -> dict[dg.AssetKey, dict]:
    return {event.asset_key: {k: v.value for k, v in
                              event.step_materialization_data.materialization.metadata.items()}
            for event in result.get_asset_materialization_events()}


@pytest.mark.one_engine("Dagster runs the build command, which is the same on either engine")
def test_dagster_materializes_the_project_or_a_subset_as_assets_with_checks(project,
                                                                           engine_name):
    root = project(FILES)
    assets = medallion_assets(str(root))
    assert set(assets.keys) == {SEED, SILVER, GOLD}
    assert assets.asset_deps[GOLD] == {SILVER} and assets.asset_deps[SILVER] == {SEED}
    assert assets.specs_by_key[SILVER].description == "Orders, cleaned"
    assert assets.specs_by_key[SILVER].group_name == "silver"
    assert {key.name for key in assets.check_keys} == {"not_null_clean_orders_id",
                                                       "unique_clean_orders_id"}

    # a subset: the seed and silver, with silver's checks; gold is not built
    subset = dg.materialize([assets], selection=[SEED, SILVER])
    assert subset.success
    built = materialized(subset)
    assert set(built) == {SEED, SILVER}
    assert built[SILVER]["rows written"] == 3 and built[SILVER]["Delta version"] == 0
    checks = {c.check_name: c.passed for c in subset.get_asset_check_evaluations()}
    assert checks == {"not_null_clean_orders_id": True, "unique_clean_orders_id": True}
    assert not (root / "warehouse/gold/big_orders").exists()

    # all of it: gold now, the rest up to date
    everything = dg.materialize([assets])
    assert everything.success and set(materialized(everything)) == {SEED, SILVER, GOLD}
    assert materialized(everything)[SILVER]["status"] == "up_to_date"
    assert DeltaTable(str(root / "warehouse/gold/big_orders")).to_pyarrow_table(
        ).to_pydict() == {"id": [2, 3], "amount": [40, 60]}

    # a failing model fails the run naming it, after the nodes that built are recorded
    (root / "models/gold/big_orders.sql").write_text("select no_such_column from "
                                                     "{{ ref('clean_orders') }}")
    broken = dg.materialize([medallion_assets(str(root))], raise_on_error=False)
    assert not broken.success
    assert set(materialized(broken)) == {SEED, SILVER}
    failure = next(e for e in broken.all_events if e.is_step_failure)
    assert "big_orders" in failure.step_failure_data.error.message
    assert "no_such_column" in failure.step_failure_data.error.message
