"""Trino on loopback for tests: another engine that finds Medallion's tables by name through the
shared Hive Metastore, with its Delta Lake connector (as a team's Trino would).

    trino = trino.start("thrift://127.0.0.1:9083", s3_env)   # None: no Java 24+ here
    trino.query("select count(*) from delta.gold.orders")
    trino.stop()

Trino 476 (the `trino` bundle: spark/maven/trino.pom.xml, its 821 MB archive extracted once
beside it) needs Java 24 or newer, which this machine's default Java 17 is not: the newest JDK
in /usr/lib/jvm (or MEDALLION_TRINO_JAVA_HOME) runs it. One node, coordinator and worker, bound
to 127.0.0.1, with the Delta Lake plugin alone (loading Trino's 60 others cost its start ~2x).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.processes import terminate
from ..spark import jars
from .loopback import LOOPBACK, free_port, wait_until_logged

JAVA_HOME_ENV = "MEDALLION_TRINO_JAVA_HOME"
JAVA_AT_LEAST = 24
JDKS = Path("/usr/lib/jvm")
READY_LINE = "======== SERVER STARTED ========"
# a small heap: the tests' tables are small; a serial collector, as the other test services'
JVM = ("-Xmx1G -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true "
       "-Djdk.attach.allowAttachSelf=true --enable-native-access=ALL-UNNAMED")


@dataclass
class Trino:
    port: int
    process: subprocess.Popen[bytes]
    home: Path

    @property
    def log(self) -> Path:
        return self.home / "server.log"

    def query(self, sql: str) -> list[list[Any]]:
        """The rows of `sql`, through Trino's own Python client."""
        import trino

        with trino.dbapi.connect(host=LOOPBACK, port=self.port, user="test") as connection:
            cursor = connection.cursor()
            cursor.execute(sql)
            return [list(row) for row in cursor.fetchall()]

    def stop(self) -> None:
        terminate(self.process)
        shutil.rmtree(self.home, ignore_errors=True)


def java_home() -> Path | None:
    """A JDK of Java 24 or newer: MEDALLION_TRINO_JAVA_HOME's, else the newest in /usr/lib/jvm."""
    given = os.environ.get(JAVA_HOME_ENV)
    found = [Path(given)] if given else sorted(JDKS.glob("*"), key=_major, reverse=True)
    return next((home for home in found if _major(home) >= JAVA_AT_LEAST
                 and (home / "bin/java").exists()), None)


def _major(home: Path) -> int:
    release = home / "release"
    text = release.read_text(errors="replace") if release.is_file() else ""
    version = re.search(r'^JAVA_VERSION="(\d+)', text, re.MULTILINE)
    return int(version.group(1)) if version else 0


def installed() -> Path:
    """Trino's folder (lib/, plugin/), extracted from the bundle's archive at first need."""
    bundle = jars.fetch("trino")
    archive = next(bundle.glob("trino-server-*.tar.gz"))
    folder = bundle / archive.name.removesuffix(".tar.gz")
    if not (folder / "lib").is_dir():
        staging = Path(tempfile.mkdtemp(prefix=".trino-", dir=bundle))
        try:
            with tarfile.open(archive) as tar:
                tar.extractall(staging, filter="tar")
            (staging / folder.name).rename(folder)  # atomic: another that finished first wins
        except OSError:
            if not (folder / "lib").is_dir():
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return folder


def catalog_properties(metastore_uri: str, s3_env: Mapping[str, str] | None) -> dict[str, str]:
    """The `delta` catalog: the metastore's tables, on local files or on S3 (reached as the
    standard AWS variables in s3_env say)."""
    properties = {"connector.name": "delta_lake", "hive.metastore.uri": metastore_uri,
                  "delta.register-table-procedure.enabled": "true",
                  "fs.native-local.enabled": "true", "local.location": "/"}
    if s3_env:
        properties |= {"fs.native-s3.enabled": "true",
                       "s3.endpoint": s3_env["AWS_ENDPOINT_URL"],
                       "s3.region": s3_env.get("AWS_REGION", "us-east-1"),
                       "s3.path-style-access": "true",
                       "s3.aws-access-key": s3_env["AWS_ACCESS_KEY_ID"],
                       "s3.aws-secret-key": s3_env["AWS_SECRET_ACCESS_KEY"]}
    return properties


def start(metastore_uri: str, s3_env: Mapping[str, str] | None = None,
          timeout: float = 240) -> Trino | None:
    """Start Trino with a `delta` catalog over the metastore; None when no Java 24+ is here."""
    java = java_home()
    if java is None:
        return None
    server = installed()
    home = Path(tempfile.mkdtemp(prefix="medallion-trino-"))
    plugins = home / "plugin"
    plugins.mkdir()
    (plugins / "delta-lake").symlink_to(server / "plugin" / "delta-lake")
    port = free_port()
    _properties(home / "etc/config.properties", {
        "coordinator": "true", "node-scheduler.include-coordinator": "true",
        "http-server.http.port": str(port), "discovery.uri": f"http://{LOOPBACK}:{port}",
        "plugin.dir": str(plugins), "catalog.config-dir": str(home / "etc/catalog"),
        "query.max-memory": "512MB", "query.max-memory-per-node": "512MB"})
    _properties(home / "etc/catalog/delta.properties", catalog_properties(metastore_uri, s3_env))
    command = [str(java / "bin/java"), *JVM.split(), "-Dnode.environment=test",
               f"-Dnode.id=medallion-{port}", f"-Dnode.data-dir={home / 'data'}",
               f"-Dnode.bind-ip={LOOPBACK}", f"-Dnode.internal-address={LOOPBACK}",
               f"-Dconfig={home / 'etc/config.properties'}",
               "-cp", f"{server / 'lib'}/*", "io.trino.server.TrinoServer"]
    with open(home / "server.log", "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=home)
    trino = Trino(port, process, home)
    wait_until_logged(trino.log, READY_LINE, process, timeout, "Trino", trino.stop, poll=0.5)
    return trino


def _properties(path: Path, values: Mapping[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{key}={value}\n" for key, value in values.items()))
