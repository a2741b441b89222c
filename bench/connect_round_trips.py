"""Where a build's time goes over Spark Connect: the sample built one node at a time with
`-t connect` (against a server started for the run, warmed by one build first) and with
`-t local-delta` (py4j, a JVM in medallion's process), alternately, from empty warehouses;
per node, each way's seconds and, over Connect, the client's gRPC calls by kind (ExecutePlan,
AnalyzePlan, Config, ReattachExecute, ReleaseExecute, ...) and the seconds spent in them.

    python bench/connect_round_trips.py --repeat 3

The Connect build runs in this process (the client starts no JVM) with pyspark's service
stub wrapped to count and time each call, from its start to its last response; one thread, so
each call is the running node's. The local-delta build runs as a command of its own. Each
way's per-node seconds come from its target/run_results.json; the report gives their medians.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from sample_build_bench import sample_copy  # noqa: E402


class CallLedger:
    """gRPC calls of the Connect client, by the node running when each was made."""

    def __init__(self) -> None:
        self.node = "(start)"
        self.calls: dict = defaultdict(lambda: defaultdict(lambda: [0, 0.0]))
        self.lock = threading.Lock()

    def add(self, kind: str, seconds: float, count: int = 1) -> None:
        with self.lock:
            entry = self.calls[self.node][kind]
            entry[0] += count
            entry[1] += seconds


class _Counted:
    """One of the stub's methods, counted and timed: a stream from its call to its latest
    response (pyspark stops reading one at its result's end, before the stream ends)."""

    def __init__(self, kind: str, method, ledger: CallLedger) -> None:
        self.kind, self.method, self.ledger = kind, method, ledger

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        answer = self.method(*args, **kwargs)
        if not hasattr(answer, "__next__"):
            self.ledger.add(self.kind, time.perf_counter() - start)
            return answer
        self.ledger.add(self.kind, 0.0)
        return _Stream(answer, self.kind, start, self.ledger)

    def __getattr__(self, name):
        return getattr(self.method, name)


class _Stream:
    def __init__(self, stream, kind: str, start: float, ledger: CallLedger) -> None:
        self.stream, self.kind, self.mark, self.ledger = stream, kind, start, ledger

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return next(self.stream)
        finally:
            now = time.perf_counter()
            self.ledger.add(self.kind, now - self.mark, count=0)
            self.mark = now

    def __getattr__(self, name):
        return getattr(self.stream, name)


def count_calls(ledger: CallLedger) -> None:
    """Wrap every method of pyspark's Spark Connect service stub, for stubs made from now."""
    from pyspark.sql.connect.proto import base_pb2_grpc

    original = base_pb2_grpc.SparkConnectServiceStub.__init__

    def init(stub, channel):
        original(stub, channel)
        for kind, method in list(vars(stub).items()):
            if callable(method):
                setattr(stub, kind, _Counted(kind, method, ledger))

    base_pb2_grpc.SparkConnectServiceStub.__init__ = init


def connect_build(project: Path, ledger: CallLedger) -> tuple[dict, float, set]:
    """({node: seconds}, the build's wall seconds, its data tests' names) of a build in this
    process over Connect."""
    from medallion_cli import commands
    from medallion_cli.commands.plan import Reporter

    def begin(name: str) -> None:
        ledger.node = name

    start = time.perf_counter()
    results = commands.build(commands.Invocation(project_dir=str(project), target="connect",
                                                 threads=1), "build", report=Reporter(begin=begin))
    wall = time.perf_counter() - start
    failed = [r.message for r in results if r.failed]
    if failed:
        raise SystemExit(f"the build over Spark Connect failed: {failed}")
    return ({r.name: r.seconds for r in results}, wall,
            {r.name for r in results if r.kind == "test"})


def local_build(project: Path) -> tuple[dict, float]:
    """({node: seconds}, the command's wall seconds, its JVM's start included) of a local-delta
    build as a command of its own."""
    # (pyspark marks this process's environment as Spark Connect's once a client started)
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_MODE_ENABLED"}
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "medallion_cli.cli", "build", "-t", "local-delta",
                          "--threads", "1", "--project-dir", str(project)],
                         capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if run.returncode:
        raise SystemExit(f"the local-delta build failed:\n{run.stdout[-3000:]}{run.stderr}")
    said = json.loads((project / "target/run_results.json").read_text())
    return {r["name"]: r["seconds"] for r in said["results"]}, wall


def report(connect_runs: list[dict], local_runs: list[dict], ledger: CallLedger,
           builds: int) -> dict:
    nodes = list(connect_runs[0])
    rows = []
    for node in nodes:
        calls = ledger.calls.get(node, {})
        rows.append({
            "node": node,
            "connect_s": round(statistics.median(r[node] for r in connect_runs), 2),
            "local_s": round(statistics.median(r[node] for r in local_runs), 2),
            "calls": round(sum(n for n, _ in calls.values()) / builds, 1),
            "call_s": round(sum(s for _, s in calls.values()) / builds, 2),
            "by_kind": {kind: round(n / builds, 1) for kind, (n, _) in sorted(calls.items())},
        })
    calls_per_node = [row["calls"] for row in rows]
    kinds: dict = defaultdict(lambda: [0, 0.0])
    for node_calls in ledger.calls.values():
        for kind, (n, seconds) in node_calls.items():
            kinds[kind][0] += n
            kinds[kind][1] += seconds
    return {
        # a call's mean milliseconds: Config's is a bare round trip; ExecutePlan's holds the
        # query's time on the server; ReleaseExecute runs beside the next call
        "kinds": {kind: {"calls": round(n / builds, 1), "mean_ms": round(1000 * s / n, 1)}
                  for kind, (n, s) in sorted(kinds.items())},
        "nodes": rows,
        "total_connect_s": round(sum(r["connect_s"] for r in rows), 1),
        "total_local_s": round(sum(r["local_s"] for r in rows), 1),
        "calls_per_node_median": statistics.median(calls_per_node),
        "calls_per_node_max": max(calls_per_node),
        "call_s_total": round(sum(r["call_s"] for r in rows), 1),
        "outside_nodes": {node: {k: round(n / builds, 1) for k, (n, _) in kinds.items()}
                          for node, kinds in ledger.calls.items() if node not in nodes},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from medallion_cli.testing import connect_server

    work = Path(tempfile.mkdtemp(prefix="medallion-round-trips-"))
    server = connect_server.start()
    os.environ.update(MEDALLION_SPARK_REMOTE=server.url, MEDALLION_WAREHOUSE="warehouse",
                      MEDALLION_SPARK_MASTER="local[2]")
    ledger = CallLedger()
    connect_runs, local_runs = [], []
    try:
        count_calls(ledger)
        # a user's first build on a fresh server (its JIT cold), then warm ones
        first, first_wall, tests = connect_build(sample_copy(ROOT, work / "first"), ledger)
        ledger.calls.clear()
        for round_ in range(args.repeat):
            connect_runs.append(connect_build(sample_copy(ROOT, work / f"c{round_}"), ledger))
            local_runs.append(local_build(sample_copy(ROOT, work / f"l{round_}")))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    said = report([run[0] for run in connect_runs], [seconds for seconds, _ in local_runs],
                  ledger, args.repeat)
    local_wall = statistics.median(wall for _, wall in local_runs)
    warm_wall = statistics.median(run[1] for run in connect_runs)
    said["walls"] = {
        "local_delta_command_s": round(local_wall, 1),
        "connect_first_s": round(first_wall, 1), "connect_warm_s": round(warm_wall, 1),
        "first_over_local": round(first_wall / local_wall, 2),
        "warm_over_local": round(warm_wall / local_wall, 2),
        "slowest_data_test_first_s": round(max(first[name] for name in tests), 2),
        "slowest_data_test_warm_s": max(row["connect_s"] for row in said["nodes"]
                                        if row["node"] in tests)}
    print(json.dumps(said, indent=1))


if __name__ == "__main__":
    main()
