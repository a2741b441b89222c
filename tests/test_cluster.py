"""The sample on a real multi-process Spark standalone cluster (a master and two workers on
loopback, started from the installed pyspark): the same tables as a local build, and exactly-once
when a worker is SIGKILLed mid-batch (its tasks run again on the other). A driver killed after a
commit is not tried here again: what it left is found and replayed by the next driver from the
checkpoint and the table, the same code on a cluster as on a local Spark, where the kill matrix
of test_streaming.py tries it at each point on both engines.

These fit the delta-spark engine only: it is the one that scales past one machine. (The embedded
engine commits through delta-rs on the driver's disk, which a cluster's executors do not share.)
"""

import shutil
import time

import pytest
from conftest import profile_for, read_delta
from helpers import (
    MODELS,
    land,
    medallion,
    sample_copy,
    tables_of,
)
from spark_cluster import SMALL_DATA, add_cluster_target, standalone_cluster

# A master and two workers start for the module; the delta-spark engine's reads, writes and
# exactly-once are the default tier's on a local Spark (test_engine_contract, test_streaming)
pytestmark = pytest.mark.slow("the standalone cluster and its kill cases")

WORKERS = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with standalone_cluster(WORKERS, tmp_path_factory.mktemp("spark-cluster")) as started:
        yield started


def on_the_cluster(root, *args, **options):
    """`medallion ARGS` on the project's on-cluster target (helpers.medallion)."""
    return medallion(root, *args, "-t", "on-cluster", env={"MEDALLION_WAREHOUSE": "warehouse"},
                     timeout=900, **options)


def test_the_sample_builds_on_the_cluster_with_the_tables_of_a_local_build(
        cluster, tmp_path, local_sample):
    on_cluster = sample_copy(tmp_path / "cluster")
    add_cluster_target(on_cluster / "profiles/profiles.yml", cluster, WORKERS, conf=SMALL_DATA)
    built = on_the_cluster(on_cluster, "build")
    assert built.returncode == 0, built.stdout + built.stderr
    assert cluster.state()["aliveworkers"] == WORKERS
    assert tables_of(on_cluster / "warehouse") == local_sample.tables("delta-spark")


SLOW_BRONZE = """\
{{ config(materialized='streaming') }}
-- Each row sleeps 400 ms on an executor, in 4 tasks: a batch keeps both workers busy for seconds.
select /*+ REPARTITION(4) */ *, reflect('java.lang.Thread', 'sleep', cast(400 as bigint)) as _slept
from {{ source('landing', 'orders') }}
"""


def test_exactly_once_when_a_worker_is_killed_mid_batch(cluster, project):
    root = project({**MODELS, "models/bronze/bronze_orders.sql": SLOW_BRONZE},
                   profile=profile_for("delta-spark"))
    add_cluster_target(root / "profiles/profiles.yml", cluster, WORKERS, conf=SMALL_DATA)
    batches = [[{"order_id": 100 * f + i, "status": "placed", "op": "I", "seq": 1}
                for i in range(8)] for f in range(3)]
    for number, batch in enumerate(batches):
        land(root, f"{number:03d}.json", batch)
    build = on_the_cluster(root, "build", wait=False)
    checkpoint = root / "warehouse/_checkpoints/bronze/bronze_orders"
    deadline = time.monotonic() + 300
    while not ((checkpoint / "offsets/1").exists() and not (checkpoint / "commits/1").exists()):
        assert build.poll() is None and time.monotonic() < deadline, build.stdout.read()
        time.sleep(0.05)
    time.sleep(1.0)  # the second batch's tasks are running on both workers
    executors = cluster.executor_pids(0)
    killed = cluster.kill_worker(0)
    output, _ = build.communicate(timeout=600)
    try:
        assert build.returncode == 0, output
        assert executors and set(executors) <= set(killed)
        assert WORKERS - 1 == cluster.state()["aliveworkers"]
        bronze = read_delta(root / "warehouse/bronze/bronze_orders")
        assert sorted(r["order_id"] for r in bronze) == sorted(
            e["order_id"] for batch in batches for e in batch)  # each once, none lost
        assert len(read_delta(root / "warehouse/silver/silver_orders")) == 24
    finally:
        cluster.restart_worker(0)
        shutil.rmtree(root / "warehouse", ignore_errors=True)
