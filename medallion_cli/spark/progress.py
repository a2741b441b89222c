"""A streaming query's progress reports, passed to Python as Spark makes them (one after each
micro-batch), each as a plain dict of its JSON.

pyspark's own listener turns a report into Python objects field by field over py4j; each of
its maps ends with a Java exception, which pyspark's handler compares with a dozen exception
classes, each looked up by name in every JAR. That cost 170 ms a report (against 0.8 ms for its
JSON), on the driver's two cores: under --watch a bronze batch's report held up the silver
batch it had just woken, for 0.45 s. In a classic session the listener here asks Spark for the
report's name and JSON, two calls.

Over Spark Connect no listener is used: pyspark's Connect listener bus deadlocks when its last
listener is removed while an event is on its way (SPARK-59623: the remover joins the event
thread holding the lock that thread needs to deliver the event). It hung a test in CI and would
hang `build --watch` at a query's stop. There the query's recent progress is polled instead.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any, Callable

from .connect import is_connect

if TYPE_CHECKING:
    from py4j.java_gateway import JavaObject
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

LISTENER_INTERFACE = "org.apache.spark.sql.streaming.PythonStreamingQueryListener"
# Over Connect: how often the followed query's recent progress is asked for (two calls each)
POLL_SECONDS = 0.25


def progress_reports(query: StreamingQuery) -> list[dict[str, Any]]:
    """The query's recent progress reports as plain dicts (pyspark gives objects whose offsets
    are Python reprs; their JSON text is the real thing)."""
    return [json.loads(p.json) for p in query.recentProgress]


class _ReportsAsJson:
    """Spark's listener interface in a classic session, implemented through py4j's callback
    server: the reports of the query named `name`, as dicts, passed to `on_progress` (a
    report's JSON is asked for only when it is that query's); other events ignored."""

    def __init__(self, name: str, on_progress: Callable[[dict[str, Any]], None]):
        self.name, self.on_progress = name, on_progress

    def onQueryProgress(self, event: JavaObject) -> None:  # noqa: N802 - the listener interface's names
        progress = event.progress()
        if progress.name() == self.name:
            self.on_progress(json.loads(progress.json()))

    def onQueryStarted(self, event: object) -> None:  # noqa: N802
        pass

    def onQueryIdle(self, event: object) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: object) -> None:  # noqa: N802
        pass

    class Java:
        implements = [LISTENER_INTERFACE]


def follow_progress(spark: SparkSession, name: str,
                    on_progress: Callable[[dict[str, Any]], None]) -> Callable[[], None]:
    """Pass each progress report of the query named `name` (started in `spark`'s session) to
    `on_progress`; returns what stops that."""
    if is_connect(spark):
        return _follow_over_connect(spark, name, on_progress)
    from .pyspark_api import SparkContext, ensure_callback_server_started

    ensure_callback_server_started(SparkContext._gateway)
    jvm = SparkContext._jvm
    assert jvm is not None  # a classic session's: its JVM runs
    wrapper = jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper
    listener = wrapper(_ReportsAsJson(name, on_progress))
    manager = spark._jsparkSession.streams()
    manager.addListener(listener)
    return lambda: manager.removeListener(listener)


def _follow_over_connect(spark: SparkSession, name: str,
                         on_progress: Callable[[dict[str, Any]], None]) -> Callable[[], None]:
    stopped = threading.Event()

    def poll() -> None:
        last: tuple[str, int] = ("", -1)  # the last report passed on: its timestamp and batch
        try:
            while not stopped.wait(POLL_SECONDS):
                query = next((q for q in spark.streams.active if q.name == name), None)
                for report in progress_reports(query) if query else []:
                    if (report["timestamp"], report["batchId"]) > last:
                        last = (report["timestamp"], report["batchId"])
                        on_progress(report)
        except Exception:  # noqa: BLE001 - the server gone: the query's own calls say so in one line
            return

    thread = threading.Thread(target=poll, name=f"progress of {name}", daemon=True)
    thread.start()

    def stop() -> None:
        stopped.set()
        thread.join()
    return stop
