"""A real Hive Metastore on loopback for tests: Hive's standalone metastore 3.1.3 (the JARs of
medallion_cli/spark/maven/hive-metastore.pom.xml) on a throwaway PostgreSQL cluster, both on
127.0.0.1, so that Spark's Hive catalog (`spark.sql.catalogImplementation=hive` with
`spark.hadoop.hive.metastore.uris`) and Thrift clients meet a metastore as clusters run it.

    metastore = hive_metastore.start()   # thrift://127.0.0.1:<port>
    ...
    metastore.stop()                     # the metastore, then PostgreSQL, then their folder

The metastore JVM runs our LoopbackMetastore.java (beside this file), which serves Hive's own
handler on 127.0.0.1 only: Hive's HiveMetaStore.main would bind every interface.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..core.processes import stop_pid, terminate
from ..spark import jars
from ..storage.object_store import aws_settings, s3a_conf
from .loopback import LOG4J, LOOPBACK, free_port

# as kafka_broker's (starts ~2x faster on 2 cores); IPv4: `ss` shows 127.0.0.1, not ::ffff:127.0.0.1
METASTORE_JVM = ("-Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC "
                 "-Djava.net.preferIPv4Stack=true")
LAUNCHER = Path(__file__).resolve().parent / "LoopbackMetastore.java"
READY_LINE = "serving the metastore on"
ARCHIVE = "hive-standalone-metastore-*-bin.tar.gz"
# 3.1.3's schema version is 3.1.0: the script its schematool would run, without a JVM for it
SCHEMA = "/scripts/metastore/upgrade/postgres/hive-schema-3.1.0.postgres.sql"
OS_USER = "postgres"  # initdb and postgres refuse to run as root
ROLE, DATABASE = "hive", "metastore"
# Durability is of no use to a throwaway cluster, and fsyncs are slow on a busy test machine.
POSTGRES_CONF = """
listen_addresses = '{host}'
port = {port}
unix_socket_directories = '{sockets}'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 40
"""
SITE = """<configuration>
{properties}
</configuration>
"""



def site_properties(postgres_port: int, warehouse: Path) -> dict[str, str]:
    return {
        "javax.jdo.option.ConnectionURL":
            f"jdbc:postgresql://{LOOPBACK}:{postgres_port}/{DATABASE}",
        "javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
        "javax.jdo.option.ConnectionUserName": ROLE,
        "javax.jdo.option.ConnectionPassword": ROLE,
        "metastore.warehouse.dir": warehouse.as_uri(),
        # The schema is loaded, never created by DataNucleus: a script of another version fails.
        "metastore.schema.verification": "true",
        # The default names hive-exec's class, which the standalone metastore does not have.
        "metastore.expression.proxy":
            "org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy",
        # As the 3.1.3 distribution's own metastore-site.xml: no ACID housekeeping threads.
        "metastore.task.threads.always":
            "org.apache.hadoop.hive.metastore.events.EventCleanerTask",
        # A test needs a few connections, not 200 idle threads and 2 x 10 database sessions.
        "metastore.server.min.threads": "2",
        "metastore.server.max.threads": "100",
        "datanucleus.connectionPool.maxPoolSize": "4",
    }


@dataclass
class HiveMetastore:
    uri: str  # thrift://127.0.0.1:<port>, for hive.metastore.uris
    warehouse: Path  # the metastore's warehouse (metastore.warehouse.dir), in `home`
    home: Path
    process: subprocess.Popen[bytes] | None = None
    postgres_pid: int | None = None

    @property
    def log(self) -> Path:
        return self.home / "metastore.log"

    def stop(self) -> None:
        """Stop the metastore, then PostgreSQL (by its pid), and remove their folder."""
        if self.process is not None:
            terminate(self.process)
        if self.postgres_pid is not None:
            _stop_postgres(self.postgres_pid)
        shutil.rmtree(self.home, ignore_errors=True)

    def record(self, path: Path) -> None:
        """Write where the metastore is and its processes' ids, for `stop_recorded` later."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({
            "uri": self.uri, "pid": self.process.pid if self.process else None,
            "postgres_pid": self.postgres_pid, "home": str(self.home)}))


def _stop_postgres(pid: int, timeout: float = 30) -> bool:
    # SIGINT: PostgreSQL's fast shutdown (ends sessions, no waiting for clients)
    return stop_pid(pid, signal.SIGINT, timeout)


def stop_recorded(path: Path, timeout: float = 30) -> bool:
    """Stop what a `record` file names (metastore, then PostgreSQL), remove its folder and the
    file; False when no metastore was running."""
    if not path.exists():
        return False
    state = json.loads(path.read_text())
    was_running = state["pid"] is not None and stop_pid(state["pid"], timeout=timeout)
    if state["postgres_pid"] is not None:
        _stop_postgres(state["postgres_pid"], timeout)
    shutil.rmtree(state["home"], ignore_errors=True)
    path.unlink()
    return was_running


def _tail(*logs: Path, size: int = 3000) -> str:
    return "\n".join(f"--- {log}:\n{log.read_text(errors='replace')[-size:]}"
                     for log in logs if log.exists())


def _postgres_programs() -> Path:
    """The folder of initdb, pg_ctl and psql: the PATH's pg_ctl's, else the newest of Debian's
    and Ubuntu's /usr/lib/postgresql/<version>/bin (they keep the server's programs off PATH)."""
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).resolve().parent
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
                   key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0)
    if not found:
        raise RuntimeError("PostgreSQL's server programs (initdb, pg_ctl) were not found: install "
                           "PostgreSQL (e.g. apt-get install postgresql), or put them on PATH")
    return found[-1].parent


def _run(command: list[str], what: str, *logs: Path, cwd: Path | None = None,
         stdin: bytes | None = None) -> None:
    run = subprocess.run(command, input=stdin, capture_output=True, cwd=cwd, check=False)
    if run.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {run.returncode}):\n"
                           f"{(run.stdout + run.stderr).decode(errors='replace')[-3000:]}"
                           f"{_tail(*logs)}")


def _start_postgres(metastore: HiveMetastore, programs: Path, timeout: float) -> int:
    """Create a cluster in home/postgres, start it on a free loopback port (its pid kept on
    `metastore`); returns the port."""
    folder, data = metastore.home / "postgres", metastore.home / "postgres" / "data"
    folder.mkdir()
    as_user: list[str] = []
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam(OS_USER)
        except KeyError:
            raise RuntimeError(f"running as root, PostgreSQL needs an OS user '{OS_USER}' to "
                               "run as (initdb refuses root): useradd -r postgres") from None
        os.chown(folder, owner.pw_uid, owner.pw_gid)
        metastore.home.chmod(0o711)  # the cluster's user passes through to its folder, no more
        as_user = ["runuser", "-u", OS_USER, "--"]
    # trust: on loopback and a socket in the folder, for a throwaway cluster; -N: no fsync
    _run([*as_user, str(programs / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
          "-N", "-E", "UTF8", "--locale=C"], "initdb", cwd=folder)
    port = free_port()
    with open(data / "postgresql.conf", "a") as conf:
        conf.write(POSTGRES_CONF.format(host=LOOPBACK, port=port, sockets=folder))
    log = folder / "server.log"
    _run([*as_user, str(programs / "pg_ctl"), "-D", str(data), "-l", str(log), "-w",
          "-t", str(max(int(timeout), 1)), "start"], "starting PostgreSQL", log, cwd=folder)
    metastore.postgres_pid = int((data / "postmaster.pid").read_text().split()[0])
    return port


def _schema(bundle: Path) -> bytes:
    """The metastore's PostgreSQL schema script, read out of the distribution's archive."""
    archive = next(bundle.glob(ARCHIVE), None)
    if archive is not None:
        with tarfile.open(archive, "r|gz") as tar:  # a stream: the script is near its start
            for member in tar:
                if member.name.endswith(SCHEMA):
                    script = tar.extractfile(member)
                    if script is not None:
                        return script.read()
    raise RuntimeError(f"no {SCHEMA.lstrip('/')} in {archive or bundle / ARCHIVE}: delete "
                       f"{bundle} and fetch it again")


def _load_schema(programs: Path, port: int, schema: bytes, log: Path) -> None:
    """The metastore's role and database, and its tables, in one psql session."""
    psql = shutil.which("psql", path=str(programs)) or shutil.which("psql") or "psql"
    script = (f"CREATE ROLE {ROLE} LOGIN PASSWORD '{ROLE}';\n"
              f"CREATE DATABASE {DATABASE} OWNER {ROLE};\n"
              f"\\connect {DATABASE} {ROLE}\n").encode() + schema
    _run([psql, "-X", "-q", "-w", "-v", "ON_ERROR_STOP=1", "-h", LOOPBACK, "-p", str(port),
          "-U", "postgres", "-d", "postgres", "-f", "-"], "loading the metastore schema", log,
         stdin=script)


def launcher_command(class_path: list[str], conf: Path) -> list[str]:
    """java running LoopbackMetastore.java from its source (JEP 330): no class files to build or
    keep; compiling it costs ~1 s of CPU at each start (1.8 s on a busy 2-core machine)."""
    return ["java", *METASTORE_JVM.split(),
            f"-Dlog4j.configurationFile={conf / 'log4j2.properties'}",
            "-cp", os.pathsep.join([*class_path, str(conf)]), str(LAUNCHER)]


def s3_class_path() -> list[str]:
    """S3A (the s3 bundle: hadoop-aws and the AWS SDK) and the Apache HTTP client the SDK
    sends with, which the shaded Hadoop client hides: Spark's own copy."""
    spark_jars = jars.pyspark_folder() / "jars"
    return [str(jars.fetch("s3") / "*"), *(str(jar) for pattern in (
        "httpclient-*.jar", "httpcore-*.jar") for jar in spark_jars.glob(pattern))]


def s3_properties(env: Mapping[str, str]) -> dict[str, str]:
    """S3A for the metastore, from the AWS variables: it opens each table's folder when the
    table is registered (Hadoop's, the same settings as a build's Spark: object_store.py)."""
    return {key.removeprefix("spark.hadoop."): value
            for key, value in s3a_conf(aws_settings(env)).items()}


def start(timeout: float = 180, port: int | None = None, detached: bool = False,
          s3_env: Mapping[str, str] | None = None) -> HiveMetastore:
    """Start PostgreSQL and the metastore (on `port`, or a free one), both on 127.0.0.1 and in a
    new temporary folder; returns once the metastore's port answers. detached: the metastore in
    a session of its own (PostgreSQL always is: pg_ctl starts it so), to outlive the starting
    process (record, then stop_recorded). s3_env: the AWS variables of an S3 store whose tables
    it registers too (S3A's JARs then join its class path)."""
    bundle = jars.fetch("hive-metastore")
    class_path = [str(bundle / "*"), *(s3_class_path() if s3_env is not None else [])]
    home = Path(tempfile.mkdtemp(prefix="medallion-hms-"))
    port = port or free_port()
    metastore = HiveMetastore(f"thrift://{LOOPBACK}:{port}", home / "warehouse", home)
    deadline = time.monotonic() + timeout
    try:
        programs = _postgres_programs()
        postgres_port = _start_postgres(metastore, programs, timeout)
        _load_schema(programs, postgres_port, _schema(bundle), home / "postgres" / "server.log")
        metastore.warehouse.mkdir()
        conf = home / "conf"
        conf.mkdir()
        (conf / "metastore-site.xml").write_text(SITE.format(properties="\n".join(
            f"  <property><name>{k}</name><value>{v}</value></property>"
            for k, v in {**site_properties(postgres_port, metastore.warehouse),
                         **(s3_properties(s3_env) if s3_env is not None else {})}.items())))
        (conf / "log4j2.properties").write_text(LOG4J.format(log=metastore.log))
        out = home / "metastore.out"  # the JVM's own output: the ready line, a crash's cause
        with open(out, "wb") as sink:
            metastore.process = subprocess.Popen(
                [*launcher_command(class_path, conf), str(port)], stdout=sink,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=detached)
        while not (READY_LINE in out.read_text(errors="replace") and _answers(port)):
            if metastore.process.poll() is not None or time.monotonic() > deadline:
                state = ("exited" if metastore.process.poll() is not None
                         else f"did not answer in {timeout:.0f} s")
                raise RuntimeError(f"the Hive Metastore {state}:\n{_tail(out, metastore.log)}")
            time.sleep(0.2)
    except BaseException:
        metastore.stop()
        raise
    return metastore


def _answers(port: int) -> bool:
    try:
        socket.create_connection((LOOPBACK, port), timeout=1).close()
    except OSError:
        return False
    return True
