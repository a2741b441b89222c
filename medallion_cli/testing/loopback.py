"""What the JVM services the tests start share (kafka_broker.py, hive_metastore.py,
connect_server.py, trino.py): the loopback address they bind, a free port on it, a log4j 2
configuration that writes the service's log to one file, and the wait for its ready line."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

LOOPBACK = "127.0.0.1"
LOG4J = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        port: int = s.getsockname()[1]
        return port


def wait_until_logged(log: Path, ready: str, process: subprocess.Popen[bytes], timeout: float,
                      what: str, stop: Callable[[], None], poll: float = 0.2) -> None:
    """Wait until the service's log has its `ready` line. When its process ends first, or
    `timeout` seconds pass: stop it, and raise with the log's tail."""
    deadline = time.monotonic() + timeout
    while ready not in (log.read_text(errors="replace") if log.exists() else ""):
        if process.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            stop()
            raise RuntimeError(f"{what} did not start:\n{tail}")
        time.sleep(poll)
