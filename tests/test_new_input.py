"""The landing data a build is about to read that its tables have not taken in: what picks the
driver JVM's JIT (engines/spark.py) before Spark starts."""

import json
import os
from dataclasses import replace

import pytest

from medallion_cli import commands
from medallion_cli.commands import invocation
from medallion_cli.engines.delta_spark.engine import DeltaSparkEngine
from medallion_cli.engines.embedded.engine import EmbeddedEngine
from medallion_cli.run import new_input
from medallion_cli.spark.conf import LongQueries
from medallion_cli.spark.session import OnDemandSpark

FILES = {
    "models/sources.yml": """\
        sources:
          - name: landing
            path: landing
            tables:
              - {name: events, format: json, schema: "id bigint, kind string"}
    """,
    "models/bronze/bronze_events.sql": """\
        {{ config(materialized='streaming') }}
        select * from {{ source('landing', 'events') }}
    """,
    "models/gold/kinds.sql": """\
        {{ config(materialized='table') }}
        select kind, count(*) as n from {{ ref('bronze_events') }} group by kind
    """,
    # a view reads nothing when it is built: its readers read the files
    "models/bronze/raw_events.sql": """\
        {{ config(materialized='view') }}
        select * from {{ source('landing', 'events') }}
    """,
}


def land(root, name, *ids) -> int:
    path = root / "landing/events" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"id": i, "kind": "a"}) + "\n" for i in ids))
    return path.stat().st_size


def new_bytes(root, full_refresh=False) -> int:
    inv = commands.Invocation(project_dir=str(root))
    loaded = invocation.load(inv)
    return new_input.new_landing_bytes(loaded.project, loaded.graph,
                                       invocation.selected_nodes(inv, loaded), full_refresh)


@pytest.mark.one_engine("new bytes come from file sizes and _delta_log times before Spark "
                        "starts; both engines' limits are patched alike")
def test_a_build_reads_as_new_what_its_tables_have_not_taken_in(project, build, monkeypatch):
    """And a build tells its engine, before Spark starts, whether that is much (here Spark has
    started already: the JVM options for long queries are test_engine_start's)."""
    told = []
    monkeypatch.setattr(OnDemandSpark, "plan_start",
                        lambda self, on_start, long_queries=False: told.append(long_queries))
    root = project(FILES)
    first = land(root, "1.json", 1, 2) + land(root, "2.json", 3)
    assert new_bytes(root) == first  # no table yet: every file
    for engine in (EmbeddedEngine, DeltaSparkEngine):
        monkeypatch.setattr(engine, "capabilities", replace(
            engine.capabilities, long_queries=LongQueries(first, ())))

    assert build(root)["bronze_events"].status == "success"
    assert new_bytes(root) == 0

    later = land(root, "3.json", 4)
    commits = root / "warehouse/bronze/bronze_events/_delta_log"
    last_commit = max(p.stat().st_mtime for p in commits.glob("*.json"))
    os.utime(root / "landing/events/3.json", (last_commit + 1, last_commit + 1))
    assert new_bytes(root) == later
    assert new_bytes(root, full_refresh=True) == first + later
    assert build(root)["bronze_events"].status == "success"
    assert later < first and told == [True, False]
