"""A Spark Connect server on loopback, for the tests, the benchmarks and trying a target whose
`spark: {remote: ...}` names one: a local Spark driver running Spark's Connect server (pyspark
ships its JAR) with Delta Lake's JARs (the `delta` bundle, fetched with Maven when not cached)
and SQL extension. Started by pyspark's own spark-submit, which ends in `exec java`: the process
id kept is the server's JVM, and it is stopped by that id.

    python -m medallion_cli.testing.connect_server [--port N] [--no-delta]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..core.processes import terminate
from ..core.project import Target
from ..engines.delta_spark.settings import DELTA_CONF
from ..spark import jars
from ..spark.conf import spark_conf
from .loopback import LOOPBACK, free_port, wait_until_logged

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
READY_LINE = "Spark Connect server started at"
# The server's token, from its environment rather than its command line (which `ps` shows).
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"


@dataclass
class ConnectServer:
    port: int
    process: subprocess.Popen[bytes]
    home: Path
    token: str | None = None

    @property
    def url(self) -> str:
        """The URL a client gives. With a token the client speaks TLS, except to the host
        `localhost`, to which it sends the token in plain text: this server has no TLS."""
        if self.token:
            return f"sc://localhost:{self.port}/;token={self.token}"
        return f"sc://{LOOPBACK}:{self.port}"

    @property
    def log(self) -> Path:
        return self.home / "server.log"

    def stop(self) -> None:
        terminate(self.process)
        shutil.rmtree(self.home, ignore_errors=True)


def command(port: int, home: Path, delta: bool = True, cores: int = 2,
            conf: dict[str, str] | None = None,
            bundles: tuple[str, ...] = ()) -> list[str]:
    """spark-submit's arguments for a server on 127.0.0.1:port, set up as medallion sets up a
    local driver (spark/conf.py: listing, time zone, Python workers on this interpreter, which
    run foreachBatch functions), warehouse files in `home`; `conf`: more server settings (S3A's
    for a store), `bundles`: more JARs (medallion's bundles: "s3")."""
    import pyspark

    driver = Target("connect-server", "delta-spark", str(home), f"local[{cores}]",
                    {"spark.sql.shuffle.partitions": str(cores)}, cores)
    base = spark_conf(driver)
    # Spark's own log4j settings: the server says it is ready in its log, at INFO. Its
    # temporary files in `home`, which stop() removes: Spark's shuffle and block files, and
    # the folder its ML cache makes for every client session (spark_connect_model_cache),
    # which Spark never removes (a build over Connect opens one session per node).
    (home / "tmp").mkdir(exist_ok=True)
    base["spark.driver.extraJavaOptions"] = " ".join([
        *(option for option in base["spark.driver.extraJavaOptions"].split()
          if "log4j" not in option), f"-Djava.io.tmpdir={home / 'tmp'}"])
    base = {**base,
            "spark.connect.grpc.binding.address": LOOPBACK,
            "spark.connect.grpc.binding.port": str(port),
            # as medallion sets a local driver's: Delta's 50 tasks to rebuild a table's state
            # from its log cost 3-4 s per small table's write or read on 2 cores, 1 task 0.6 s
            "spark.databricks.delta.snapshotPartitions": "1",
            **(DELTA_CONF if delta else {})}
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    found = [str(jar) for bundle in ("delta",) * delta + bundles
             for jar in jars.jar_files(jars.fetch(bundle))]
    # `conf` may hold a store's keys: in a file only this user reads, not on the command line
    settings = home / "server.properties"
    settings.touch(mode=0o600)
    settings.write_text("".join(f"{key}={value}\n" for key, value in (conf or {}).items()))
    return [str(submit), "--class", SERVER_CLASS, "--master", f"local[{cores}]",
            "--name", "medallion-connect-server", "--properties-file", str(settings),
            *(["--jars", ",".join(found)] * bool(found)),
            *[arg for key, value in base.items() for arg in ("--conf", f"{key}={value}")]]


def start(port: int | None = None, delta: bool = True, token: str | None = None,
          timeout: float = 120, detached: bool = False, env: dict[str, str] | None = None,
          conf: dict[str, str] | None = None, bundles: tuple[str, ...] = ()) -> ConnectServer:
    """Start a server (on `port`, or a free one) and return once it takes clients. token: the
    one clients must send. detached: in a session of its own, to outlive this process. env:
    more environment for the server and its Python workers. conf, bundles: as command's."""
    import pyspark

    home = Path(tempfile.mkdtemp(prefix="medallion-connect-"))
    port = port or free_port()
    env = {**os.environ, "SPARK_HOME": str(Path(pyspark.__file__).parent),
           "PYSPARK_PYTHON": sys.executable, **(env or {})}
    env.pop(TOKEN_ENV, None)
    if token:
        env[TOKEN_ENV] = token
    with open(home / "server.log", "wb") as log:
        process = subprocess.Popen(command(port, home, delta, conf=conf, bundles=bundles),
                                   stdout=log, stderr=subprocess.STDOUT,
                                   env=env, cwd=home, start_new_session=detached)
    server = ConnectServer(port, process, home, token)
    wait_until_logged(server.log, READY_LINE, process, timeout, "the Spark Connect server",
                      server.stop)
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=15002)
    parser.add_argument("--no-delta", action="store_true", help="a server without Delta Lake")
    args = parser.parse_args()
    server = start(args.port, delta=not args.no_delta)

    def stop(*_: object) -> None:  # `kill` (as a job started with & is stopped) too, not only Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:  # a kill that comes as the line is said, once read, still stops the server
        print(f"Spark Connect server at {server.url} (pid {server.process.pid}); Ctrl-C or "
              f"kill {os.getpid()} stops it", flush=True)
        server.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
