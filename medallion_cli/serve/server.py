"""`medallion serve`: one project's Spark kept running, so that its commands skip the JVM's start
and run on code the JVM has already compiled.

The server starts Spark for the project's target and waits on a loopback port, which it writes
with a secret to target/serve.json (readable by its owner only). While it runs, `medallion
build`, `run`, `seed`, `test` and `retry` in the project send their arguments, working folder
and the environment variables the project reads there instead of starting a JVM of their own
(a serve.json that another user owns, or others may write, is not trusted); the server runs the command in its
process, one command at a time (the warehouse has one writer anyway; a command that comes while
another runs says it waits, and Ctrl-C stops its waiting), and streams its output back; the
command's exit code is the client's. Each command loads the project again, so edited
models and macros are read as usual. A command whose target would start Spark differently (another
target, engine or Spark setting), or asks for --watch, --debug or --no-server, runs in a JVM of
its own, as without a server. Ctrl-C in the client cancels its command's Spark jobs on the
server, which keeps serving; Ctrl-C or SIGTERM on the server stops it.
"""

from __future__ import annotations

import _thread
import io
import json
import os
import queue
import re
import secrets
import shutil
import signal
import socket
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..core.errors import MedallionError

SERVED_FILE = "serve.json"


def served_file(project_dir: str) -> Path:
    """Where a project's server says where it listens (the target folder: project.target_dir)."""
    return Path(project_dir).resolve() / "target" / SERVED_FILE


# The client: `medallion build` and the others, when the project has a server.

def forward(project_dir: str, profiles_dir: str | None, target: str | None,
            argv: list[str]) -> int | None:
    """Run the command (argv, as typed after `medallion`) on the project's server: its exit
    code. None when there is no server, or it declined (another target): the caller runs it."""
    path = served_file(project_dir)
    served = _served(path)
    if served.get("pid") == os.getpid():  # the server itself, running a forwarded command
        return None
    stranger = _not_own(path)
    if stranger:
        print(f"Note: {path} is {stranger}, so it may not be the server of this user: "
              "ignored; running in a JVM of its own", file=sys.stderr)
        return None
    connection = _connect(served)
    if connection is None:
        return None
    terminal = sys.stdout.isatty()
    environment = project_environment(project_dir, profiles_dir)
    if terminal:  # the server's output stream is no terminal: tell it this one's width
        environment.setdefault("COLUMNS", str(shutil.get_terminal_size().columns))
    request = {"secret": served.get("secret"), "argv": argv, "cwd": os.getcwd(),
               "env": environment, "terminal": terminal, "project_dir": project_dir,
               "profiles_dir": profiles_dir, "target": target}
    with connection:
        connection.settimeout(None)
        try:
            connection.sendall(json.dumps(request).encode() + b"\n")
        except OSError:
            pass  # the server went away: said as it reads no answer
        return _relay(connection, served.get("pid"))


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


ENV_VAR_CALL = re.compile(r"""env_var\(\s*["']([^"']+)["']""")
PASSED_VARIABLES = ("COLUMNS", "TERM", "NO_COLOR", "FORCE_COLOR", "TZ")


def project_environment(project_dir: str, profiles_dir: str | None) -> dict[str, str]:
    """The variables a served command needs from the client: those the project's files read
    with env_var(), medallion's own (MEDALLION_*) and the terminal's; not the whole environment
    (a server gets nothing it does not use)."""
    root = Path(project_dir).resolve()
    files = [*root.glob("*.yml"), *Path(profiles_dir or root / "profiles").glob("*.yml")]
    for folder in ("models", "macros", "seeds", "tests", "snapshots", "analyses"):
        files += [p for p in (root / folder).rglob("*") if p.suffix in (".sql", ".yml", ".yaml")]
    named = set()
    for file in files:
        try:
            named.update(ENV_VAR_CALL.findall(file.read_text(errors="replace")))
        except OSError:
            continue
    return {name: value for name, value in os.environ.items()
            if name in named or name in PASSED_VARIABLES or name.startswith("MEDALLION_")}


def _relay(connection: socket.socket, pid) -> int | None:
    """Print the server's messages as they come; the command's exit code."""
    messages = connection.makefile("rb")
    announced = waiting = False
    while True:
        try:
            message = json.loads(messages.readline() or "null")
        except KeyboardInterrupt:
            if waiting:  # its command has not started: the server passes it over
                raise
            # Ctrl-C: the server cancels the command's Spark jobs when this side closes; its
            # report of what was cancelled still comes. A second Ctrl-C leaves without it.
            connection.shutdown(socket.SHUT_WR)
            continue
        except (OSError, ValueError):  # the server was killed mid-message
            message = None
        if message is None:
            print(f"Error: the server (medallion serve, pid {pid}) stopped " + (
                "during the command; the models it finished are committed and the others' "
                "tables are as they were: run it again" if announced else
                "before running the command; run it again"), file=sys.stderr)
            return 1
        if "declined" in message:
            print(f"Note: {message['declined']}; running in a JVM of its own", file=sys.stderr)
            return None
        if "waiting" in message:
            print(f"Note: the server (medallion serve, pid {pid}) is busy: {message['waiting']}."
                  " Ctrl-C stops waiting", file=sys.stderr)
            waiting = True
            continue
        waiting = False
        if not announced:
            print(f"(on the Spark of medallion serve, pid {pid})", file=sys.stderr)
            announced = True
        if "exit" in message:
            return message["exit"]
        stream = sys.stdout if "out" in message else sys.stderr
        stream.write(message.get("out", message.get("err")))
        stream.flush()


# The server.

@dataclass
class _Interrupts:
    """Why the main thread was interrupted: a client that left (its command is cancelled) or
    a signal to the server (it stops)."""

    client_left: bool = False
    stopping: bool = False


class _ClientStream(io.TextIOBase):
    """A text stream (sys.stdout or sys.stderr while a command runs) whose writes go to the
    client as messages of one kind; a terminal when the client's stdout is one, so progress
    and colors look as they would there. Writes after the client left are dropped."""

    def __init__(self, send: Callable[[dict], None], kind: str, terminal: bool):
        super().__init__()
        self.send, self.kind, self.terminal = send, kind, terminal

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # click looks for a binary stream so
            raise TypeError("a text stream")
        if text:
            self.send({self.kind: text})
        return len(text)

    @property
    def encoding(self) -> str:
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.terminal


@contextmanager
def _as_client(request: dict, send: Callable[[dict], None]):
    """The client's working folder, environment and output, while its command runs."""
    saved = (os.getcwd(), dict(os.environ), sys.stdout, sys.stderr)
    os.chdir(request["cwd"])
    os.environ.update(request["env"])  # over the server's own: the client sends what it reads
    sys.stdout = _ClientStream(send, "out", request["terminal"])
    sys.stderr = _ClientStream(send, "err", request["terminal"])
    try:
        yield
    finally:
        os.chdir(saved[0])
        os.environ.clear()
        os.environ.update(saved[1])
        sys.stdout, sys.stderr = saved[2], saved[3]


@dataclass
class _Client:
    """A client's connection and request, from when it arrives until its command's exit code
    is sent; whether its command runs, and whether the client left (closed its side)."""

    connection: socket.socket
    messages: io.BufferedReader
    request: dict
    sending: threading.Lock = field(default_factory=threading.Lock)
    running: bool = False
    left: bool = False

    def send(self, message: dict) -> None:
        with self.sending:
            try:
                self.connection.sendall(json.dumps(message).encode() + b"\n")
            except OSError:
                pass  # the client left; its command is being cancelled

    def close(self) -> None:
        _hang_up(self.connection)  # ends the read of _watch too


@dataclass
class _Running:
    """The command the server runs now (the main thread's; read by the accepting thread)."""

    argv: list[str] | None = None
    since: float = 0.0


def serve(project, engine, run_command: Callable[[list[str]], None],
          declined: Callable[[dict], str | None],
          on_ready: Callable[[int], None], on_command: Callable[[list[str], int, float], None]
          ) -> None:
    """Start the engine's Spark, then run clients' commands until SIGINT or SIGTERM.
    run_command: runs argv as the `medallion` command does (exits with SystemExit);
    declined: why a request's command must run elsewhere (None: here)."""
    path = served_file(str(project.root))
    other = _served(path)
    if other.get("pid") != os.getpid() and (answered := _connect(other)) is not None:
        answered.close()
        raise MedallionError(f"medallion serve (pid {other['pid']}) already serves this project",
                             path=path, hint="its commands run there; stop it first to start "
                                             "another (e.g. for another target)")
    engine.spark  # started now, not by the first command
    interrupts = _Interrupts()
    cancel_jobs = engine.spark.sparkContext.cancelAllJobs

    def interrupted(signum, frame):
        interrupts.stopping = interrupts.stopping or not interrupts.client_left
        interrupts.client_left = False
        cancel_jobs()
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, interrupted) for s in (signal.SIGINT, signal.SIGTERM)}
    listener = socket.create_server(("127.0.0.1", 0))
    secret = secrets.token_hex(16)
    _write_private(path, json.dumps({"pid": os.getpid(), "port": listener.getsockname()[1],
                                     "secret": secret, "target": project.target.name}))
    clients: queue.Queue[_Client] = queue.Queue()
    current = _Running()
    # Clients are taken in as they come, so that one that comes while a command runs hears
    # that it waits (and may stop waiting), instead of hanging in the listener's backlog.
    threading.Thread(target=_accept, daemon=True, args=(
        listener, secret, clients, current, lambda client: _watch(
            client, interrupts, cancel_jobs))).start()
    try:
        on_ready(listener.getsockname()[1])
        while not interrupts.stopping:
            try:
                client = clients.get()
                try:
                    _serve_one(client, run_command, declined, current, on_command)
                finally:
                    client.close()
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
        while not clients.empty():  # those still waiting hear that the server stopped
            clients.get().close()
        if _served(path).get("pid") == os.getpid():
            path.unlink()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


AUTH_SECONDS = 5.0  # a client sends its request at once: a peer slower than this is dropped
MAX_REQUEST = 1 << 20  # bytes, read before the secret is checked


def _accept(listener: socket.socket, secret: str, clients: queue.Queue, current: _Running,
            watch: Callable[[_Client], None]) -> None:
    """Take in connections until the listener closes, each admitted on a thread of its own, so
    that one slow or silent peer holds up nobody."""
    while True:
        try:
            connection, _ = listener.accept()
        except OSError:
            return  # the server stops
        threading.Thread(target=_admit, daemon=True, args=(
            connection, secret, clients, current, watch)).start()


def _admit(connection: socket.socket, secret: str, clients: queue.Queue, current: _Running,
           watch: Callable[[_Client], None]) -> None:
    """A client with the secret is watched from now on, told when it waits for other commands,
    and queued; any other peer is hung up on."""
    request = _request(connection)
    if not isinstance(request, dict) or not secrets.compare_digest(
            str(request.get("secret")), secret):
        _hang_up(connection)  # not a client of this server's owner
        return
    client = _Client(connection, connection.makefile("rb"), request)
    threading.Thread(target=watch, args=(client,), daemon=True).start()
    argv, ahead = current.argv, clients.qsize()
    if argv is not None:
        client.send({"waiting": f"`medallion {' '.join(argv)}` has run for "
                                f"{time.monotonic() - current.since:.0f} s; this command "
                                "runs after it" + (f" and {ahead} more" if ahead else "")})
    elif ahead:  # taken in, not started yet
        client.send({"waiting": f"{ahead} command(s) came before this one; it runs after them"})
    clients.put(client)


def _request(connection: socket.socket) -> dict | None:
    """The request line, read within AUTH_SECONDS in all and at most MAX_REQUEST bytes; None
    for a peer that sends less, more or slower (a byte every few seconds must not hold the
    connection open, nor a line without end grow the server)."""
    deadline, received = time.monotonic() + AUTH_SECONDS, bytearray()
    try:
        while b"\n" not in received:
            left = deadline - time.monotonic()
            if left <= 0 or len(received) > MAX_REQUEST:
                return None
            connection.settimeout(left)
            chunk = connection.recv(min(65536, MAX_REQUEST + 1 - len(received)))
            if not chunk:
                return None
            received += chunk
        connection.settimeout(None)
        line = bytes(received).split(b"\n", 1)[0]
        return json.loads(line) if len(line) <= MAX_REQUEST else None
    except (OSError, ValueError):
        return None


def _watch(client: _Client, interrupts: _Interrupts, cancel_jobs) -> None:
    """The client sends nothing after its request: anything more, or the connection closing,
    means it left (Ctrl-C). A waiting client is then passed over; a running command is
    cancelled, its Spark jobs from here, since the command's thread may wait on one, where no
    interrupt reaches it."""
    try:
        client.messages.read(1)
    except (OSError, ValueError):
        pass
    with client.sending:
        client.left = True
        if client.running:
            interrupts.client_left = True
            cancel_jobs()
            _thread.interrupt_main(signal.SIGINT)


def _serve_one(client: _Client, run_command, declined, current: _Running, on_command) -> None:
    with client.sending:
        if client.left:
            return  # it stopped waiting (Ctrl-C)
        client.running = True
    began = time.perf_counter()
    current.argv, current.since = client.request["argv"], time.monotonic()
    try:
        with _as_client(client.request, client.send):
            reason = declined(client.request)
            exit_code = None if reason else _run(run_command, client.request["argv"])
    finally:
        current.argv = None
        with client.sending:
            client.running = False  # from here, the client leaving cancels nothing
    if reason:
        client.send({"declined": reason})
        return
    client.send({"exit": exit_code})
    on_command(client.request["argv"], exit_code, time.perf_counter() - began)


def _hang_up(connection: socket.socket) -> None:
    """Close a connection now, for both sides (a plain close waits for its reader files)."""
    try:
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # the peer had gone
    connection.close()


def _close_callback_connections(spark) -> None:
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


def _run(run_command, argv: list[str]) -> int:
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


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (it holds the server's secret)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
        handle.write(text)


def _served(path: Path) -> dict:
    """What a project's serve.json says (empty when there is none)."""
    try:
        served = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return served if isinstance(served, dict) else {}


def _connect(served: dict) -> socket.socket | None:
    """A connection to the server the file names, or None when it is gone (killed without
    removing its file: its pid is not running, or nothing listens on its port)."""
    try:
        os.kill(served["pid"], 0)
        return socket.create_connection(("127.0.0.1", served["port"]), timeout=2)
    except (OSError, KeyError, TypeError, ValueError):
        return None
