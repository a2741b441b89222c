"""An S3 server on loopback for tests and demos: moto's (pure Python, from PyPI), in a process
of its own that is stopped by its pid, with every request it serves logged, so that a test can
count what a build asked of the store.

    server = s3_server.start()          # http://127.0.0.1:<port>, bucket-less
    server.create_bucket("lake")
    os.environ.update(server.aws_env())
    ...
    server.requests()                    # Counter({'GET': 40, 'PUT': 31, 'LIST': 20, ...})
    server.stop()

Run as a module it serves until stopped, optionally with a bucket holding a folder's files:
`python -m medallion_cli.testing.s3_server 9000 --bucket lake --upload landing` (the sample's
landing zone at s3://lake/landing; any key works).
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.processes import running

# Any key works against moto; these are what the tests and the README's demo set.
ACCESS_KEY, SECRET_KEY, REGION = "medallion-test", "medallion-test-secret", "us-east-1"
REQUEST = re.compile(r'"(?:\x1b\[[\d;]*m)*([A-Z]+) (/[^ ]*) HTTP/1\.1')


@dataclass
class S3Server:
    endpoint: str
    process: subprocess.Popen[bytes] | None  # None: a server in this process (serve_here)
    log: Path

    def aws_env(self) -> dict[str, str]:
        """The standard AWS variables that point a client at this server."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION}

    def client(self) -> Any:  # (boto3 makes its clients' classes at run time)
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION)

    def create_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def upload_folder(self, folder: Path, url: str) -> None:
        """Copy a local folder's files under s3://bucket/prefix."""
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        client = self.client()
        for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
            key = "/".join(filter(None, [prefix, str(path.relative_to(folder))]))
            client.upload_file(str(path), bucket, key)

    def requests(self) -> collections.Counter[str]:
        """The requests served so far by kind: GET, PUT, HEAD, DELETE, POST, and LIST (a GET
        of a bucket with a prefix or list-type)."""
        counts: collections.Counter[str] = collections.Counter()
        for match in REQUEST.finditer(self.log.read_text(errors="replace")):
            method, path = match.groups()
            listing = method == "GET" and ("list-type" in path or path.count("/") == 1)
            counts["LIST" if listing else method] += 1
        return counts

    def fault(self, status: int = 0, under: str = "", delay: float = 0.0, times: int = 0,
              method: str = "") -> None:
        """From now on, requests whose key or listed prefix has `under` in it (all: ""), of
        one HTTP method ("": any), are answered with the error status (503: S3's SlowDown; 0:
        served) after `delay` seconds; only the next `times` of them when it is not 0.
        fault() ends it."""
        query = urllib.parse.urlencode({"status": status, "under": under, "delay": delay,
                                        "times": times, "method": method})
        urllib.request.urlopen(f"{self.endpoint}{FAULTS}?{query}", data=b"", timeout=10).close()

    def stop(self) -> None:
        """Stop the server, and remove its request log's folder (megabytes a test run)."""
        if self.process is None:  # this process's own: it stops with it
            return
        if running(self.process.pid):
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.log.parent, ignore_errors=True)


class Cuttable:
    """A TCP relay on loopback in front of a server, that can be cut (new connections refused,
    open ones dropped) and restored on the same port: a store, or the network to it, going
    away mid-build and coming back with its data."""

    def __init__(self, upstream: str):
        self.upstream = upstream.removeprefix("http://").split(":")
        self.port = 0
        self.open: list[socket.socket] = []
        self.listener: socket.socket  # (restore's)
        self.restore()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port, self.listener = listener.getsockname()[1], listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        self.listener.close()
        for sock in self.open:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        self.open.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            server = socket.create_connection((self.upstream[0], int(self.upstream[1])))
            self.open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        """One direction of a connection; when either side ends, both sockets are closed
        (the other direction's pump then ends too): a relay that only shut them down kept
        every connection's two sockets open, 1,400 in a test process, whose py4j callback
        server then got a socket numbered past select()'s limit and never answered."""
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
                if sock in self.open:
                    self.open.remove(sock)


FAULTS = "/_medallion_faults"
ERRORS = {500: ("InternalError", "We encountered an internal error. Please try again."),
          503: ("SlowDown", "Please reduce your request rate.")}


class Faulty:
    """moto's application behind a switch (S3Server.fault): a store that is slow, or answers
    500 or 503 for some keys (S3 throttles per prefix), while the rest of it works."""

    def __init__(self, app: Any):
        self.app, self.status, self.under, self.delay, self.times = app, 0, "", 0.0, 0
        self.method = ""
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any],
                 start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == FAULTS:
            asked = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
            self.status = int(asked.get("status", ["0"])[0])
            self.under = asked.get("under", [""])[0]
            self.delay = float(asked.get("delay", ["0"])[0])
            self.times = int(asked.get("times", ["0"])[0]) or -1  # -1: no end
            self.method = asked.get("method", [""])[0]
            start_response("204 No Content", [])
            return [b""]
        # a listing names its prefix in the query: prefix=busy%2Fsilver%2F...
        request = urllib.parse.unquote(f"{path}?{environ.get('QUERY_STRING', '')}")
        with self.lock:
            hit = (self.under in request and self.times != 0
                   and self.method in ("", environ.get("REQUEST_METHOD")))
            if hit and self.times > 0:
                self.times -= 1
        if hit:
            time.sleep(self.delay)
        if not hit or not self.status:
            answer: Iterable[bytes] = self.app(environ, start_response)
            return answer
        environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        code, message = ERRORS.get(self.status, ("Error", "injected"))
        start_response(f"{self.status} {code}", [("Content-Type", "application/xml")])
        return [f"<Error><Code>{code}</Code><Message>{message}</Message></Error>".encode()]


def start(timeout: float = 60) -> S3Server:
    """Start a server on a free loopback port; returns once it answers."""
    log = Path(tempfile.mkdtemp(prefix="medallion-s3-")) / "requests.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", __name__], stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(r"^serving (http://127\.0\.0\.1:\d+)$", log.read_text(errors="replace"),
                          re.M)
        if found:
            return S3Server(found.group(1), process, log)
        if process.poll() is not None:
            raise RuntimeError(f"the S3 server exited: {log.read_text()[-2000:]}")
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"the S3 server did not start in {timeout:.0f} s: {log}")


def serve(port: int = 0, bucket: str | None = None, upload: str | None = None) -> None:
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    class FaultyMotoServer(ThreadedMotoServer):
        def _server_entry(self) -> None:  # moto's, with its application behind Faulty
            self._server = make_server(
                self._ip_address, self._port,
                Faulty(DomainDispatcherApplication(create_backend_app)), True,
                request_handler=MotoRequestHandler)
            self._server_ready_event.set()
            self._server.serve_forever()

    server = FaultyMotoServer(ip_address="127.0.0.1", port=port, verbose=True)
    server.start()
    host, bound = server.get_host_and_port()
    if bucket:
        here = S3Server(f"http://{host}:{bound}", None, Path(os.devnull))
        here.create_bucket(bucket)
        if upload:
            here.upload_folder(Path(upload), f"s3://{bucket}/{Path(upload).name}")
    print(f"serving http://{host}:{bound}", flush=True)
    def stopped(*_: object) -> None:
        server.stop()
        os._exit(0)

    signal.signal(signal.SIGTERM, stopped)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m medallion_cli.testing.s3_server")
    parser.add_argument("port", type=int, nargs="?", default=0)
    parser.add_argument("--bucket", help="a bucket to create")
    parser.add_argument("--upload", help="a folder whose files go under s3://BUCKET/<its name>")
    options = parser.parse_args()
    try:
        import moto  # noqa: F401  (the test extra's, not the package's)
    except ImportError:
        raise SystemExit("moto is not installed here: pip install 'moto[server]' (or the "
                         "package's test extra, pip install -e '.[test]'), then run this again")
    serve(options.port, options.bucket, options.upload)
