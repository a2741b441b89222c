"""The floor of a daily increment on Delta Lake for Spark: the sample's increment written by hand
(handwritten.py's pipeline), with nothing a framework adds, to tell what of medallion's
delta-spark increment is Delta's own cost.

In one process, on Delta Lake for Spark: the last file of the orders and of the click events is
held back as overhead_bench does, the hand-written first build runs over the rest (which also
warms the JVM, as `medallion serve` is warm), then the held-back files are landed and the
increment is timed, two steps at a time (the orders' beside the click events'): the new files
appended to bronze; silver_orders and silver_events MERGEd with the new rows (latest event per
key, deletes; no tombstones for events later than a delete, which medallion keeps);
gold_order_lines, gold_daily_revenue, gold_customer_value and gold_funnel_conversion recomputed
for the orders, days, customers and event days the new rows touch, and MERGEd. Then the gold
tables are compared with a full recompute over all files.

    python bench/handwritten_increment.py PROJECT_DIR   # a project of overhead_bench's feed
    python bench/handwritten_increment.py PROJECT_DIR --cold   # the increment in a new JVM

With --cold, the first build runs in a process of its own and the increment is timed from its
own process's Spark start (as a `medallion build` of its own, less Python's imports).
Prints JSON: the first build's and the increment's seconds, per step, and the rows that differ
from a full recompute per gold table. The project ends with every file landed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from delta.tables import DeltaTable
from handwritten import (
    CUSTOMER_VALUE,
    DAILY_REVENUE,
    EVENTS,
    FUNNEL,
    ORDER_LINES,
    ORDERS,
    VALID_ORDER,
    build,
    event_columns,
    landed,
    latest,
    order_columns,
    session,
    tables,
    warehouse,
)
from overhead_bench import HELD_BACK, hold_back, land_held_back
from pyspark.sql import functions as F

GOLD_KEYS = {"gold_order_lines": ["order_id"], "gold_daily_revenue": ["order_date", "category"],
             "gold_customer_value": ["customer_id"], "gold_funnel_conversion": ["event_date"]}


def merge_groups(spark, project: Path, name: str, rows, touched) -> None:
    """Replace the gold table's rows of the touched groups (its GOLD_KEYS) with rows: update,
    insert, and delete the touched groups that have no rows now."""
    keys = GOLD_KEYS[name]
    on = " and ".join(f"t.{k} <=> s.{k}" for k in keys)
    source = touched.join(rows.withColumn("_present", F.lit(True)), keys, "left")
    (DeltaTable.forPath(spark, str(warehouse(project) / name)).alias("t")
     .merge(source.alias("s"), on)
     .whenMatchedDelete("s._present is null")
     .whenMatchedUpdate(set={c: f"s.{c}" for c in rows.columns})
     .whenNotMatchedInsert("s._present", values={c: f"s.{c}" for c in rows.columns})
     .execute())


def increment(spark, project: Path, new: dict[str, list[Path]]) -> dict:
    """The increment over the new files, two steps at a time as medallion's sample runs
    (threads: 2): the orders' steps beside the click events'. Seconds per step."""
    wh, steps = warehouse(project), {}

    def step(name, action):
        t = time.perf_counter()
        action()
        steps[name] = round(time.perf_counter() - t, 2)

    def table(name):
        return spark.read.format("delta").load(str(wh / name))

    def append(df, name):
        df.write.format("delta").mode("append").save(str(wh / name))

    def click_events():
        events = landed(spark, project, "events", EVENTS, new["events"]).cache()
        step("bronze_events", lambda: append(events, "bronze_events"))
        latest_events = latest(event_columns(events), "event_id", "event_at")
        step("silver_events", lambda: DeltaTable.forPath(spark, str(wh / "silver_events"))
             .alias("t").merge(latest_events.alias("s"), "t.event_id = s.event_id")
             .whenNotMatchedInsertAll().execute())
        event_days = latest_events.select("event_date").distinct()
        table("silver_events").join(event_days, "event_date").createOrReplaceTempView("e_days")
        step("gold_funnel_conversion", lambda: merge_groups(
            spark, project, "gold_funnel_conversion", spark.sql(FUNNEL.format(events="e_days")),
            event_days))

    def orders_to_lines():
        """Through gold_order_lines: the touched orders' lines, and the days and customers
        those lines had before."""
        orders = landed(spark, project, "orders", ORDERS, new["orders"]).cache()
        step("bronze_orders", lambda: append(orders, "bronze_orders"))
        valid = F.coalesce(F.expr(VALID_ORDER), F.lit(False))
        changed = latest(order_columns(orders).where(valid), "order_id", "updated_at").cache()

        def silver_orders():
            append(order_columns(orders).where(~valid), "silver_orders_quarantine")
            newer = "s.updated_at > t.updated_at"
            (DeltaTable.forPath(spark, str(wh / "silver_orders")).alias("t")
             .merge(changed.alias("s"), "t.order_id = s.order_id")
             .whenMatchedDelete(f"{newer} and s.op = 'D'").whenMatchedUpdateAll(newer)
             .whenNotMatchedInsertAll("s.op <> 'D'").execute())

        step("silver_orders", silver_orders)
        touched = changed.select("order_id").distinct()
        table("silver_orders").join(touched, "order_id").createOrReplaceTempView("o_new")
        table("products").createOrReplaceTempView("p")
        lines = spark.sql(ORDER_LINES.format(orders="o_new", products="p")).cache()
        # as they were before the MERGE below replaces them (apart from the table's lineage)
        before = table("gold_order_lines").join(touched, "order_id").select(
            "order_id", "customer_id", "order_date").localCheckpoint()
        step("gold_order_lines", lambda: merge_groups(
            spark, project, "gold_order_lines", lines, touched))
        table("gold_order_lines").createOrReplaceTempView("lines")
        return lines, before

    def daily_revenue(lines, before):
        days = before.select("order_date").union(lines.select("order_date")).distinct()
        of_days = table("gold_order_lines").join(days, "order_date")
        groups = of_days.select("order_date", "category").union(
            table("gold_daily_revenue").join(days, "order_date").select(
                "order_date", "category")).distinct()
        of_days.createOrReplaceTempView("lines_of_days")
        step("gold_daily_revenue", lambda: merge_groups(
            spark, project, "gold_daily_revenue",
            spark.sql(DAILY_REVENUE.format(lines="lines_of_days")), groups))

    def customer_value(lines, before):
        customers = before.select("customer_id").union(lines.select("customer_id")).distinct()
        table("silver_customers").join(customers, "customer_id").createOrReplaceTempView(
            "c_touched")
        step("gold_customer_value", lambda: merge_groups(
            spark, project, "gold_customer_value",
            spark.sql(CUSTOMER_VALUE.format(customers="c_touched", lines="lines")), customers))

    with ThreadPoolExecutor(2) as pool:
        clicks = pool.submit(click_events)
        changed_lines = pool.submit(orders_to_lines).result()
        last = [pool.submit(daily_revenue, *changed_lines),
                pool.submit(customer_value, *changed_lines), clicks]
        for done in last:
            done.result()
    return steps


def differences(spark, project: Path) -> dict[str, int]:
    """Rows of each gold table not in a full recompute over every landed file, and back."""
    spark.catalog.clearCache()  # the first build's bronze, cached over fewer files
    recomputed = tables(spark, project)
    recomputed["gold_order_lines"] = spark.sql("select * from lines")
    found = {}
    for name in GOLD_KEYS:
        stored = spark.read.format("delta").load(str(warehouse(project) / name))
        expected = recomputed[name].select(*stored.columns)
        found[name] = stored.exceptAll(expected).count() + expected.exceptAll(stored).count()
    return found


def first_build(spark, project: Path) -> float:
    """The hand-written first build into an empty warehouse: its seconds."""
    shutil.rmtree(warehouse(project), ignore_errors=True)
    started = time.perf_counter()
    build(spark, project, delta_spark=True)
    # gold_order_lines is a table of medallion's sample the first build keeps as a view
    spark.sql("select * from lines").write.format("delta").save(
        str(warehouse(project) / "gold_order_lines"))
    return time.perf_counter() - started


def main(project: Path, cold: bool) -> None:
    shutil.rmtree(project / "held_back", ignore_errors=True)
    hold_back(project)
    new = {name: [project / "landing" / name / f.name
                  for f in sorted((project / "held_back" / name).iterdir())]
           for name in HELD_BACK}
    try:
        if cold:  # the first build in a process of its own; the increment starts a JVM
            subprocess.run([sys.executable, __file__, str(project), "--first-only"], check=True)
            first, started = None, time.perf_counter()
            spark = session(delta_spark=True)
        else:
            spark = session(delta_spark=True)
            first = round(first_build(spark, project), 2)
    finally:
        land_held_back(project)
    if not cold:
        started = time.perf_counter()
    steps = increment(spark, project, new)
    seconds = time.perf_counter() - started
    print(json.dumps({"first_seconds": first, "increment_seconds": round(seconds, 2),
                      "jvm": "cold" if cold else "warm", "steps": steps,
                      "rows_differing_from_recompute": differences(spark, project)}))


if __name__ == "__main__":
    if "--first-only" in sys.argv[2:]:
        first_build(session(delta_spark=True), Path(sys.argv[1]))
    else:
        main(Path(sys.argv[1]), cold="--cold" in sys.argv[2:])
