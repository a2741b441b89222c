"""Several flows into one streaming table, and a once-only backfill flow (declarative pipelines'
CREATE FLOW ... INSERT INTO and INSERT INTO ONCE): each flow a streaming query with its own
checkpoint appending to the table; readers of the table run after every flow."""

import json

import pytest
from click.testing import CliRunner
from conftest import DELTA_SPARK_IN_SLOW_TIER, read_delta

from medallion_cli import commands
from medallion_cli.cli.group import main
from medallion_cli.core.errors import MedallionError, ProjectError

pytestmark = DELTA_SPARK_IN_SLOW_TIER

SOURCES = """\
sources:
  - name: landing
    path: landing
    tables:
""" + "".join(f"""\
      - name: {region}
        format: json
        schema: "order_id bigint, amount int"
""" for region in ("eu", "us", "archive"))

FILES = {
    "models/sources.yml": SOURCES,
    "models/bronze/orders.sql": """\
        {{ config(materialized='streaming') }}
        select *, 'eu' as region from {{ source('landing', 'eu') }}
    """,
    "models/bronze/orders_us.sql": """\
        {{ config(materialized='streaming', flow_into='orders') }}
        select *, 'us' as region from {{ source('landing', 'us') }}
    """,
    "models/bronze/orders_backfill.sql": """\
        {{ config(materialized='streaming', flow_into='orders', once=true) }}
        select *, 'archive' as region from {{ source('landing', 'archive') }}
    """,
    "models/gold/orders_per_region.sql": """\
        select region, count(*) as orders from {{ ref('orders') }} group by region
    """,
}


def land(root, region, name, ids):
    folder = root / "landing" / region
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps({"order_id": i, "amount": i}) + "\n"
                                       for i in ids))


def regions(root):
    return {r["region"]: r["orders"] for r in read_delta(root / "warehouse/gold/orders_per_region")}


def order_ids(root):
    return sorted(r["order_id"] for r in read_delta(root / "warehouse/bronze/orders"))


def test_flows_append_to_one_table_exactly_once_and_the_backfill_runs_once(project, build):
    root = project(FILES)
    land(root, "eu", "1.json", [1, 2])
    land(root, "us", "1.json", [3])
    land(root, "archive", "1.json", [10, 11, 12])
    results = build(root)
    assert not any(r.failed for r in results.values())
    # The reader ran after every flow: it counts all three.
    assert regions(root) == {"eu": 2, "us": 1, "archive": 3}
    assert order_ids(root) == [1, 2, 3, 10, 11, 12]
    assert not (root / "warehouse/bronze/orders_us").exists()  # a flow has no table of its own

    # New files everywhere: the live flows take theirs; the backfill ran once and stays done.
    land(root, "eu", "2.json", [4])
    land(root, "us", "2.json", [5])
    land(root, "archive", "2.json", [13])
    results = build(root)
    assert results["orders_us"].rows == 1 and results["orders"].rows == 1
    assert results["orders_backfill"].status == "up_to_date"
    assert "a once-only flow: it ran at" in results["orders_backfill"].message
    assert regions(root) == {"eu": 3, "us": 2, "archive": 3}

    # A full refresh of the table runs its flows again, the backfill too, nothing twice.
    build(root, full_refresh=True, select=("orders+",))
    assert order_ids(root) == [1, 2, 3, 4, 5, 10, 11, 12, 13]
    assert regions(root) == {"eu": 3, "us": 2, "archive": 4}


@pytest.mark.one_engine("the selection is refused before anything runs; ls lists the graph")
def test_refreshing_a_table_without_its_flows_is_refused(project, build):
    root = project(FILES)
    listing = CliRunner().invoke(main, ["ls", "--project-dir", str(root)]).output.splitlines()
    flow = listing.index(next(line for line in listing if line.startswith("orders_us ")))
    assert listing[flow + 1].split() == ["flows", "into:", "orders",
                                         f"({root / 'warehouse/bronze/orders'})"]
    for select, named in ((("orders",), "orders_backfill, orders_us would not run again"),
                          (("orders_us",), "orders, orders_backfill would not run again")):
        with pytest.raises(MedallionError) as caught:
            build(root, full_refresh=True, select=select)
        assert named in str(caught.value)
        assert "medallion build --full-refresh -s orders+" in str(caught.value)


@pytest.mark.unit
def test_a_flow_is_not_read_as_a_table_of_its_own(project):
    """Read by a model that builds nothing: refused when the project loads, before any engine."""
    root = project({**FILES, "models/gold/us_only.sql": "select * from {{ ref('orders_us') }}"})
    with pytest.raises(ProjectError) as caught:
        commands.list_nodes(commands.Invocation(project_dir=str(root)))
    assert "ref('orders_us') names a flow, which has no table of its own" in str(caught.value)
    assert "ref('orders')" in str(caught.value) and "models/gold/us_only.sql" in str(caught.value)


@pytest.mark.parametrize("config, problem", [
    ("materialized='streaming', flow_into='ordrs'", "flow_into names no enabled model: 'ordrs'"),
    ("materialized='streaming', flow_into='orders_per_region'",
     "flow_into names 'orders_per_region', which is not a streaming table of its own"),
    ("materialized='incremental', flow_into='orders'", "flow_into needs materialized 'streaming'"),
    ("materialized='streaming', once=true", "once is for flows"),
])
@pytest.mark.one_engine("config mistakes are refused while the project loads, before any "
                        "engine runs")
def test_flow_mistakes_name_the_file(project, build, config, problem):
    root = project({**FILES, "models/bronze/orders_us.sql":
                    "{{ config(" + config + ") }} select * from {{ source('landing', 'us') }}"})
    with pytest.raises(MedallionError) as caught:
        build(root)
    assert problem in str(caught.value) and "models/bronze/orders_us.sql" in str(caught.value)
