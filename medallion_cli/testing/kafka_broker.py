"""A real Kafka broker on loopback: one JVM in KRaft combined mode (broker and controller in one
process, no ZooKeeper), from the JARs of medallion_cli/spark/maven/kafka-broker.pom.xml, for trying
Kafka sources (examples/kafka_sample), the tests and the benchmarks. It is started by its own
`java` command, so the process id kept is the broker itself, and it is stopped by that id.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..core.processes import stop_pid, terminate
from ..spark import jars
from .loopback import LOG4J, LOOPBACK, free_port, wait_until_logged

BROKER_JVM = "-Xmx512m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"  # starts ~2x faster on 2 cores
READY_LINE = "Kafka Server started"



def server_properties(data: Path, port: int, controller_port: int) -> str:
    """One node that is broker and controller; every internal topic with one replica."""
    return "\n".join([
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.voters=1@{LOOPBACK}:{controller_port}",
        f"listeners=PLAINTEXT://{LOOPBACK}:{port},CONTROLLER://{LOOPBACK}:{controller_port}",
        f"advertised.listeners=PLAINTEXT://{LOOPBACK}:{port}",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name=PLAINTEXT",
        f"log.dirs={data}",
        "num.partitions=1",
        "offsets.topic.replication.factor=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1",
        "group.initial.rebalance.delay.ms=0",
        # Records are kept whatever their timestamp: replayed and test feeds carry past event
        # times, which the default 7-day retention would delete within minutes.
        "log.retention.ms=-1",
    ]) + "\n"


@dataclass
class KafkaBroker:
    bootstrap: str
    process: subprocess.Popen[bytes]
    home: Path

    @property
    def log(self) -> Path:
        return self.home / "broker.log"

    def stop(self) -> None:
        terminate(self.process)
        shutil.rmtree(self.home, ignore_errors=True)

    def record(self, path: Path) -> None:
        """Write where the broker is and its process id, for `stop_recorded` in a later process."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"bootstrap": self.bootstrap, "pid": self.process.pid,
                                    "home": str(self.home)}))


def stop_recorded(path: Path, timeout: float = 30) -> bool:
    """Stop the broker a `record` file names (SIGTERM, then SIGKILL), remove its data and the
    file; False when there was none running."""
    if not path.exists():
        return False
    state = json.loads(path.read_text())
    was_running = stop_pid(state["pid"], timeout=timeout)
    shutil.rmtree(state["home"], ignore_errors=True)
    path.unlink()
    return was_running


def _java(classpath: str, main: str, *args: str, log4j: Path) -> list[str]:
    return ["java", *BROKER_JVM.split(), f"-Dlog4j2.configurationFile={log4j}", "-cp",
            classpath, main, *args]


def start(timeout: float = 90, port: int | None = None, detached: bool = False) -> KafkaBroker:
    """Format a fresh log folder and start the broker (on `port`, or a free one); returns once
    it serves clients. detached: in a session of its own, to outlive the starting process."""
    classpath = str(jars.fetch("kafka-broker") / "*")
    home = Path(tempfile.mkdtemp(prefix="medallion-kafka-"))
    log4j = home / "log4j2.properties"
    log4j.write_text(LOG4J.format(log=home / "broker.log"))
    port, controller_port = port or free_port(), free_port()
    config = home / "server.properties"
    config.write_text(server_properties(home / "data", port, controller_port))
    cluster_id = subprocess.run(
        _java(classpath, "kafka.tools.StorageTool", "random-uuid", log4j=log4j),
        capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    subprocess.run(_java(classpath, "kafka.tools.StorageTool", "format", "-t", cluster_id,
                         "-c", str(config), log4j=log4j),
                   capture_output=True, text=True, check=True)
    process = subprocess.Popen(_java(classpath, "kafka.Kafka", str(config), log4j=log4j),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=detached)
    broker = KafkaBroker(f"{LOOPBACK}:{port}", process, home)
    wait_until_logged(broker.log, READY_LINE, process, timeout, "the Kafka broker", broker.stop)
    return broker
