"""The hand-written baseline for bench/kafka_bench.py: the Structured Streaming query a Spark
user would write to land a Kafka topic in a Delta table (Delta Lake for Spark's sink), with the
same parsing and position columns as medallion's bronze. Prints rows and query seconds as JSON.

    python bench/kafka_handwritten.py BOOTSTRAP TOPIC TABLE CHECKPOINT
"""

from __future__ import annotations

import json
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from medallion_cli.spark import jars

SCHEMA = ("order_id bigint, customer_id bigint, product_id string, quantity int, status string, "
          "op string, updated_at timestamp")


def main(bootstrap: str, topic: str, table: str, checkpoint: str) -> None:
    spark_jars = [str(p) for bundle in ("delta", "kafka") for p in jars.jar_files(jars.fetch(bundle))]
    spark = (SparkSession.builder.master("local[2]")
             .config("spark.jars", ",".join(spark_jars))
             .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
             .config("spark.sql.catalog.spark_catalog",
                     "org.apache.spark.sql.delta.catalog.DeltaCatalog")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.enabled", "false")
             .getOrCreate())
    records = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", topic).option("startingOffsets", "earliest").load())
    value = F.col("value").cast("string")
    rows = records.select(
        F.from_json(value, f"{SCHEMA}, _corrupt_record string",
                    {"columnNameOfCorruptRecord": "_corrupt_record"}).alias("v"),
        F.col("key").cast("string").alias("_key"), F.col("topic").alias("_topic"),
        F.col("partition").alias("_partition"), F.col("offset").alias("_offset"),
        F.col("timestamp").alias("_kafka_timestamp")).select("v.*", "_key", "_topic",
                                                              "_partition", "_offset",
                                                              "_kafka_timestamp")
    started = time.perf_counter()
    query = (rows.writeStream.format("delta").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start(table))
    query.awaitTermination()
    seconds = time.perf_counter() - started
    count = spark.read.format("delta").load(table).count()
    print(json.dumps({"rows": count, "seconds": round(seconds, 2)}))
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
