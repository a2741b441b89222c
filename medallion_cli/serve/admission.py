"""The server's clients, from the moment one connects: admitted within a few seconds and a
bounded request that carries the server's secret (anyone else is hung up on), told when
it waits behind other commands, queued, and watched for leaving (Ctrl-C); and, while its
command runs, its working folder, environment and output in place of the server's.
"""

from __future__ import annotations

import _thread
import io
import json
import os
import queue
import secrets
import signal
import socket
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

from .protocol import Message, _hang_up


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

    def __init__(self, send: Callable[[Message], None], kind: str, terminal: bool):
        super().__init__()
        self.send, self.kind, self.terminal = send, kind, terminal

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # click looks for a binary stream so
            raise TypeError("a text stream")
        if text:
            self.send({self.kind: text})
        return len(text)

    @property  # (typeshed has an attribute; io's own is a property without a setter)
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.terminal


@contextmanager
def _as_client(request: Message, send: Callable[[Message], None]) -> Iterator[None]:
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
    request: Message
    sending: threading.Lock = field(default_factory=threading.Lock)
    running: bool = False
    left: bool = False

    def send(self, message: Message) -> None:
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


# Clients admitted, in the order they came; None: a request that the server stop
Clients = queue.Queue[_Client | None]


AUTH_SECONDS = 5.0  # a client sends its request at once: a peer slower than this is dropped


MAX_REQUEST = 1 << 20  # bytes, read before the secret is checked


def _accept(listener: socket.socket, secret: str, clients: Clients, current: _Running,
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


def _admit(connection: socket.socket, secret: str, clients: Clients, current: _Running,
           watch: Callable[[_Client], None]) -> None:
    """A client with the secret is watched from now on, told when it waits for other commands,
    and queued (None for one that asks the server to stop); any other peer is hung up on."""
    request = _request(connection)
    if not isinstance(request, dict) or not secrets.compare_digest(
            str(request.get("secret")), secret):
        _hang_up(connection)  # not a client of this server's owner
        return
    if request.get("stop"):  # the server stops once the commands before this are done
        _hang_up(connection)
        clients.put(None)
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


def _request(connection: socket.socket) -> Message | None:
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


def _watch(client: _Client, interrupts: _Interrupts, cancel_jobs: Callable[[], None]) -> None:
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
