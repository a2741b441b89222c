"""The sample project's work written by hand in PySpark, as a baseline for medallion: tables
written with delta-rs (as the embedded engine's are), or with --delta-spark by Delta Lake for
Spark (as the delta-spark engine's are; its JARs from `medallion jars`).

Same inputs, same Spark settings, same tables (bronze ingest, silver dedup/merge with deletes and
quarantine, SCD2 customers, deduplicated events, gold aggregates), as batch jobs in one process,
with no framework. Usage: python bench/handwritten.py PROJECT_DIR [--delta-spark]
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from deltalake import write_deltalake
from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

ORDERS = ("order_id bigint, customer_id bigint, product_id string, quantity int, status string, "
          "op string, updated_at timestamp, _corrupt_record string")
CUSTOMERS = ("customer_id bigint, name string, email string, country string, "
             "updated_at timestamp, _corrupt_record string")
EVENTS = ("event_id string, session_id string, customer_id bigint, event_type string, "
          "product_id string, event_at timestamp, _corrupt_record string")


def delta_spark_conf() -> dict:
    from medallion_cli.spark.jars import fetch, jar_files

    # Delta's settings medallion uses too on a local master (a tuned hand-written job, not a
    # naive one): the default 50 tasks for rebuilding a table's state cost seconds per small
    # table, and each task generates its code again (engines/native.py).
    return {"spark.jars": ",".join(str(j) for j in jar_files(fetch("delta"))),
            "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
            "spark.databricks.delta.snapshotPartitions": "1",
            "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4"}


def session(delta_spark: bool) -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master("local[*]")
               .config("spark.sql.session.timeZone", "UTC").config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "4").config("spark.driver.memory", "2g"))
    for key, value in (delta_spark_conf() if delta_spark else {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(project: Path, delta_spark: bool) -> None:
    started = time.perf_counter()
    timings = build(session(delta_spark), project, delta_spark)
    total = time.perf_counter() - started
    print(json.dumps({"seconds": round(total, 2),
                      "tables": {k: {"rows": r, "seconds": round(s, 2)}
                                 for k, (r, s) in timings.items()}}))


def build(spark: SparkSession, project: Path, delta_spark: bool) -> dict:
    """Every table written to handwritten_warehouse: {table: (rows, seconds)}."""
    timings = {}
    for name, df in tables(spark, project).items():
        t = time.perf_counter()
        timings[name] = (save(spark, df, warehouse(project) / name, delta_spark),
                         time.perf_counter() - t)
    return timings


def warehouse(project: Path) -> Path:
    return project / "handwritten_warehouse"


def save(spark: SparkSession, df, path: Path, delta_spark: bool) -> int:
    """Write the table over whatever is at path: its rows."""
    if delta_spark:
        df.write.format("delta").mode("overwrite").option("overwriteSchema", "true") \
            .save(str(path))
        return spark.read.format("delta").load(str(path)).count()  # from the log
    table = df.toArrow()
    write_deltalake(str(path), table, mode="overwrite", schema_mode="overwrite")
    return table.num_rows


def landed(spark: SparkSession, project: Path, folder: str, schema: str, files=None):
    """The landed files' rows (files: these of the folder's only) with ingestion columns."""
    fmt = "csv" if folder == "customers" else "json"
    reader = spark.read.schema(schema).option("columnNameOfCorruptRecord", "_corrupt_record")
    if fmt == "csv":
        reader = reader.option("header", "true")
    df = reader.format(fmt).load([str(f) for f in files] if files is not None
                                 else str(project / "landing" / folder))
    return df.select("*", F.col("_metadata.file_path").alias("_source_file"),
                     F.current_timestamp().alias("_ingested_at"))


def latest(df, key, seq):
    w = F.row_number().over(Window.partitionBy(key).orderBy(F.col(seq).desc()))
    return df.withColumn("_r", w).where("_r = 1").drop("_r")


VALID_ORDER = "order_id is not null and (op = 'D' or quantity > 0)"


def order_columns(bronze_orders):
    return bronze_orders.select("order_id", "customer_id", "product_id", "quantity", "status",
                                "op", "updated_at")


def event_columns(bronze_events):
    return bronze_events.where("event_id is not null").select(
        "event_id", "session_id", "customer_id", "event_type", "product_id", "event_at",
        F.to_date("event_at").alias("event_date"))


def products_seed(spark: SparkSession, project: Path):
    return (spark.read.csv(str(project / "seeds/products.csv"), header=True, inferSchema=True)
            .withColumn("price", F.col("price").cast("decimal(10,2)")))


ORDER_LINES = """select o.order_id, o.customer_id, o.status, cast(o.updated_at as date) as
                 order_date, p.category, cast(round(o.quantity * p.price, 2) as decimal(12, 2))
                 as amount from {orders} o join {products} p on p.product_id = o.product_id"""
DAILY_REVENUE = """select order_date, category, count(*) as orders,
                   cast(round(sum(amount), 2) as decimal(12, 2)) as revenue, 'EUR' as currency
                   from {lines} where status <> 'cancelled' group by order_date, category"""
CUSTOMER_VALUE = """select c.customer_id, c.name, c.country, count(l.order_id) as orders,
                    cast(round(coalesce(sum(l.amount), 0), 2) as decimal(12, 2))
                    as lifetime_value from {customers} c left join {lines} l
                    on l.customer_id = c.customer_id and l.status <> 'cancelled'
                    where c.is_current group by c.customer_id, c.name, c.country"""
FUNNEL = """select event_date, sum(viewed) as viewed, sum(carted) as carted,
            sum(purchased) as purchased,
            round(sum(purchased) / nullif(sum(viewed), 0), 4) as view_to_purchase_rate
            from (select event_date, session_id,
                  max(case when event_type = 'page_view' then 1 else 0 end) as viewed,
                  max(case when event_type = 'add_to_cart' then 1 else 0 end) as carted,
                  max(case when event_type = 'purchase' then 1 else 0 end) as purchased
                  from {events} group by event_date, session_id) group by event_date"""


def tables(spark: SparkSession, project: Path) -> dict:
    """Every table of the pipeline over all landed files, in the order they are written (the
    bronze ones cached: each feeds the writes after it)."""
    bronze_orders = landed(spark, project, "orders", ORDERS).cache()
    bronze_customers = landed(spark, project, "customers", CUSTOMERS).cache()
    bronze_events = landed(spark, project, "events", EVENTS).cache()
    products = products_seed(spark, project)
    orders = order_columns(bronze_orders)
    valid = F.coalesce(F.expr(VALID_ORDER), F.lit(False))
    silver_orders = latest(orders.where(valid), "order_id", "updated_at").where("op <> 'D'")
    customers = bronze_customers.select("customer_id", "name", F.lower("email").alias("email"),
                                        "country", "updated_at")
    nxt = F.lead("updated_at").over(Window.partitionBy("customer_id").orderBy("updated_at"))
    silver_customers = (customers.withColumn("valid_to", nxt)
                        .withColumn("valid_from", F.col("updated_at"))
                        .withColumn("is_current", F.col("valid_to").isNull()))
    silver_events = latest(event_columns(bronze_events), "event_id", "event_at")
    silver_orders.createOrReplaceTempView("o")
    products.createOrReplaceTempView("p")
    silver_customers.createOrReplaceTempView("c")
    silver_events.createOrReplaceTempView("e")
    spark.sql(ORDER_LINES.format(orders="o", products="p")).createOrReplaceTempView("lines")
    return {"bronze_orders": bronze_orders, "bronze_customers": bronze_customers,
            "bronze_events": bronze_events, "products": products,
            "silver_orders_quarantine": orders.where(~valid), "silver_orders": silver_orders,
            "silver_customers": silver_customers, "silver_events": silver_events,
            "gold_daily_revenue": spark.sql(DAILY_REVENUE.format(lines="lines")),
            "gold_customer_value": spark.sql(CUSTOMER_VALUE.format(customers="c",
                                                                   lines="lines")),
            "gold_funnel_conversion": spark.sql(FUNNEL.format(events="e"))}


if __name__ == "__main__":
    main(Path(sys.argv[1]), "--delta-spark" in sys.argv[2:])
