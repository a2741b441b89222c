"""`medallion build --watch --metrics-port N`: the tables' figures for Prometheus at
http://127.0.0.1:N/metrics (prometheus_client), read at each scrape without Spark (status.py):
per table its rows, version, data files, bytes and mean file size (what a full read opens),
the compactions this service ran (its compaction policy) and the age of its newest event; per model with a target_lag, the target and the lag its writes achieved in the
last day (p50, p95, writes, breach; lags.py).
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from prometheus_client import start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from ..core.errors import MedallionError
from ..core.project import Project
from ..dag.graph import Graph
from ..materialize.compaction import COMPACTED
from .status import TableStatus, table_status

LOOPBACK = "127.0.0.1"  # figures of the warehouse, for this machine's own Prometheus agent


def _gauge(name: str, help_text: str, statuses: list[TableStatus],
           value: Callable[[TableStatus], float | None]) -> GaugeMetricFamily:
    gauge = GaugeMetricFamily(name, help_text, labels=["table"])
    for status in statuses:
        found = value(status)
        if found is not None:
            gauge.add_metric([status.name], float(found))
    return gauge


class TableCollector(Collector):
    """The figures of the project's tables, as the project is at each scrape."""

    def __init__(self, state: Callable[[], tuple[Project, Graph]]):
        self.state = state

    def collect(self) -> Iterator[GaugeMetricFamily]:
        project, graph = self.state()
        statuses = table_status(project, graph, list(graph.order))
        yield _gauge("medallion_table_rows", "Rows in the table now", statuses,
                     lambda s: s.rows)
        yield _gauge("medallion_table_version", "The table's Delta version", statuses,
                     lambda s: s.version)
        yield _gauge("medallion_table_files", "Data files a full read of the table opens",
                     statuses, lambda s: s.files)
        yield _gauge("medallion_table_bytes", "Bytes in the table's data files", statuses,
                     lambda s: s.size_bytes)
        yield _gauge("medallion_table_mean_file_bytes", "The mean size of the table's data files",
                     statuses, lambda s: s.mean_file_bytes)
        compacted = {s.name: COMPACTED.get(project.table_path(graph.nodes[s.name].file))
                     for s in statuses}
        yield _gauge("medallion_compactions", "Compactions of the table by this service (its "
                     "compaction policy)", statuses,
                     lambda s: getattr(compacted[s.name], "count", 0))
        yield _gauge("medallion_compaction_seconds", "How long the table's last compaction by "
                     "this service took", statuses,
                     lambda s: getattr(compacted[s.name], "seconds", None))
        yield _gauge("medallion_table_newest_event_age_seconds",
                     "Now minus the newest value of the model's event_time", statuses,
                     lambda s: s.age_seconds)
        lagged = [s for s in statuses if s.lag]
        yield _gauge("medallion_target_lag_seconds", "The model's target lag", lagged,
                     lambda s: s.lag.target if s.lag else None)
        achieved = GaugeMetricFamily(
            "medallion_achieved_lag_seconds", "The lag its writes achieved in the last day: "
            "each write's time minus the newest event time it reflected",
            labels=["table", "quantile"])
        for status in lagged:
            assert status.lag is not None
            for share in (0.5, 0.95):
                value = status.lag.percentile(share)
                if value is not None:
                    achieved.add_metric([status.name, str(share)], value)
        yield achieved
        yield _gauge("medallion_lag_writes", "Writes in the last day whose lag was measured",
                     lagged, lambda s: len(s.lag.lags) if s.lag else None)
        yield _gauge("medallion_lag_breach", "1 when the writes' p95 lag is over the target",
                     lagged, lambda s: int(s.lag.breach) if s.lag else None)


@contextmanager
def metrics_served(port: int | None, state: Callable[[], tuple[Project, Graph]]
                   ) -> Iterator[None]:
    """Serve the figures on 127.0.0.1:port while in the block (nothing when port is None)."""
    if port is None:
        yield
        return
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TableCollector(state))
    try:
        server, thread = start_http_server(port, addr=LOOPBACK, registry=registry)
    except OSError as exc:
        said = "in use" if exc.errno == errno.EADDRINUSE else exc.strerror
        raise MedallionError(f"--metrics-port {port}: {said}",
                             hint="pick another port, or stop what listens there") from exc
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
