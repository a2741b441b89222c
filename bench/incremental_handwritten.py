"""The floor under bench/incremental_bench.py on Delta Lake for Spark: the same gold table (orders
and value per customer) kept by hand from silver's change feed, against recomputing it by hand.

Lands --rows orders as a silver Delta table (change data feed on) and writes gold from it. Then,
--repeat times: MERGEs a change of --change of the orders into silver (new amounts, moved to
other customers; not timed), times the least a hand-written increment does (read the feed since
the last version, add each customer's inserts and subtract its deletes and pre-images, and one
MERGE that adds them to the stored sums, deleting customers left with no orders), then times the
full recompute (group silver, overwrite gold), alternating. One process, one Spark session with
the settings medallion uses (bench/handwritten.py); the JARs from `medallion jars`.

    python bench/incremental_handwritten.py --rows 20000000 --customers 500000
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from handwritten import session
from pyspark.sql import functions as F

ADDED = ("insert", "update_postimage")


def silver_rows(spark, first: int, count: int, customers: int, seed: int):
    """`count` orders from id `first`, with random customers and amounts."""
    return spark.range(first, first + count).select(
        F.col("id").alias("order_id"),
        (F.floor(F.rand(seed) * customers) + 1).cast("bigint").alias("customer_id"),
        (F.floor(F.rand(seed + 1) * 999) + 1).cast("bigint").alias("amount"))


def full_recompute(spark, silver: str, gold: str) -> None:
    spark.read.format("delta").load(silver).groupBy("customer_id").agg(
        F.count(F.lit(1)).alias("orders"), F.sum("amount").alias("value")
    ).write.format("delta").mode("overwrite").save(gold)


def increment(spark, silver: str, gold: str, since: int) -> None:
    from delta.tables import DeltaTable

    changes = spark.read.format("delta").option("readChangeFeed", "true").option(
        "startingVersion", since).load(silver)
    sign = F.when(F.col("_change_type").isin(*ADDED), 1).otherwise(-1)
    deltas = changes.groupBy("customer_id").agg(
        F.sum(sign).alias("orders"), F.sum(sign * F.col("amount")).alias("value"))
    DeltaTable.forPath(spark, gold).alias("t").merge(
        deltas.alias("s"), "t.customer_id = s.customer_id"
    ).whenMatchedDelete("t.orders + s.orders <= 0").whenMatchedUpdate(set={
        "orders": "t.orders + s.orders", "value": "t.value + s.value"}
    ).whenNotMatchedInsertAll("s.orders > 0").execute()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--customers", type=int, default=500_000)
    parser.add_argument("--change", type=float, default=0.0001, help="a share of the orders")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    spark = session(delta_spark=True)
    root = Path(tempfile.mkdtemp(prefix="incremental-handwritten-"))
    silver, gold = str(root / "silver"), str(root / "gold")
    try:
        from delta.tables import DeltaTable

        silver_rows(spark, 1, args.rows, args.customers, 1).write.format("delta").option(
            "delta.enableChangeDataFeed", "true").save(silver)
        full_recompute(spark, silver, gold)
        changed = max(1, int(args.rows * args.change))
        incremental, full = [], []
        for round_ in range(args.repeat):
            version = DeltaTable.forPath(spark, silver).history(1).first()["version"]
            moved = silver_rows(spark, 1, changed, args.customers, 100 + round_).withColumn(
                "order_id", (F.floor(F.rand(200 + round_) * args.rows) + 1).cast("bigint")
            ).dropDuplicates(["order_id"])
            DeltaTable.forPath(spark, silver).alias("t").merge(
                moved.alias("s"), "t.order_id = s.order_id").whenMatchedUpdateAll().execute()
            start = time.perf_counter()
            increment(spark, silver, gold, version + 1)
            incremental.append(time.perf_counter() - start)
            kept = spark.read.format("delta").load(gold).collect() if round_ == 0 else None
            start = time.perf_counter()
            full_recompute(spark, silver, gold)
            full.append(time.perf_counter() - start)
            if kept is not None:  # the increment is right: it equals the recompute
                assert sorted(kept) == sorted(spark.read.format("delta").load(gold).collect())
            print(f"  {changed} orders changed: increment {incremental[-1]:.2f} s, full "
                  f"recompute {full[-1]:.2f} s", flush=True)
        inc, whole = statistics.median(incremental), statistics.median(full)
        print(f"delta-spark by hand, {args.rows} orders, {changed} changed: median increment "
              f"{inc:.2f} s, full {whole:.2f} s, ratio {whole / inc:.1f}x", flush=True)
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
