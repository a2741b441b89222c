"""How fast a streaming query went and how far behind its sources it is, from Spark's own query
progress (one report per micro-batch): rows per second, batch durations and, for Kafka
sources, how many records the query is behind the latest offsets after its last batch."""

from __future__ import annotations

import statistics
from typing import Any


def stream_stats(reports: list[dict[str, Any]], rows_read: int | None) -> dict[str, Any]:
    """rows_per_second: rows read over the time the batches that had data took (Spark counts a
    micro-batch's input again each time foreachBatch uses it, so its own rates are not used);
    batch_seconds: the median and slowest of those batches; kafka_lag: records behind the
    latest offsets per Kafka source, after the last batch."""
    busy = [r for r in reports if r.get("numInputRows")]
    seconds = [r["durationMs"].get("triggerExecution", 0) / 1000 for r in busy]
    stats: dict[str, Any] = {}
    if seconds:
        stats["batch_seconds"] = {"median": round(statistics.median(seconds), 3),
                                  "max": round(max(seconds), 3)}
        if rows_read and sum(seconds):
            stats["rows_per_second"] = round(rows_read / sum(seconds), 1)
    lag = kafka_lag(reports[-1]) if reports else {}
    if lag:
        stats["kafka_lag"] = lag
    return stats


def kafka_lag(report: dict[str, Any]) -> dict[str, int]:
    """Records behind the latest offsets after the report's batch, per Kafka source."""
    lag: dict[str, int] = {}
    for source in report.get("sources") or []:
        behind = (source.get("metrics") or {}).get("maxOffsetsBehindLatest")
        if behind is not None:
            lag[source.get("description", "kafka")] = int(float(behind))
    return lag

