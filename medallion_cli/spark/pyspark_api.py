"""pyspark's (and delta-spark's) names for medallion's modules, imported one thread at a time.

pyspark's package and pyspark.sql import each other, so two threads importing them for the
first time at once deadlock, and Python breaks the deadlock by handing one of them a partly
initialised module (`cannot import name 'SQLContext' from partially initialized module
'pyspark.sql'`). A build's nodes run on threads and can first touch pyspark at the same moment,
so medallion imports pyspark (and delta, which imports pyspark) only through here:
`from ..engines.pyspark_api import F`. Nothing is imported until a name is asked for, so a
command that needs no Spark imports no pyspark.
"""

from __future__ import annotations

import importlib
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below that pyspark and delta type, as type checkers see them
    from delta import exceptions as delta_exceptions
    from delta.tables import DeltaTable
    from pyspark import SparkConf, SparkContext
    from pyspark.logger import PySparkLogger
    from pyspark.sql import Observation, SparkSession, Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.streaming.listener import StreamingQueryListener

# exported to type checkers; the untyped names come through __getattr__ alone
__all__ = ["F", "T", "Window", "Observation", "SparkSession", "SparkConf", "SparkContext",
           "StreamingQueryListener", "PySparkLogger", "from_arrow_schema", "DeltaTable",
           "delta_exceptions", "import_meanwhile"]

_IMPORTING = threading.Lock()

# name -> "module" or "module:attribute"
_NAMES = {
    "F": "pyspark.sql.functions",
    "T": "pyspark.sql.types",
    "Window": "pyspark.sql:Window",
    "Observation": "pyspark.sql:Observation",
    "SparkSession": "pyspark.sql:SparkSession",
    "SparkConf": "pyspark:SparkConf",
    "SparkContext": "pyspark:SparkContext",
    "StreamingQueryListener": "pyspark.sql.streaming:StreamingQueryListener",
    "launch_gateway": "pyspark.java_gateway:launch_gateway",
    "ensure_callback_server_started": "pyspark.java_gateway:ensure_callback_server_started",
    "find_spark_home": "pyspark.find_spark_home:_find_spark_home",
    "read_int": "pyspark.serializers:read_int",
    "UTF8Deserializer": "pyspark.serializers:UTF8Deserializer",
    "PySparkLogger": "pyspark.logger:PySparkLogger",
    "from_arrow_schema": "pyspark.sql.pandas.types:from_arrow_schema",
    "DeltaTable": "delta.tables:DeltaTable",
    "delta_exceptions": "delta.exceptions",
}


def import_meanwhile(module_name: str) -> threading.Thread:
    """Import a module on a thread of its own (as the names here are, one thread at a time),
    for a caller that waits meanwhile: join the thread before using it. One that fails to
    import is left to whoever imports it next, to fail there."""
    def load() -> None:
        with _IMPORTING:
            try:
                importlib.import_module(module_name)
            except ImportError:
                pass

    thread = threading.Thread(target=load, name=f"import {module_name}", daemon=True)
    thread.start()
    return thread


# Any: the names not typed above are pyspark's untyped ones (its py4j plumbing)
def __getattr__(name: str) -> Any:
    where = _NAMES.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, _, attribute = where.partition(":")
    with _IMPORTING:
        module = importlib.import_module(module_name)
    value = getattr(module, attribute) if attribute else module
    globals()[name] = value  # later look-ups skip the lock
    return value
