"""--defer with --state, as dbt's: a development run builds only the selected models and reads
the parents it has not built from the tables of a deployed run (its target/manifest.json)."""

import shutil

import pytest
from conftest import read_delta

from medallion_cli.core.errors import MedallionError

MODELS = {
    "seeds/prices.csv": "sku,price\nA,2\nB,3\n",
    "models/silver/priced.sql": "select sku, price * 10 as cents from {{ ref('prices') }}",
    "models/gold/total.sql": "select sum(cents) as cents from {{ ref('priced') }}",
}


@pytest.mark.one_engine("defer picks the upstream's relation while rendering, before an engine "
                        "runs")
def test_defer_reads_unbuilt_parents_from_the_state_runs_tables(project, build, tmp_path):
    prod = project(MODELS)
    build(prod)
    state = tmp_path / "prod-target"
    shutil.copytree(prod / "target", state)
    dev = project({**MODELS, "models/gold/total.sql": MODELS["models/gold/total.sql"]
                   .replace("sum(cents)", "sum(cents) + 1")})
    alone = build(dev, select=("total",))["total"]
    assert alone.status == "error" and "'priced' has not been built yet" in alone.message
    assert "--defer --state" in alone.message
    deferred = build(dev, select=("total",), defer=True, state=str(state))["total"]
    assert deferred.status == "success", deferred.message
    assert read_delta(dev / "warehouse/gold/total") == [{"cents": 51}]
    assert not (dev / "warehouse/silver/priced").exists()  # read from prod's, not built
    # once this target has its own table, that one is read
    build(dev, select=("priced",))
    (dev / "seeds/prices.csv").write_text("sku,price\nA,1\n")
    build(dev, select=("prices", "priced"))
    build(dev, select=("total",), defer=True, state=str(state))
    assert read_delta(dev / "warehouse/gold/total") == [{"cents": 11}]


@pytest.mark.parametrize("engine_name", ["embedded"])  # refused before anything is read
def test_defer_without_state_says_what_to_pass(project, build, engine_name):
    root = project(MODELS)
    with pytest.raises(MedallionError, match="--defer reads tables of the --state run: pass "
                                             "--state DIR too"):
        build(root, select=("total",), defer=True)
