"""Starting a local driver's JVM with the java command that pyspark's spark-submit ends in.

pyspark starts the driver with spark-submit: two bash scripts and a launcher JVM that work out
the java command, which the scripts then exec, 0.2-0.3 s of every start on 2 cores. The
command follows from spark-submit's arguments, a few environment variables and Spark's
configuration folder alone, so the first start records it (the JVM's own command line, and
what the scripts added to its environment, from /proc) and a later start with the same
inputs runs it directly. A recorded command whose JVM exits before it takes a connection is
forgotten, and spark-submit starts the JVM again. Not on a system without /proc, and not where
the configuration folder has a spark-env.sh (a script every start runs again).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.processes import environment_set
from .class_archive import java_binary

if TYPE_CHECKING:
    from py4j.java_gateway import JavaGateway
    from pyspark import SparkConf

CACHE_ENV = "MEDALLION_LAUNCH_DIR"
# set by pyspark for each start, or by bash for its own bookkeeping: not spark-submit's
NOT_RECORDED = {"_PYSPARK_DRIVER_CONN_INFO_PATH", "SPARK_CONNECT_MODE", "PWD", "OLDPWD",
                "SHLVL", "_"}
FIRST_CALL_IMPORTS = "pyspark.testing.utils"
KEPT = 32  # records kept, the most recently used (each project's settings make one)
# what spark-submit's scripts and launcher read, besides their arguments
READ_BY_SCRIPTS = ("SPARK_", "PYSPARK_", "HADOOP_", "YARN_", "JAVA_HOME", "PATH")


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "medallion" / "launch")


def launch(settings: SparkConf, popen_kwargs: dict[str, Any]) -> JavaGateway:
    """pyspark's gateway to a new driver JVM started with `settings` (a SparkConf), as
    pyspark.java_gateway.launch_gateway returns it (`proc` the JVM's process)."""
    from . import pyspark_api

    record = _record_path(settings)
    # pyspark's first call into the JVM imports FIRST_CALL_IMPORTS (its converters' numpy
    # check), which brings pandas: 0.25 s, done on a thread while the JVM boots instead of
    # after it. That thread holds pyspark_api's import lock, so the names this start uses
    # are looked up before it starts.
    for name in ("launch_gateway", "read_int", "UTF8Deserializer"):
        getattr(pyspark_api, name)
    importing = pyspark_api.import_meanwhile(FIRST_CALL_IMPORTS)
    try:
        return _launched(settings, popen_kwargs, record)
    finally:
        importing.join()


def _launched(settings: SparkConf, popen_kwargs: dict[str, Any],
              record: Path | None) -> JavaGateway:
    from .pyspark_api import launch_gateway

    if record is not None and record.is_file():
        gateway = _started_directly(record, popen_kwargs)
        if gateway is not None:
            return gateway
        record.unlink(missing_ok=True)
    gateway = launch_gateway(settings, popen_kwargs)
    if record is not None:
        _record(record, gateway.proc.pid)
    return gateway


def _record_path(settings: SparkConf) -> Path | None:
    from .pyspark_api import find_spark_home

    try:
        home = Path(find_spark_home())
        configuration = Path(os.environ.get("SPARK_CONF_DIR") or home / "conf")
        java = java_binary()
        if not Path("/proc/self/environ").is_file() or java is None or (
                configuration / "spark-env.sh").exists():
            return None
        files = sorted((f.name, f.stat().st_mtime_ns, f.stat().st_size)
                       for f in configuration.iterdir()) if configuration.is_dir() else []
        inputs = json.dumps([
            settings.getAll(), str(home), version("pyspark"), str(java),
            java.stat().st_mtime_ns, files,  # (PYSPARK_SUBMIT_ARGS with the variables below)
            sorted((k, v) for k, v in os.environ.items() if k.startswith(READ_BY_SCRIPTS))])
    except OSError:
        return None
    return cache_root() / f"{hashlib.sha256(inputs.encode()).hexdigest()[:16]}.json"


def _environment(pid: int) -> dict[str, str]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode(errors="surrogateescape").split("=", 1)
                for entry in entries if b"=" in entry)


def _record(record: Path, pid: int) -> None:
    """The running JVM's command line, and its environment's differences from this process's:
    what spark-submit's scripts set (SPARK_HOME, SPARK_SCALA_VERSION, ...). Never the values
    this process passed on, so no credential from its environment is written."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(
            errors="surrogateescape").split("\0")[:-1]
        jvm, ours = _environment(pid), dict(os.environ)
        added = {k: v for k, v in jvm.items() if ours.get(k) != v and k not in NOT_RECORDED}
        removed = sorted(k for k in ours if k not in jvm and k not in NOT_RECORDED)
        if not argv or Path(argv[0]).name != "java":
            return  # not the JVM itself (a wrapper that did not exec it)
        record.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=record.parent, suffix=".tmp")
        with os.fdopen(handle, "w") as out:  # readable by this user only
            json.dump({"argv": argv, "added": added, "removed": removed}, out)
        os.replace(temporary, record)
        for old in sorted(record.parent.glob("*.json"), key=lambda f: f.stat().st_mtime,
                          reverse=True)[KEPT:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass  # a record is only ever a saving: the next start goes through spark-submit


def _started_directly(record: Path, popen_kwargs: dict[str, Any]) -> JavaGateway | None:
    """The gateway to a JVM started with the recorded command, or None when the record cannot
    be read or its JVM exits before taking a connection."""
    from .pyspark_api import UTF8Deserializer, launch_gateway, read_int

    folder = Path(tempfile.mkdtemp())
    info = folder / "info"
    process = None
    try:
        recorded = json.loads(record.read_text())
        environment = {**os.environ, **recorded["added"], "SPARK_CONNECT_MODE": "0",
                       "_PYSPARK_DRIVER_CONN_INFO_PATH": str(info)}
        for key in recorded["removed"]:
            environment.pop(key, None)
        # as pyspark starts it: a pipe the JVM exits on when it breaks, Ctrl-C left to this
        # process
        process = subprocess.Popen(
            recorded["argv"], **{**popen_kwargs, "stdin": subprocess.PIPE, "env": environment},
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        while process.poll() is None and not info.is_file():
            time.sleep(0.01)
        with open(info, "rb") as connection:  # written whole, then renamed to this name
            port, secret = read_int(connection), UTF8Deserializer().loads(connection)
        os.utime(record)  # recently used: kept
    except (OSError, ValueError, KeyError, TypeError):
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        return None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    # pyspark's own connection to a JVM it did not start
    with environment_set({"PYSPARK_GATEWAY_PORT": str(port), "PYSPARK_GATEWAY_SECRET": secret}):
        gateway = launch_gateway()
    gateway.proc = process
    return gateway
