"""Incremental gold benchmark: a gold table maintained per group (incremental_by) after a small
change to a large silver table, against recomputing the same table in full.

Lands --rows orders (--customers customers) as Parquet, streams them into a silver table kept
by MERGE, and builds gold (orders and value per customer, incremental_by customer_id). Then, for
each change size (a share of the orders: new amounts, and moved to another customer), --repeat
times: lands the change, builds silver (not timed), times the gold build (groups recomputed),
then times a full recompute of the same gold (--full-refresh of that model alone), alternating.
All in one process and one Spark session per engine; seconds are each build's wall time.

    python bench/incremental_bench.py --rows 5000000 --customers 500000 --engine embedded
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from medallion_cli import commands

TARGETS = {"embedded": "local", "delta-spark": "local-delta"}
PROFILE = """\
bench:
  target: local
  outputs:
    local:
      engine: embedded
      warehouse: warehouse
      spark: {master: "local[*]", conf: {spark.driver.memory: 3g}}
    local-delta:
      engine: delta-spark
      warehouse: warehouse
      spark: {master: "local[*]", conf: {spark.driver.memory: 3g}}
"""
FILES = {
    "medallion_project.yml": "name: incremental_bench\nprofile: bench\n",
    "models/sources.yml": """\
sources:
  - name: landing
    path: landing
    tables:
      - name: orders
        format: parquet
        schema: "order_id bigint, customer_id bigint, amount bigint, seq bigint"
""",
    "models/silver/silver_orders.sql": """\
{{ config(materialized='streaming', strategy='merge', unique_key='order_id', sequence_by='seq') }}
select order_id, customer_id, amount, seq from {{ source('landing', 'orders') }}
""",
    "models/gold/customer_value.sql": """\
{{ config(incremental_by='customer_id', incremental_min_rows=0) }}
select customer_id, count(*) as orders, sum(amount) as value
from {{ ref('silver_orders') }}
group by customer_id
""",
}


def land(root: Path, name: str, order_ids, customers: int, seq: int, rng) -> None:
    folder = root / "landing/orders"
    folder.mkdir(parents=True, exist_ok=True)
    n = len(order_ids)
    pq.write_table(pa.table({
        "order_id": pa.array(order_ids, pa.int64()),
        "customer_id": pa.array(rng.integers(1, customers + 1, n), pa.int64()),
        "amount": pa.array(rng.integers(1, 1000, n), pa.int64()),
        "seq": pa.array(np.full(n, seq), pa.int64())}), folder / f"{name}.parquet")


def build(root: Path, target: str, select: tuple[str, ...], full_refresh: bool = False):
    start = time.perf_counter()
    results = commands.build(commands.Invocation(project_dir=str(root), target=target, select=select,
                                           full_refresh=full_refresh), "build")
    seconds = time.perf_counter() - start
    failed = [r.message for r in results if r.failed]
    if failed:
        raise SystemExit(f"build failed: {failed}")
    return seconds, {r.name: r for r in results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--customers", type=int, default=500_000)
    parser.add_argument("--changes", default="0.0001,0.001,0.01",
                        help="change sizes, as shares of the orders")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--engine", choices=sorted(TARGETS), default="embedded")
    args = parser.parse_args()
    rng = np.random.default_rng(15)
    target = TARGETS[args.engine]
    root = Path(tempfile.mkdtemp(prefix="incremental-bench-"))
    try:
        measure(root, target, args, rng)
    finally:  # gigabytes at 20M rows
        shutil.rmtree(root, ignore_errors=True)


def measure(root: Path, target: str, args, rng) -> None:
    for rel, text in {**FILES, "profiles/profiles.yml": PROFILE}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    chunk = 1_000_000
    for part, start in enumerate(range(0, args.rows, chunk)):
        land(root, f"initial-{part:03d}", np.arange(start + 1, min(start + chunk, args.rows) + 1),
             args.customers, 1, rng)
    seconds, _ = build(root, target, ())
    print(f"{args.engine}: initial build of {args.rows} orders, {args.customers} customers: "
          f"{seconds:.1f} s (silver and gold)", flush=True)
    seq = 1
    for share in (float(s) for s in args.changes.split(",")):
        changed = max(1, int(args.rows * share))
        incremental, full = [], []
        for _ in range(args.repeat):
            seq += 1
            land(root, f"change-{seq:04d}", rng.choice(np.arange(1, args.rows + 1), changed,
                                                       replace=False), args.customers, seq, rng)
            build(root, target, ("silver_orders",))
            seconds, results = build(root, target, ("customer_value",))
            assert "group(s) updated by adding" in results["customer_value"].message, results
            incremental.append(seconds)
            seconds, _ = build(root, target, ("customer_value",), full_refresh=True)
            full.append(seconds)
            print(f"  {share:.4%} of orders changed ({changed} rows): incremental "
                  f"{incremental[-1]:.2f} s, full recompute {full[-1]:.2f} s "
                  f"({results['customer_value'].message}; phases "
                  f"{results['customer_value'].phases})", flush=True)
        inc, whole = statistics.median(incremental), statistics.median(full)
        print(f"{args.engine} {share:.4%} ({changed} rows): median incremental {inc:.2f} s, "
              f"full {whole:.2f} s, ratio {whole / inc:.1f}x", flush=True)


if __name__ == "__main__":
    main()
