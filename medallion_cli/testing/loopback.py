"""What the JVM services the tests start share (kafka_broker.py, hive_metastore.py): the
loopback address they bind, a free port on it, and a log4j 2 configuration that writes the
service's log to one file."""

from __future__ import annotations

import socket

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
