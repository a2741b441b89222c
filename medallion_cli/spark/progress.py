"""A streaming query's progress reports, passed to Python as Spark makes them (one after each
micro-batch), each as a plain dict of its JSON.

pyspark's own listener turns a report into Python objects field by field over py4j; each of
its maps ends with a Java exception, which pyspark's handler compares with a dozen exception
classes, each looked up by name in every JAR. That cost 170 ms a report (against 0.8 ms for its
JSON), on the driver's two cores: under --watch a bronze batch's report held up the silver
batch it had just woken, for 0.45 s. In a classic session the listener here asks Spark for the
report's name and JSON, two calls; over Spark Connect the reports come as JSON already.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable

from .connect import is_connect

if TYPE_CHECKING:
    from py4j.java_gateway import JavaObject
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.listener import QueryProgressEvent

LISTENER_INTERFACE = "org.apache.spark.sql.streaming.PythonStreamingQueryListener"


class _ProgressOnly:
    """Both sessions' listeners: the reports of the query named `name`, as dicts, passed to
    `on_progress`; other events ignored."""

    def __init__(self, name: str, on_progress: Callable[[dict[str, Any]], None]):
        self.name, self.on_progress = name, on_progress

    def pass_on(self, name: str | None, report_json: Callable[[], str]) -> None:
        if name == self.name:
            self.on_progress(json.loads(report_json()))

    def onQueryStarted(self, event: object) -> None:  # noqa: N802 - the listener interface's names
        pass

    def onQueryIdle(self, event: object) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: object) -> None:  # noqa: N802
        pass


class _ReportsAsJson(_ProgressOnly):
    """Spark's listener interface in a classic session, implemented through py4j's callback
    server: a report's JSON is asked for only when it is the followed query's."""

    def onQueryProgress(self, event: JavaObject) -> None:  # noqa: N802
        progress = event.progress()
        self.pass_on(progress.name(), progress.json)

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
    from .pyspark_api import StreamingQueryListener

    class Listener(_ProgressOnly, StreamingQueryListener):
        def onQueryProgress(self, event: QueryProgressEvent) -> None:  # noqa: N802
            self.pass_on(event.progress.name, lambda: event.progress.json)

    listener = Listener(name, on_progress)
    spark.streams.addListener(listener)
    return lambda: spark.streams.removeListener(listener)
