"""Kafka topics as sources: Spark's own Kafka source (its JARs from
medallion_cli/spark/maven/kafka.pom.xml), each record with its position, its value parsed as
JSON when the source declares a schema.

Exactly once into Delta: the streaming query's checkpoint records the offsets each micro-batch
read, and the batch's Delta commit carries the app transaction (see streaming/driver.py), so a batch
replayed after a crash reads the same offsets and writes nothing twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.project import SourceTable
from ..context import CORRUPT_COLUMN
from .debezium import decoded
from .json_values import readable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# Where each row came from, as bronze tables keep it.
POSITION = {"key": "_key", "topic": "_topic", "partition": "_partition", "offset": "_offset",
            "timestamp": "_kafka_timestamp"}
# Options for Spark's Kafka source, not for parsing JSON values.
KAFKA_OPTION_PREFIXES = ("kafka.", "subscribe", "assign", "starting", "ending", "max", "min",
                         "failondataloss", "includeheaders", "groupidprefix", "fetchoffset")


# Spark asks the brokers for offsets up to fetchOffset.numRetries times (3), each time for up to
# Kafka's default.api.timeout.ms (60 s): a broker that is down cost 3 minutes before one line
# said so. Kafka's clients retry inside that minute already; a source's options may say more.
PATIENCE = {"fetchOffset.numRetries": "1"}


def read_kafka(spark: SparkSession, source: SourceTable, streaming: bool) -> DataFrame:
    """The topic's records as rows: the value's schema columns with `_corrupt_record` and
    `_rescued_data` (or `value` as a string without a schema), then `_key`, `_topic`,
    `_partition`, `_offset`, `_kafka_timestamp`."""
    from ...spark.pyspark_api import F

    reader = (spark.readStream if streaming else spark.read).format("kafka")
    records = reader.options(**{**PATIENCE, **source.options}).load()
    position = [F.col(c).alias(alias) for c, alias in POSITION.items() if c != "key"]
    lines = records.select(F.col("value").cast("string").alias("value"),
                           F.col("key").cast("string").alias(POSITION["key"]), *position)
    if not source.schema:
        return lines
    json_options = {k: v for k, v in source.options.items()
                    if not k.lower().startswith(KAFKA_OPTION_PREFIXES)}
    where = F.concat(F.lit("topic "), F.col("_topic"), F.lit(" partition "),
                     F.col("_partition").cast("string"), F.lit(" offset "),
                     F.col("_offset").cast("string"))
    rows = decoded(lines, source, source.schema, json_options, where,
                   tombstones=(F.col(POSITION["key"]), F.col(POSITION["timestamp"])))
    return rows.withColumn(CORRUPT_COLUMN, readable(rows[CORRUPT_COLUMN]))
