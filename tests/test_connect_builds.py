"""Projects built over Spark Connect (a target's `spark: {remote: sc://...}`) against a real
server on loopback: the delta-spark engine with no JVM in the client, streaming micro-batches
run by the server's Python workers, the tables a local build makes, exactly once when the
server is killed mid-build. The client runs in a process of its own, as a user's does (the
suite's own process has a local Spark). delta-spark only: the embedded engine writes its
Delta log from the client's process, so a remote Spark is refused for it (test_connect.py).
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
from conftest import read_delta, write_project
from helpers import (
    BATCH_1,
    BATCH_2,
    BATCH_3,
    MODELS,
    expected_state,
    land,
    s3_tables,
    sample_copy,
    silver,
)

from medallion_cli.storage.object_store import aws_settings, s3a_conf
from medallion_cli.testing import connect_server


def connect_profile(remote: str) -> str:
    return textwrap.dedent(f"""\
        test:
          target: connect
          outputs:
            connect:
              engine: delta-spark
              warehouse: warehouse
              threads: 2
              spark: {{remote: "{remote}", conf: {{spark.sql.shuffle.partitions: 2}}}}
        """)


def descendants(pid: int) -> list[str]:
    """The command names of every process below `pid`."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:]
            parents[int(entry.name)] = (int(rest.split()[1]), name)
    found, frontier = [], {pid}
    while frontier:
        children = {p for p, (parent, _) in parents.items() if parent in frontier}
        found += [parents[p][1] for p in children]
        frontier = children
    return found


def medallion(root, *args, env=None, wait=True):
    """`medallion` in a process of its own; with wait, (result, every process name seen below
    it while it ran)."""
    command = [sys.executable, "-m", "medallion_cli.cli", *args, "--project-dir", str(root)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env={**os.environ, **(env or {})})
    if not wait:
        return process
    seen: set[str] = set()
    watching = threading.Thread(target=lambda: [
        seen.update(descendants(process.pid)) or time.sleep(0.1)
        for _ in iter(lambda: process.poll() is None, False)], daemon=True)
    watching.start()
    output, _ = process.communicate(timeout=600)
    watching.join()
    return subprocess.CompletedProcess(command, process.returncode, output), seen


def delta_logs(s3, bucket: str, prefix: str) -> list[str]:
    """The commits of the project's tables under s3://bucket/prefix/ (not of the event log,
    which records each run)."""
    pages = s3.client().get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                  Prefix=f"{prefix}/")
    keys = [item["Key"] for page in pages for item in page.get("Contents", [])]
    return sorted(key for key in keys if "/_delta_log/" in key and key.endswith(".json")
                  and not key.startswith(f"{prefix}/_medallion/"))


@pytest.mark.slow("the whole sample over Connect and S3: the default tier builds over Connect "
                  "in test_connect.py and here (Ctrl-C, a server without medallion)")
def test_the_sample_builds_over_connect_on_s3_with_no_jvm_here_and_the_tables_of_a_local_build(
        s3, tmp_path, local_sample):
    """Landing files and warehouse in a bucket (moto's S3 on loopback). The server reaches it
    with settings of its own, as a cluster's admin sets them: S3A's for Spark, the AWS variables
    for its Python workers (which write each micro-batch's report beside the checkpoint); this
    machine with its AWS variables (delta-rs for the logs, pyarrow for the files beside the
    tables), and no JVM. (The sample over Connect in a local folder, which client and server
    share only on one machine, once had a test of its own; the other tests here build there.)"""
    aws = s3.aws_env()
    sample = sample_copy(tmp_path / "lake")
    bucket = s3.create_bucket(f"connect-{uuid.uuid4().hex[:8]}")
    s3.upload_folder(sample / "landing", f"s3://{bucket}/landing")
    shutil.rmtree(sample / "landing")  # only the bucket has the files
    env = {**aws, "MEDALLION_WAREHOUSE": f"s3://{bucket}/lake",
           "MEDALLION_LANDING": f"s3://{bucket}/landing"}
    server = connect_server.start(conf=s3a_conf(aws_settings(aws)), bundles=("s3",), env=aws)
    try:
        env["MEDALLION_SPARK_REMOTE"] = server.url
        built, seen = medallion(sample, "build", "-t", "connect", env=env)
        assert built.returncode == 0, built.stdout
        said = server.log.read_text(errors="replace")
        written = delta_logs(s3, bucket, "lake")
        again, _ = medallion(sample, "build", "-t", "connect", env=env)
    finally:
        server.stop()
    assert "Done. 25 success, 0 up to date" in built.stdout, built.stdout
    assert "java" not in seen, seen  # the server runs Spark; no JVM was started here
    assert "1 batch(es); 2 malformed row(s) kept in _corrupt_record" in built.stdout
    # the server was told to drop each node's session; only the first (which checked the
    # server) waits for its idle timeout
    opened = set(re.findall(r"sessionId: ([0-9a-f-]+) accessed", said))
    closed = set(re.findall(r"Closing session with userId: .* and sessionId: ([0-9a-f-]+)", said))
    assert len(opened) > 20 and len(opened - closed) == 1, (len(opened), len(closed))
    assert "Done. 0 success, 25 up to date" in again.stdout, again.stdout
    assert written and delta_logs(s3, bucket, "lake") == written  # nothing new committed
    assert aws["AWS_SECRET_ACCESS_KEY"] not in built.stdout + again.stdout
    assert not any(p.name.startswith("warehouse") for p in sample.iterdir())
    assert s3_tables(s3, f"s3://{bucket}/lake") == local_sample.tables("delta-spark")


# Makes a server's first Python worker for a query's batches start 12 s late, as on a machine
# too busy to start Python processes: Spark waits 10 s for a worker to connect back.
LATE_FIRST_WORKER = """\
import time
from pathlib import Path

if b"foreach_batch_worker" in Path("/proc/self/cmdline").read_bytes():
    try:
        Path(__file__).with_name("late").touch(exist_ok=False)
        time.sleep(12)
    except FileExistsError:
        pass
"""


@pytest.mark.slow("a fault case: two servers started, one killed")
def test_a_server_killed_mid_build_loses_and_doubles_nothing(tmp_path):
    """The server (its JVM) is SIGKILLed once bronze's first batch (of three: one file each)
    is committed: the client says so in one line; against a new server, busy as it starts
    (its first worker for a query's batches is late), the next build commits each event once."""
    server = connect_server.start()
    port = server.port
    root = write_project(tmp_path / "p", MODELS, profile=connect_profile(server.url))
    for number, batch in enumerate((BATCH_1, BATCH_2, BATCH_3)):
        land(root, f"{number:03d}.json", batch)
    try:
        build = medallion(root, "build", wait=False)
        first = root / "warehouse/bronze/bronze_orders/_delta_log/00000000000000000000.json"
        deadline = time.monotonic() + 300
        while not first.exists():
            assert build.poll() is None and time.monotonic() < deadline, build.stdout.read()
            time.sleep(0.05)
        os.kill(server.process.pid, signal.SIGKILL)
        output, _ = build.communicate(timeout=120)
    finally:
        server.stop()
    assert build.returncode == 1, output
    assert "Traceback" not in output and "grpc" not in output.lower(), output
    failed = [line for line in output.splitlines() if "Spark Connect server" in line]
    assert failed and "did not answer" in failed[0], output.splitlines()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "sitecustomize.py").write_text(LATE_FIRST_WORKER)
    server = connect_server.start(port, env={"PYTHONPATH": str(busy)})
    try:
        rebuilt, _ = medallion(root, "build")
        said = server.log.read_text(errors="replace")
    finally:
        server.stop()
    assert rebuilt.returncode == 0, rebuilt.stdout
    assert (busy / "late").exists()  # the late worker's query was started again
    assert "Timed out while waiting for the Python worker to connect back" in said
    assert silver(root) == expected_state(BATCH_1 + BATCH_2 + BATCH_3)
    assert len(read_delta(root / "warehouse/bronze/bronze_orders")) == len(
        BATCH_1 + BATCH_2 + BATCH_3)


def test_ctrl_c_interrupts_the_servers_queries_and_says_what_was_committed(spark_connect,
                                                                           tmp_path):
    root = write_project(tmp_path / "p", {
        "models/a.sql": "select 1 as id",
        "models/slow.sql": "select count(*) as n from range(100000000000), {{ ref('a') }}",
        "models/after_slow.sql": "select n from {{ ref('slow') }}"},
        profile=connect_profile(spark_connect.url))
    logged = len(spark_connect.log.read_text(errors="replace"))
    build = medallion(root, "build", wait=False)
    lines = []
    try:
        for line in build.stdout:
            lines.append(line)
            if " model a " in line:
                break
        # slow's query runs on the server: its range's second task (every other job here
        # reads or writes one small file, in one task)
        server_says(spark_connect, logged, "Running task 1.0 in stage")
        build.send_signal(signal.SIGINT)
        output = "".join(lines) + build.communicate(timeout=60)[0]
    finally:
        build.kill()
    assert build.returncode == 130, output
    assert "Stopped by Ctrl-C. 1 success, 0 up to date, 0 warn, 1 error, 1 skipped" in output
    assert "  committed: a v0\n" in output and "Traceback" not in output
    # the server's query was interrupted, not left running
    server_says(spark_connect, logged, "Executor killed task")


def server_says(server, logged: int, text: str, timeout: float = 60) -> None:
    """Wait until the server's log, past its first `logged` characters, has `text`."""
    deadline = time.monotonic() + timeout
    while text not in server.log.read_text(errors="replace")[logged:]:
        assert time.monotonic() < deadline, f"the server's log never said {text!r}"
        time.sleep(0.2)


def test_a_server_whose_python_lacks_medallion_fails_a_streaming_model_in_one_line(tmp_path):
    # The server's Python workers find a medallion_cli that cannot be imported, as where it
    # is not installed
    shadow = tmp_path / "shadow/medallion_cli"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'medallion_cli'\", name='medallion_cli')")
    server = connect_server.start(env={"PYTHONPATH": str(shadow.parent)})
    try:
        root = write_project(tmp_path / "p", MODELS, profile=connect_profile(server.url))
        land(root, "000.json", BATCH_1)
        built, _ = medallion(root, "build")
    finally:
        server.stop()
    assert built.returncode == 1 and "Traceback" not in built.stdout, built.stdout
    assert ("models/bronze/bronze_orders.sql: target 'connect': the Spark Connect server's "
            "Python cannot import medallion_cli") in built.stdout, built.stdout
    assert "pip install medallion-cli==" in built.stdout
