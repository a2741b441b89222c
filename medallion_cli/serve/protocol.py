"""What a server and its clients share: target/serve.json (where the server listens, with its
secret, readable by its owner only, and trusted only when it is the user's own), the kind of
process a command needs its server to be, connecting to it, asking it to stop, and hanging up
on a peer. Messages are JSON lines.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from ..core.processes import ended

SERVED_FILE = "serve.json"
# What a serve.json says (pid, port, secret, target, kind, idle), and the JSON messages
# server and client exchange, one a line
Served = dict[str, Any]
Message = dict[str, Any]

# Read where Spark starts (Java's and Spark's options, S3A's credentials), not per command: a
# server started with other values would run a command otherwise than the command would.
STARTING_VARIABLES = ("JAVA_HOME", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "SPARK_", "PYSPARK_",
                      "HADOOP_", "AWS_")


def server_kind() -> str:
    """What a command and its server must share: the same Python, the same medallion (its
    files' times: an upgrade or an edited checkout changes it) and the variables read as Spark
    starts (STARTING_VARIABLES)."""
    package = Path(__file__).resolve().parent.parent
    code = max(p.stat().st_mtime_ns for p in package.rglob("*.py"))
    variables = sorted((k, v) for k, v in os.environ.items() if k.startswith(STARTING_VARIABLES))
    text = json.dumps([sys.executable, str(package), code, variables])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def served_file(project_dir: str) -> Path:
    """Where a project's server says where it listens (the target folder: project.target_dir)."""
    return Path(project_dir).resolve() / "target" / SERVED_FILE


def _not_own(path: Path) -> str | None:
    """Why a serve.json is not to be trusted (another user's, or one others may write), or
    None: its server gets this user's command and variables, and its exit code is believed."""
    try:
        facts = path.stat()
    except OSError:
        return None  # no server
    if facts.st_uid != os.getuid():
        return f"owned by another user (uid {facts.st_uid})"
    if facts.st_mode & 0o022:
        return f"writable by others (mode {facts.st_mode & 0o777:o})"
    return None


def _hang_up(connection: socket.socket) -> None:
    """Close a connection now, for both sides (a plain close waits for its reader files)."""
    try:
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # the peer had gone
    connection.close()


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (it holds the server's secret)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
        handle.write(text)


def _served(path: Path) -> Served:
    """What a project's serve.json says (empty when there is none)."""
    try:
        served = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return served if isinstance(served, dict) else {}


def _connect(served: Served) -> socket.socket | None:
    """A connection to the server the file names, or None when it is gone (killed without
    removing its file: its pid is not running, or nothing listens on its port)."""
    try:
        os.kill(served["pid"], 0)
        return socket.create_connection(("127.0.0.1", served["port"]), timeout=2)
    except (OSError, KeyError, TypeError, ValueError):
        return None


def listening(served: Served) -> bool:
    """Whether the server a serve.json names answers (the connection closed again)."""
    connection = _connect(served)
    if connection is None:
        return False
    connection.close()
    return True


def ask_to_stop(served: Served, timeout: float = 120) -> bool:
    """Ask the server a serve.json names to stop (after the command it runs, if any) and wait
    for its process to end: whether it ended."""
    connection = _connect(served)
    if connection is None:
        return True  # gone already
    with connection:
        try:
            connection.sendall(json.dumps({"secret": served.get("secret"), "stop": True})
                               .encode() + b"\n")
            connection.settimeout(timeout)
            connection.recv(1)  # it hangs up once it has the request
        except OSError:
            pass
    return ended(served["pid"], timeout)
