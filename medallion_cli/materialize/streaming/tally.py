"""What a streaming query did, batch by batch: each micro-batch's report and the query's tally
(foreachBatch runs on a Spark thread; under --watch, Spark's progress reports arrive on another)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from .throughput import kafka_lag


@dataclass(frozen=True)
class BatchReport:
    model: str
    batch_id: int
    rows: int
    version: int
    malformed: int
    rescued: int  # rows with JSON fields outside the source's schema
    expectations: dict[str, int]
    files_added: int
    rows_read: int  # rows the batch's input commits added, or the model's rows for the batch
    seconds: float | None = None  # the micro-batch's duration, from Spark's query progress
    # records behind, per Kafka source, after it
    kafka_lag: dict[str, int] = field(default_factory=dict)
    app_id: str = ""  # the query's, as in its Delta app transactions
    rows_checked: int | None = None  # rows its expectations were evaluated on


@dataclass
class StreamTally:
    """What a streaming query did, batch by batch (foreachBatch runs on a Spark thread)."""

    on_batch: Callable[[BatchReport], None] = lambda report: None
    # Told at each batch's commit. Under --watch on_batch waits for the batch's progress, which
    # Spark's event bus brings 0.08-0.17 s later: what reads the table need not wait for it.
    on_commit: Callable[[BatchReport], None] = lambda report: None
    batches: int = 0
    replayed: int = 0
    rows: int = 0
    files_added: int = 0
    malformed: int = 0
    rescued: int = 0
    # rule -> failing rows, over all batches
    expectations: dict[str, int] = field(default_factory=dict)
    rows_checked: int | None = None  # rows they were evaluated on, over all batches
    version: int | None = None
    rows_read: int | None = None
    app_id: str | None = None  # read from the checkpoint at the query's first batch
    error: BaseException | None = None
    server_reports: str | None = None  # over Spark Connect: the run's folder (server_batches.py)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Under --watch, a batch is reported once Spark's progress for it (duration, lag) is in.
    detach_listener: Callable[[], None] | None = None
    # batch id -> report awaiting its progress
    pending: dict[int, BatchReport] = field(default_factory=dict)

    def add(self, report: BatchReport) -> None:
        with self.lock:
            self.batches += 1
            self.rows += report.rows
            self.files_added += report.files_added
            self.malformed += report.malformed
            self.rescued += report.rescued
            self.version = report.version
            self.rows_read = (self.rows_read or 0) + report.rows_read
            if report.rows_checked is not None:
                self.rows_checked = (self.rows_checked or 0) + report.rows_checked
            for rule, count in report.expectations.items():
                self.expectations[rule] = self.expectations.get(rule, 0) + count
            waiting = self.detach_listener is not None
            if waiting:
                self.pending[report.batch_id] = report
        self.on_commit(report)
        if not waiting:
            self.on_batch(report)

    def progressed(self, progress: dict[str, Any]) -> None:
        """Spark's progress report of a batch: report the batch with its duration and lag."""
        with self.lock:
            report = self.pending.pop(progress.get("batchId", -1), None)
        if report is not None:
            seconds = progress.get("durationMs", {}).get("triggerExecution", 0) / 1000
            self.on_batch(replace(report, seconds=seconds, kafka_lag=kafka_lag(progress)))
