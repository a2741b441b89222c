"""Delta's commits on S3 as conditional puts: the log store in java/ConditionalPutLogStore.java,
compiled once (spark/java_build.py, against the delta-storage JAR in use and this Spark's
Hadoop), and named to Delta for s3:// and s3a:// tables.

Delta's own S3 store checks that a commit is absent, then writes it: a build paused between the
two (past its lease, run/lease.py) would overwrite the commit the build that took over made.
With the store refusing that write (If-None-Match), Delta resolves it as a conflict instead.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ...core.errors import MedallionError
from ...spark import jars
from ...spark.java_build import compiled_jar

SOURCE = Path(__file__).resolve().parent / "java" / "ConditionalPutLogStore.java"
CLASS = "io.medallion.delta.ConditionalPutLogStore"
SCHEMES = ("s3", "s3a")

log = logging.getLogger(__name__)


def log_store_settings(delta_jars: list[Path],
                       own_conf: dict[str, str]) -> tuple[Path | None, dict[str, str]]:
    """(JAR, Spark conf) of the conditional log store for S3, built on first need; none when
    the target names a log store of its own or its Delta JARs are not known here, or when no
    JDK is here to build it (then a warning: Delta's own store is used)."""
    keys = [f"spark.delta.logStore.{scheme}.impl" for scheme in SCHEMES]
    storage = next((jar for jar in delta_jars if jar.name.startswith("delta-storage-")), None)
    if storage is None or "spark.delta.logStore.class" in own_conf or any(
            key in own_conf for key in keys):
        return None, {}
    try:
        jar = built_jar(storage)
    except MedallionError as cannot:
        log.warning("%s; Delta's own S3 log store is used (%s)", cannot.message, cannot.hint)
        return None, {}
    return jar, {key: CLASS for key in keys}


def built_jar(delta_storage: Path) -> Path:
    """The log store's JAR, compiled when its source, Delta's storage JAR or Spark's Hadoop
    changed."""
    hadoop_api = next((jars.pyspark_folder() / "jars").glob("hadoop-client-api-*.jar"), None)
    return compiled_jar(SOURCE, [delta_storage, *filter(None, [hadoop_api])],
                        "the S3 log store that refuses a commit over another build's")
