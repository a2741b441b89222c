"""medallion's daemon: the server a command starts for the project when it finds none, so that
the next commands find Spark warm (as Gradle's daemon does). The command forks before any
Spark exists; the child leaves the terminal's session, writes its output to
target/daemon.log, starts Spark and serves, beginning with the command that started it. It stops
after IDLE_SECONDS without a command, when asked (`medallion serve --stop`), or when its
target/serve.json goes (`medallion clean`). One per project: a lock taken before the fork, held
by the daemon for its life. On by default where a person types commands (a terminal), off in
scripts and CI unless asked for.
"""

from __future__ import annotations

import fcntl
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Callable

from ..core.errors import MedallionError
from ..core.processes import exit_now

DAEMON_VARIABLE = "MEDALLION_DAEMON"  # on | off (default: on in a terminal)
IDLE_VARIABLE = "MEDALLION_DAEMON_IDLE"  # seconds
IDLE_SECONDS = 15 * 60
LOG_FILE = "daemon.log"
LOCK_SECONDS = 60.0  # longest a command waits for another's daemon to listen, or one to go
ON, OFF = ("1", "on", "true", "yes"), ("0", "off", "false", "no")


def wanted(flag: bool | None, terminal: bool) -> bool:
    """--daemon/--no-daemon, else MEDALLION_DAEMON, else whether a person runs the command
    (stdin and stdout a terminal)."""
    if flag is not None:
        return flag
    setting = os.environ.get(DAEMON_VARIABLE, "").strip().lower()
    if setting and setting not in ON + OFF:
        raise MedallionError(f"{DAEMON_VARIABLE}={setting!r} is neither on nor off",
                             hint=f"set {DAEMON_VARIABLE}=on or {DAEMON_VARIABLE}=off")
    return setting in ON if setting else terminal


def idle_seconds() -> float:
    text = os.environ.get(IDLE_VARIABLE, "").strip()
    try:
        seconds = float(text) if text else IDLE_SECONDS
    except ValueError:
        seconds = -1
    if seconds <= 0:
        raise MedallionError(f"{IDLE_VARIABLE}={text!r} is not a number of seconds above 0",
                             hint=f"e.g. {IDLE_VARIABLE}=600 stops the daemon after 10 idle "
                                  "minutes")
    return seconds


def start(project_dir: str, serve_here: Callable[[Callable[[int], None]], None],
          served: Callable[[], bool]) -> int | None:
    """Fork the project's daemon, which calls serve_here(on_ready) and exits when it returns:
    its pid once it listens; None when it cannot be (no fork here, threads already running,
    another daemon listening now (`served()`), or it failed before listening: the command then
    goes to that daemon, or runs in a JVM of its own and says why, as without a daemon)."""
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return None  # forking a process with threads may copy a lock another thread holds
    folder = Path(project_dir).resolve() / "target"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = os.open(folder / "serve.lock", os.O_CREAT | os.O_WRONLY, 0o600)
    except OSError:
        return None  # a project it cannot write to: the command says so, as without a daemon
    deadline = time.monotonic() + LOCK_SECONDS
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            # Held by a daemon that another command starts (this one then goes to it once it
            # listens), or by one that stops and has not quite gone (its threads end after its
            # pid shows it exited): either way briefly.
            if served() or time.monotonic() > deadline:
                os.close(lock)
                return None
            time.sleep(0.2)
    ready_read, ready_write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(ready_read)
        _be_daemon(folder / LOG_FILE, ready_write, serve_here)  # does not return
    os.close(ready_write)
    os.close(lock)  # the daemon holds it (the lock is the open file's, shared by the fork)
    with os.fdopen(ready_read, "rb") as ready:
        return pid if ready.read(1) == b"1" else None


def _be_daemon(log: Path, ready_write: int,
               serve_here: Callable[[Callable[[int], None]], None]) -> None:
    code = 1
    try:
        os.setsid()  # no terminal: the terminal's Ctrl-C and hang-up are the command's
        nothing = os.open(os.devnull, os.O_RDONLY)
        os.dup2(nothing, 0)
        output = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(output, 1)
        os.dup2(output, 2)

        def on_ready(port: int) -> None:
            os.write(ready_write, b"1")
            os.close(ready_write)

        serve_here(on_ready)
        code = 0
    except BaseException:  # noqa: BLE001 -- said in the log; the command runs on its own
        traceback.print_exc()
    finally:
        exit_now(code)  # after what Spark's start registered (the class archive's)
