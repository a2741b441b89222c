"""`medallion serve`: one project's Spark kept running, so that its commands skip the JVM's start
and run on code the JVM has already compiled.

The server starts Spark for the project's target and waits on a loopback port, which it writes
with a secret to target/serve.json (readable by its owner only). While it runs, `medallion
build`, `run`, `seed`, `test` and `retry` in the project send their arguments, working folder
and the environment variables the project reads there instead of starting a JVM of their own
(a serve.json that another user owns, or others may write, is not trusted, nor one of a server
started with another Python, medallion or Spark's variables); the server runs the command in its
process, one command at a time (the warehouse has one writer anyway; a command that comes while
another runs says it waits, and Ctrl-C stops its waiting), and streams its output back; the
command's exit code is the client's. Each command loads the project again, so edited
models and macros are read as usual. A command whose target would start Spark differently (another
target, engine or Spark setting), or asks for --watch, --debug or --no-server, runs in a JVM of
its own, as without a server. Ctrl-C in the client cancels its command's Spark jobs on the
server, which keeps serving; Ctrl-C or SIGTERM on the server stops it, as does a client asking
(`medallion serve --stop`, after the commands before it), target/serve.json no longer naming it
(`medallion clean`: nobody could reach it) and, for medallion's daemon (daemon.py), its idle time.
"""

from __future__ import annotations

import json
import os
import queue
import secrets
import signal
import socket
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from ..core.errors import MedallionError
from ..core.project import Project
from .admission import (
    Clients,
    _accept,
    _as_client,
    _Client,
    _Interrupts,
    _Running,
    _watch,
)
from .protocol import (
    Message,
    _served,
    _write_private,
    listening,
    served_file,
    server_kind,
)


def serve(project: Project, engine: Any, run_command: Callable[[list[str]], None],
          declined: Callable[[Message], str | None],
          on_ready: Callable[[int], None], on_command: Callable[[list[str], int, float], None],
          idle_seconds: float | None = None) -> None:
    """Start the engine's Spark, then run clients' commands until SIGINT or SIGTERM, a client
    asks it to stop, target/serve.json no longer names it (medallion clean), or it has been
    idle for idle_seconds (a daemon's).
    run_command: runs argv as the `medallion` command does (exits with SystemExit);
    declined: why a request's command must run elsewhere (None: here)."""
    path = served_file(str(project.root))
    other = _served(path)
    if other.get("pid") != os.getpid() and listening(other):
        raise MedallionError(f"medallion serve (pid {other['pid']}) already serves this project",
                             path=path, hint="its commands run there; stop it first to start "
                                             "another (e.g. for another target)")
    kind = server_kind()  # before Spark's start sets variables of its own
    engine.spark  # started now, not by the first command
    interrupts = _Interrupts()
    cancel_jobs = engine.spark.sparkContext.cancelAllJobs

    def interrupted(signum: int, frame: object) -> None:
        interrupts.stopping = interrupts.stopping or not interrupts.client_left
        interrupts.client_left = False
        cancel_jobs()
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, interrupted) for s in (signal.SIGINT, signal.SIGTERM)}
    listener = socket.create_server(("127.0.0.1", 0))
    secret = secrets.token_hex(16)
    _write_private(path, json.dumps({"pid": os.getpid(), "port": listener.getsockname()[1],
                                     "secret": secret, "target": project.target.name,
                                     "kind": kind, "idle": idle_seconds}))
    clients: queue.Queue[_Client | None] = queue.Queue()
    current = _Running()
    # Clients are taken in as they come, so that one that comes while a command runs hears
    # that it waits (and may stop waiting), instead of hanging in the listener's backlog.
    threading.Thread(target=_accept, daemon=True, args=(
        listener, secret, clients, current, lambda client: _watch(
            client, interrupts, cancel_jobs))).start()
    try:
        on_ready(listener.getsockname()[1])
        idle_since = time.monotonic()
        while not interrupts.stopping:
            try:
                try:
                    client = clients.get(timeout=LOOK_SECONDS)
                except queue.Empty:
                    if _retired(path, idle_seconds, idle_since):
                        break
                    continue
                if client is None:  # asked to stop
                    break
                try:
                    _serve_one(client, run_command, declined, current, on_command)
                finally:
                    client.close()
                idle_since = time.monotonic()
                _close_callback_connections(engine.spark)
            except KeyboardInterrupt:
                pass  # a client's command was cancelled (or the server stops: the loop ends)
            except Exception:  # a request it could not serve (a client gone, a bad request)
                traceback.print_exc()
    finally:
        try:
            listener.shutdown(socket.SHUT_RDWR)  # ends the accepting thread's wait
        except OSError:
            pass
        listener.close()
        _turn_away(clients)
        if _served(path).get("pid") == os.getpid():
            path.unlink()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


LOOK_SECONDS = 2.0  # how often an idle server looks whether it should stop


def _turn_away(clients: Clients) -> None:
    """Those still waiting hear that the server stopped (a request that it stop, queued
    among them, has nobody to tell)."""
    while not clients.empty():
        waiting = clients.get()
        if waiting is not None:
            waiting.close()


def _retired(path: Path, idle_seconds: float | None, idle_since: float) -> bool:
    """Whether an idle server stops: its serve.json gone or another's (nobody can reach it),
    or idle for idle_seconds."""
    if _served(path).get("pid") != os.getpid():
        return True
    return idle_seconds is not None and time.monotonic() - idle_since >= idle_seconds


def _serve_one(client: _Client, run_command: Callable[[list[str]], None],
               declined: Callable[[Message], str | None], current: _Running,
               on_command: Callable[[list[str], int, float], None]) -> None:
    with client.sending:
        if client.left:
            return  # it stopped waiting (Ctrl-C)
        client.running = True
    began = time.perf_counter()
    current.argv, current.since = client.request["argv"], time.monotonic()
    try:
        with _as_client(client.request, client.send):
            reason = declined(client.request)
            if not reason:
                exit_code = _run(run_command, client.request["argv"])
    finally:
        current.argv = None
        with client.sending:
            client.running = False  # from here, the client leaving cancels nothing
    if reason:
        client.send({"declined": reason})
        return
    client.send({"exit": exit_code})
    on_command(client.request["argv"], exit_code, time.perf_counter() - began)


def _close_callback_connections(spark: Any) -> None:
    """py4j keeps a connection, and a Python thread waiting on it, for every JVM thread that
    ever called into Python (each streaming query's foreachBatch), for as long as the JVM
    lives: 7 more threads per build of the sample, without end. Between commands no query
    runs, so they are shut (the waiting threads then end; a JVM thread calling again gets a
    new connection)."""
    callbacks = getattr(spark.sparkContext._gateway, "_callback_server", None)
    for connection in list(getattr(callbacks, "connections", ())):
        if connection.socket is not None:
            try:
                connection.socket.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # closed meanwhile


def _run(run_command: Callable[[list[str]], None], argv: list[str]) -> int:
    """The command's exit code; a bug's traceback goes to the client, not to the server."""
    try:
        run_command(argv)
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        raise
    except Exception:
        traceback.print_exc()
        return 1


