"""Kafka benchmark: Kafka -> bronze rows/s through medallion against a hand-written Structured
Streaming query (bench/kafka_handwritten.py) on the same topic, and the freshness of
`medallion build --watch` (a record produced -> visible in bronze, silver and gold).

Starts a KRaft broker on loopback (stopped at the end, by its pid), produces --records order
events to a 2-partition topic, then alternates, --repeat times: medallion building the Kafka
sample's bronze_orders from an empty warehouse (on each --setups engine), and the hand-written
query (delta-spark's Delta sink). Query seconds come from each side's own timing (medallion's
run_results.json; the hand-written query's start to end); whole-process seconds are given too.
Then runs the Kafka sample under --watch (1-second triggers), produces one marker order every
few seconds for a customer no other order has, and times when it shows in each layer.

    python bench/kafka_bench.py --records 300000 --repeat 3 --freshness-samples 15
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from medallion_cli.testing import kafka_broker

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples/kafka_sample"
TOPIC = "bench.orders"
TARGETS = {"embedded": "local", "delta-spark": "local-delta"}


def replay_sample(bootstrap: str) -> None:
    """The sample's customer changes (and orders) as feed.py replays them: gold joins them."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("feed", EXAMPLE / "feed.py")
    feed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(feed)
    feed.replay(bootstrap)


def produce(bootstrap: str, records: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures need it alive
    admin.create_topics([NewTopic(TOPIC, num_partitions=2)])[TOPIC].result(timeout=30)
    out = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(records):
        out.produce(TOPIC, json.dumps({
            "order_id": i, "customer_id": i % 5000, "product_id": f"P-{i % 300}",
            "quantity": 1 + i % 4, "status": "placed", "op": "I",
            "updated_at": f"2026-01-{1 + i % 28:02d}T10:00:00Z"}).encode(), key=str(i).encode())
        if i % 10000 == 0:
            out.poll(0)
    assert out.flush(60) == 0


def project(bootstrap: str) -> Path:
    dest = Path(tempfile.mkdtemp(prefix="medallion-kafka-bench-"))
    shutil.copytree(EXAMPLE, dest, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(".kafka", "warehouse*", "target"))
    sources = dest / "models/sources.yml"
    sources.write_text(sources.read_text().replace("subscribe: sample.orders",
                                                   f"subscribe: {TOPIC}"))
    return dest


def env(bootstrap: str) -> dict:
    return {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "MEDALLION_WAREHOUSE": "warehouse"}


def medallion(*args: str) -> list[str]:
    return [sys.executable, "-m", "medallion_cli.cli", *args]


def medallion_run(dest: Path, bootstrap: str, setup: str) -> dict:
    for old in ("warehouse", "target"):
        shutil.rmtree(dest / old, ignore_errors=True)
    started = time.perf_counter()
    subprocess.run(medallion("build", "-s", "bronze_orders", "--project-dir", str(dest),
                             "--target", TARGETS[setup]),
                   env=env(bootstrap), check=True, capture_output=True)
    wall = time.perf_counter() - started
    result = next(r for r in json.loads((dest / "target/run_results.json").read_text())["results"]
                  if r["name"] == "bronze_orders")
    return {"rows": result["rows"], "seconds": round(result["seconds"], 2),
            "wall": round(wall, 1), "stream": result.get("stream")}


def handwritten_run(work: Path, bootstrap: str) -> dict:
    shutil.rmtree(work, ignore_errors=True)
    started = time.perf_counter()
    out = subprocess.run([sys.executable, str(ROOT / "bench/kafka_handwritten.py"), bootstrap,
                          TOPIC, str(work / "table"), str(work / "checkpoint")],
                         check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "wall": round(wall, 1)}


def throughput(bootstrap: str, records: int, repeat: int, setups: list[str]) -> dict:
    dest = project(bootstrap)
    runs: dict[str, list] = {"handwritten": [], **{s: [] for s in setups}}
    for _ in range(repeat):  # alternating, so load on the machine falls on every side alike
        runs["handwritten"].append(handwritten_run(dest / "handwritten", bootstrap))
        for setup in setups:
            runs[setup].append(medallion_run(dest, bootstrap, setup))
    for side, results in runs.items():
        assert all(r["rows"] == records for r in results), (side, results)
    median = {side: statistics.median(r["seconds"] for r in results)
              for side, results in runs.items()}
    wall = {side: statistics.median(r["wall"] for r in results) for side, results in runs.items()}
    shutil.rmtree(dest, ignore_errors=True)
    return {
        "runs": runs,
        "rows_per_second (median query)": {s: round(records / m) for s, m in median.items()},
        "ratio of query medians (medallion / hand-written)": {
            s: round(median[s] / median["handwritten"], 2) for s in setups},
        "ratio of whole-process medians": {
            s: round(wall[s] / wall["handwritten"], 2) for s in setups},
    }


def visible(table: Path, column: str, value) -> bool:
    from deltalake import DeltaTable

    try:
        values = DeltaTable(str(table)).to_pyarrow_table(columns=[column]).column(0).to_pylist()
    except Exception:  # not created yet
        return False
    return value in values


def freshness(bootstrap: str, samples: int, setup: str) -> dict:
    from confluent_kafka import Producer

    dest = project(bootstrap)
    proc = subprocess.Popen(medallion("build", "--watch", "--project-dir", str(dest),
                                      "--target", TARGETS[setup]),
                            env=env(bootstrap), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    out = Producer({"bootstrap.servers": bootstrap})
    warehouse = dest / "warehouse"
    layers = {"bronze": (warehouse / "bronze/bronze_orders", "order_id"),
              "silver": (warehouse / "silver/silver_orders", "order_id"),
              "gold": (warehouse / "gold/gold_customer_orders", "customer_id")}
    seen: dict[str, list[float]] = {layer: [] for layer in layers}
    try:
        deadline = time.monotonic() + 300
        while not visible(*layers["gold"], 0) and time.monotonic() < deadline:
            time.sleep(1)  # the first pass: the topic's records built once
        for n in range(samples):
            order_id, customer = 10**9 + n, 10**6 + n
            produced = time.perf_counter()
            out.produce(TOPIC, json.dumps({
                "order_id": order_id, "customer_id": customer, "product_id": "P-1",
                "quantity": 1, "status": "placed", "op": "I",
                "updated_at": "2026-02-01T10:00:00Z"}).encode(), key=str(order_id).encode())
            out.flush(10)
            pending = dict(layers)
            while pending:
                for layer, (table, column) in list(pending.items()):
                    if visible(table, column, customer if column == "customer_id" else order_id):
                        seen[layer].append(round(time.perf_counter() - produced, 2))
                        del pending[layer]
                time.sleep(0.1)
            time.sleep(2)  # let each sample start from an idle pipeline
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
        shutil.rmtree(dest, ignore_errors=True)

    def quantile(values, q):
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return {layer: {"p50": quantile(v, 0.5), "p95": quantile(v, 0.95), "samples": v}
            for layer, v in seen.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--setups", default="embedded,delta-spark")
    parser.add_argument("--freshness-samples", type=int, default=15)
    parser.add_argument("--freshness-setup", default="embedded", choices=list(TARGETS))
    args = parser.parse_args()
    setups = [s for s in args.setups.split(",") if s]
    broker = kafka_broker.start()
    try:
        replay_sample(broker.bootstrap)
        produce(broker.bootstrap, args.records)
        if args.repeat:
            print("throughput:", json.dumps(
                throughput(broker.bootstrap, args.records, args.repeat, setups), indent=1))
        if args.freshness_samples:
            print(f"freshness under --watch ({args.freshness_setup}, 1-second triggers), "
                  "seconds from produced to visible:",
                  json.dumps(freshness(broker.bootstrap, args.freshness_samples,
                                       args.freshness_setup), indent=1))
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
