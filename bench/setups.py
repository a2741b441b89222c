"""Where a benchmark runs medallion: the sample's targets, or delta-spark on a real cluster.

    embedded     target `local`: Spark local[2] computes, delta-rs keeps the Delta log
    delta-spark  target `local-delta`: Delta Lake for Spark, local[2]
    cluster      delta-spark on a standalone master and two 1-core workers started for the run
                 (tests/spark_cluster.py), the driver on this machine
    connect      target `connect`: delta-spark over Spark Connect, against a server (local[2])
                 started for the run (medallion_cli/testing/connect_server.py), kept warm
                 across commands as a server is; no JVM in medallion's process

Every setup keeps its tables in the project's `warehouse` folder, so runs of different setups
start from the same empty state.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

TARGETS = {"embedded": "local", "delta-spark": "local-delta", "cluster": "on-cluster",
           "connect": "connect"}
CLUSTER_WORKERS = 2


def parse(text: str) -> list[str]:
    setups = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in setups if s not in TARGETS]
    if unknown:
        raise SystemExit(f"unknown setup(s) {unknown}; choose from {', '.join(TARGETS)}")
    return setups


def env() -> dict:
    """The environment medallion runs with: one warehouse folder, two local cores."""
    return {**os.environ, "MEDALLION_WAREHOUSE": "warehouse", "MEDALLION_SPARK_MASTER": "local[2]"}


def args(setup: str) -> list[str]:
    return ["--target", TARGETS[setup]]


@contextlib.contextmanager
def prepared(project: Path, setups: list[str]):
    """Start the cluster or the Spark Connect server when a setup needs it, with a target for
    the cluster in the project's profile; stop every process it started afterwards."""
    if "connect" in setups:
        from medallion_cli.testing import connect_server

        server = connect_server.start()
        os.environ["MEDALLION_SPARK_REMOTE"] = server.url
        try:
            with prepared(project, [s for s in setups if s != "connect"]):
                yield
        finally:
            server.stop()
        return
    if "cluster" not in setups:
        yield
        return
    from spark_cluster import add_cluster_target, standalone_cluster

    with standalone_cluster(CLUSTER_WORKERS) as cluster:
        add_cluster_target(project / "profiles/profiles.yml", cluster, CLUSTER_WORKERS)
        yield
