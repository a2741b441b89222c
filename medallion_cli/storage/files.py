"""Small files beside the tables (checkpoints' notes, data tests' verdicts) and landing folders,
wherever the warehouse is: local paths with Python, object-store URIs through Hadoop's
FileSystem API in Spark's JVM (it reaches every location Spark reads, with the target's
credentials), so no engine writes plain files and nothing here needs a client per store. Over
Spark Connect there is no JVM here: S3 is reached with pyarrow and the AWS variables, as
delta-rs reaches the tables' logs (load/profiles.py refuses other stores there).

Each function takes `on`: anything whose `spark` gives the session (an engine, which starts it
on first use), asked only for a location that is not local.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Protocol

from ..core.locations import is_remote, local_files
from ..spark.connect import is_connect
from . import object_store


class WithSpark(Protocol):
    """What the functions here take as `on`: an engine, or anything else holding a session
    (py4j's and Spark Connect's objects are untyped, hence Any)."""

    @property
    def spark(self) -> Any: ...


def read_text(on: WithSpark, location: str) -> str:
    """A (small) file's content as UTF-8 text; FileNotFoundError when there is none."""
    if not is_remote(location):
        return _local(location).read_text()
    spark = on.spark
    if is_connect(spark):
        return object_store.read_bytes(location).decode()
    jvm = spark._jvm
    path, fs = _hadoop_file(spark, location)
    if not fs.exists(path):
        raise FileNotFoundError(location)
    out = jvm.java.io.ByteArrayOutputStream()
    jvm.org.apache.hadoop.io.IOUtils.copyBytes(fs.open(path), out, 65536, True)  # closes both
    return str(out.toString("UTF-8"))


def write_text(on: WithSpark, location: str, text: str) -> None:
    """Write a (small) UTF-8 file whole or not at all, replacing one that is there: a local one
    is written beside it and renamed over it (a process killed mid-write leaves the file as it
    was, never an empty one the next build cannot parse); an object appears whole when its
    writer closes it."""
    if not is_remote(location):
        write_local_text(str(_local(location)), text)
        return
    if is_connect(on.spark):
        object_store.write_bytes(location, text.encode())
        return
    path, fs = _hadoop_file(on.spark, location)
    out = fs.create(path, True)
    try:
        out.write(bytearray(text.encode()))
    finally:
        out.close()


def write_local_text(location: str, text: str) -> None:
    path = Path(location)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    written.write_text(text)
    os.replace(written, path)


def remove(on: WithSpark, location: str) -> None:
    """Delete a file, or a folder and everything under it; nothing there is fine."""
    if not is_remote(location):
        if _local(location).is_file():
            _local(location).unlink()
        shutil.rmtree(_local(location), ignore_errors=True)
        return
    if is_connect(on.spark):
        object_store.remove_all(location)
        return
    path, fs = _hadoop_file(on.spark, location)
    fs.delete(path, True)


def list_files(on: WithSpark, location: str) -> list[tuple[str, int, int]]:
    """(path under the location, size, modification time) of every file below a location,
    sorted (a local folder's by Python: no Spark)."""
    if not is_remote(location):
        return local_files(_local(location))
    if is_connect(on.spark):
        return object_store.files_below(location)
    path, fs = _hadoop_file(on.spark, location)
    if not fs.exists(path):
        return []
    root = fs.makeQualified(path).toString().rstrip("/") + "/"
    files, it = [], fs.listFiles(path, True)
    while it.hasNext():
        status = it.next()
        files.append((status.getPath().toString().removeprefix(root), status.getLen(),
                      status.getModificationTime()))
    return sorted(files)


def _local(location: str) -> Path:
    """A local location as a path (file:///x is /x)."""
    return Path(location.removeprefix("file://"))


def _hadoop_file(spark: Any, location: str) -> tuple[Any, Any]:
    """(Hadoop Path, its FileSystem) for a location."""
    path = spark._jvm.org.apache.hadoop.fs.Path(location)
    return path, path.getFileSystem(spark._jsc.hadoopConfiguration())
