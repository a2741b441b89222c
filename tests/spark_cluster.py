"""A real Spark standalone cluster on loopback: one master and N workers started from the installed
pyspark's own `bin/spark-class`, for the cluster tests and the cluster benchmark.

spark-class execs the final `java` command, so each process id started here is the Master or
Worker JVM itself. Workers start executor JVMs (and those, Python workers) as children, so a
worker is killed or stopped together with every process below it; stop() ends with a sweep for
anything that carries this cluster's marker in its environment (children re-parented after their
worker died). Every process is stopped by its id.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

LOOPBACK = "127.0.0.1"
# C1-only JIT and the serial GC start a JVM about 2.5x faster on 2 cores; the master and
# workers only schedule, so their throughput does not matter.
DAEMON_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
MARKER = "MEDALLION_TEST_CLUSTER"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a live process, None when gone or a zombie."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()
    return None if fields[0] == "Z" else (int(fields[1]), int(fields[19]))


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for p in _pids():
        if stat := _stat(p):
            children.setdefault(stat[0], []).append(p)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _marked(marker: str) -> list[int]:
    needle = f"{MARKER}={marker}".encode()
    found = []
    for p in _pids():
        with contextlib.suppress(OSError):
            if needle in Path(f"/proc/{p}/environ").read_bytes().split(b"\0") and _stat(p):
                found.append(p)
    return found


def stop_pids(pids: list[int], timeout: float = 15.0) -> None:
    """SIGTERM, then SIGKILL what is left after `timeout`; a reused pid is never signalled."""
    started = {p: stat[1] for p in pids if (stat := _stat(p))}
    for pid in started:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    alive = started
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = {p: t for p, t in alive.items() if (s := _stat(p)) and s[1] == t}
    for pid, start in alive.items():
        if (s := _stat(pid)) and s[1] == start:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@dataclass
class Daemon:
    proc: subprocess.Popen
    port: int
    log: Path


@dataclass
class StandaloneCluster:
    folder: Path
    worker_cores: int = 1
    worker_memory: str = "1g"
    marker: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    master: Daemon | None = None
    ui_port: int = 0
    workers: list[Daemon] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://{LOOPBACK}:{self.master.port}"

    def state(self) -> dict:
        """The master's view: status, workers (with state ALIVE or DEAD), applications."""
        with urllib.request.urlopen(f"http://{LOOPBACK}:{self.ui_port}/json/", timeout=2) as r:
            return json.load(r)

    def alive_workers(self) -> set[int]:
        return {w["port"] for w in self.state().get("workers", []) if w.get("state") == "ALIVE"}

    def executor_pids(self, worker: int) -> list[int]:
        return [p for p in descendants(self.workers[worker].proc.pid)
                if b"CoarseGrainedExecutorBackend" in Path(f"/proc/{p}/cmdline").read_bytes()]

    def kill_worker(self, index: int) -> list[int]:
        """SIGKILL a worker and every process below it (its executor, Python workers), as a
        machine failure would; returns their ids."""
        worker = self.workers[index]
        tree = [worker.proc.pid] + descendants(worker.proc.pid)  # before re-parenting
        for pid in tree:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        worker.proc.wait(timeout=10)
        return tree

    def restart_worker(self, index: int, timeout: float = 60.0) -> None:
        self.workers[index] = self._worker(index)
        self._wait(lambda: self.workers[index].port in self.alive_workers(), timeout, "worker")

    def _env(self, extra_opts: str = "") -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
        conf = self.folder / "conf"  # empty: no spark-defaults.conf or spark-env.sh leaks in
        conf.mkdir(parents=True, exist_ok=True)
        env.update(SPARK_HOME=str(spark_home()), SPARK_CONF_DIR=str(conf),
                   SPARK_LOCAL_IP=LOOPBACK, SPARK_LOCAL_HOSTNAME=LOOPBACK,
                   SPARK_PUBLIC_DNS=LOOPBACK, SPARK_LOG_DIR=str(self.folder / "logs"),
                   SPARK_DAEMON_MEMORY="512m", SPARK_LAUNCHER_OPTS=DAEMON_JVM,
                   # no silent move to the next port when ours was taken meanwhile: fail, retry
                   SPARK_DAEMON_JAVA_OPTS=f"{DAEMON_JVM} -Dspark.port.maxRetries=0 {extra_opts}",
                   **{MARKER: self.marker})
        return env

    def _spawn(self, name: str, args: list[str], extra_opts: str = "") -> tuple:
        log = self.folder / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        port = free_port()
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args, "--host", LOOPBACK,
                 "--port", str(port)], env=self._env(extra_opts), stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.folder)
        return Daemon(proc, port, log)

    def _worker(self, index: int) -> Daemon:
        work = self.folder / f"work-{index}"
        work.mkdir(parents=True, exist_ok=True)
        return self._spawn(f"worker-{index}", [
            "org.apache.spark.deploy.worker.Worker", "--webui-port", str(free_port()),
            "--cores", str(self.worker_cores), "--memory", self.worker_memory,
            "--work-dir", str(work), self.master_url])

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                if ready():
                    return
            time.sleep(0.2)
        logs = "\n".join(d.log.read_text(errors="replace")[-2000:]
                         for d in [self.master, *self.workers] if d and d.log.exists())
        raise TimeoutError(f"the Spark {what} did not come up in {timeout:.0f}s:\n{logs}")

    def start(self, workers: int, timeout: float = 90.0) -> StandaloneCluster:
        self.ui_port = free_port()
        self.master = self._spawn("master", ["org.apache.spark.deploy.master.Master",
                                             "--webui-port", str(self.ui_port)],
                                  "-Dspark.master.rest.enabled=false")
        self._wait(lambda: self.state().get("status") == "ALIVE", timeout, "master")
        self.workers = [self._worker(i) for i in range(workers)]  # they start side by side
        self._wait(lambda: {w.port for w in self.workers} <= self.alive_workers(), timeout,
                   "workers")
        return self

    def stop(self) -> None:
        """Workers first (their shutdown kills executors), then the master, then strays."""
        for group in (self.workers, [self.master] if self.master else []):
            pids = [p for d in group if d.proc.poll() is None
                    for p in [d.proc.pid, *descendants(d.proc.pid)]]
            stop_pids(pids)
            for daemon in group:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    daemon.proc.wait(timeout=5)
        stop_pids(_marked(self.marker), timeout=5)


@contextlib.contextmanager
def standalone_cluster(workers: int = 2, folder: Path | None = None, worker_memory: str = "1g"):
    """A started cluster; every process it started is stopped on the way out."""
    cluster = StandaloneCluster(Path(folder or tempfile.mkdtemp(prefix="spark-cluster-")),
                                worker_memory=worker_memory)
    try:
        yield cluster.start(workers)
    finally:
        cluster.stop()


def driver_conf(cluster: StandaloneCluster, workers: int) -> dict[str, str]:
    """Spark conf for a driver on this machine using the cluster: executors of 1 core each on
    every worker, the driver reachable on loopback, and the session started only once all
    executors registered (so timings and kills see the whole cluster)."""
    return {"spark.driver.host": LOOPBACK, "spark.driver.bindAddress": LOOPBACK,
            "spark.executor.memory": "512m", "spark.executor.cores": "1",
            "spark.cores.max": str(workers),
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s"}


# For the tests' tables of a few rows: executors that start and compile as the daemons do, a
# shuffle partition per executor, and queries interpreted rather than compiled, as the suite's
# own profile has them (conftest.py). The sample's build on the cluster, on 2 cores: 144 s with
# Java's default JIT and GC and 4 partitions, 92 s with the first two, 81 s (against 90 s
# alternately) with the last.
SMALL_DATA = {"spark.executor.extraJavaOptions": DAEMON_JVM, "spark.sql.shuffle.partitions": 2,
              "spark.sql.codegen.wholeStage": False, "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


def add_cluster_target(profiles_file: Path, cluster: StandaloneCluster, workers: int,
                       name: str = "on-cluster", conf: dict | None = None) -> None:
    """A target after the profile's others: the delta-spark engine on this cluster, tables in
    the project's `warehouse` folder (which every process here shares), with `conf` added."""
    conf = {**driver_conf(cluster, workers), "spark.sql.shuffle.partitions": 4, **(conf or {})}
    profiles_file.write_text(profiles_file.read_text().rstrip("\n") + f"""
    {name}:
      engine: delta-spark
      warehouse: warehouse
      threads: 2
      spark:
        master: "{cluster.master_url}"
        conf: {json.dumps(conf)}
""")
