"""Delta's commits on S3 as conditional puts: the log store in java/ConditionalPutLogStore.java,
compiled once (javac, against the delta-storage JAR in use and this Spark's Hadoop) into the JAR
cache, and named to Delta for s3:// and s3a:// tables.

Delta's own S3 store checks that a commit is absent, then writes it: a build paused between the
two (past its lease, run/lease.py) would overwrite the commit the build that took over made.
With the store refusing that write (If-None-Match), Delta resolves it as a conflict instead.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from ...core.errors import MedallionError
from ...spark import jars

SOURCE = Path(__file__).resolve().parent / "java" / "ConditionalPutLogStore.java"
CLASS = "io.medallion.delta.ConditionalPutLogStore"
SCHEMES = ("s3", "s3a")
JAR = "medallion-log-store.jar"

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
    changed (the folder is named by all three)."""
    hadoop_api = next((jars.pyspark_folder() / "jars").glob("hadoop-client-api-*.jar"), None)
    digest = hashlib.sha256(SOURCE.read_bytes() + delta_storage.name.encode()
                            + (hadoop_api.name if hadoop_api else "").encode()).hexdigest()[:10]
    where = jars.cache_root() / f"log-store-{digest}"
    if (where / JAR).is_file():
        return where / JAR
    javac = java_compiler()
    where.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".log-store-", dir=where.parent))
    try:
        classes = staging / "classes"
        run = subprocess.run(
            [javac, "--release", "17", "-nowarn", "-d", str(classes), "-cp",
             os.pathsep.join(map(str, [delta_storage, hadoop_api or ""])), str(SOURCE)],
            capture_output=True, text=True)
        if run.returncode != 0:
            first = next((ln for ln in run.stderr.splitlines() if "error" in ln), run.stderr)
            raise MedallionError(f"the S3 log store did not compile: {first.strip()}",
                                 path=SOURCE, hint="report it with this line")
        with zipfile.ZipFile(staging / JAR, "w") as archive:
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        shutil.rmtree(classes)
        try:
            staging.rename(where)  # atomic: another build that finished first wins
        except OSError:
            if not (where / JAR).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return where / JAR


def java_compiler() -> str:
    """javac: JAVA_HOME's, else the PATH's."""
    home = os.environ.get("JAVA_HOME")
    found = (home and shutil.which("javac", path=str(Path(home) / "bin"))) or shutil.which("javac")
    if not found:
        raise MedallionError("no Java compiler (javac) was found to build the S3 log store that "
                             "refuses a commit over another build's",
                             hint="install a JDK (not only a JRE), e.g. apt-get install "
                                  "openjdk-17-jdk-headless")
    return found
