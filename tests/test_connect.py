"""Targets that reach Spark through Spark Connect (`spark: {remote: sc://...}`): the profile's
key checked, and each way the connection fails said in one line naming the target, against real
Connect servers on loopback (the suite's, with Delta Lake; one without it and with a token).
Builds over Spark Connect are in test_connect_builds.py. These are delta-spark only: the
embedded engine writes its Delta log from this process, so a remote Spark is refused for it
(tested here too)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import write_project
from helpers import medallion

from medallion_cli.core.error_text import error_message
from medallion_cli.core.errors import CapabilityError, MedallionError, ProjectError
from medallion_cli.core.project import Target
from medallion_cli.load.profiles import load_target
from medallion_cli.materialize.streaming.server_batches import (
    ERROR_FILE,
    collect,
    server_batch,
    start_pauses,
    start_stream,
    worker_trouble,
)
from medallion_cli.materialize.streaming.tally import StreamTally
from medallion_cli.materialize.writing.writes import append_rows
from medallion_cli.spark.connect import check_server, connection_problem, shown
from medallion_cli.storage.files import write_text
from medallion_cli.testing import connect_server
from medallion_cli.testing.loopback import free_port

MODEL = {"models/one.sql": "select 1 as id"}


def profile(remote: str, engine: str = "delta-spark", extra: str = "",
            warehouse: str = "warehouse") -> str:
    return textwrap.dedent(f"""\
        test:
          target: connect
          outputs:
            connect:
              engine: {engine}
              warehouse: {warehouse}
              spark: {{remote: "{remote}"{extra}}}
        """)


def target(remote: str) -> Target:
    return Target("connect", "delta-spark", "/w", "local[*]", {}, 1, spark_remote=remote,
                  profiles_file="profiles/profiles.yml")


@pytest.mark.unit
@pytest.mark.parametrize("remote, engine, extra, said", [
    ("http://h:15002", "delta-spark", "", "it must be a Spark Connect URL"),
    ("sc://h:15002", "delta-spark", ", master: 'local[*]'", "and spark: master both say"),
])
def test_a_remote_spark_is_checked_as_the_profile_is_read(tmp_path, remote, engine, extra,
                                                          said):
    root = write_project(tmp_path / "p", MODEL, profile=profile(remote, engine, extra))
    with pytest.raises(ProjectError, match=said) as caught:
        load_target(root, "test", None, None)
    assert "profiles.yml" in str(caught.value.path)


@pytest.mark.unit
def test_an_engine_that_cannot_run_on_a_spark_connect_server_is_refused_before_it_starts(
        tmp_path):
    """The embedded engine keeps its Delta log in this process: spark: remote is refused by
    its declared capability, in one line naming profiles.yml and the engine to use."""
    from medallion_cli.engines import make_engine

    root = write_project(tmp_path / "p", MODEL, profile=profile("sc://h:15002", "embedded"))
    target = load_target(root, "test", None, None)
    with pytest.raises(CapabilityError, match="spark: remote needs an engine that runs on a "
                       "Spark Connect server, and the embedded engine writes its Delta log "
                       r"from this process \(delta-rs\)") as caught:
        make_engine(target)
    assert "profiles.yml" in str(caught.value.path) and "delta-spark" in caught.value.hint


@pytest.mark.unit
def test_over_spark_connect_the_delta_spark_engine_runs_batches_on_the_server(tmp_path):
    """Its capabilities over Connect: foreachBatch in the server's Python worker, check
    counts in a pass of their own; locally, here and by observation."""
    from medallion_cli.engines import make_engine

    remote = make_engine(target("sc://h:15002")).capabilities
    local = make_engine(target(None)).capabilities
    assert (remote.batches_on_server, remote.observes_rows) == (True, False)
    assert (local.batches_on_server, local.observes_rows) == (False, True)


@pytest.mark.unit
def test_a_remote_spark_is_read_from_the_profile_with_its_token_from_the_environment(
        tmp_path, monkeypatch):
    monkeypatch.setenv("CONNECT_TOKEN", "s3cret")
    remote = "sc://localhost:15002/;token={{ env_var('CONNECT_TOKEN') }}"
    root = write_project(tmp_path / "p", MODEL, profile=profile(remote))
    found = load_target(root, "test", None, None)
    assert found.spark_remote == "sc://localhost:15002/;token=s3cret"
    assert shown(found.spark_remote) == "sc://localhost:15002/;token=***"


@pytest.mark.unit
@pytest.mark.parametrize("error, said", [
    ('<_MultiThreadedRendezvous of RPC that terminated with: status = StatusCode.UNAVAILABLE '
     'details = "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: '
     'Failed to connect to remote host: Connection refused">',
     "did not answer (UNKNOWN: ipv4:127.0.0.1:1: Failed to connect to remote host: Connection "
     "refused)"),
    ('status = StatusCode.UNAUTHENTICATED details = "Invalid authentication token"',
     "refused the token (Invalid authentication token)"),
    ('status = StatusCode.UNAVAILABLE details = "failed to connect to all addresses; last error: '
     'UNKNOWN: Tls handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: WRONG_VERSION_NUMBER"',
     "does not speak TLS"),
])
def test_each_connection_problem_is_one_line_naming_the_target(error, said):
    # Engine-free: the texts are the gRPC client's, whichever engine asked.
    message = connection_problem(target("sc://h:1/;token=abc"), RuntimeError(error))
    assert message.startswith("target 'connect': the Spark Connect server at sc://h:1/;token=***")
    assert said in message and "\n" not in message and "abc" not in message


@pytest.mark.unit
def test_a_server_of_another_spark_version_is_refused_naming_both():
    older = SimpleNamespace(version="3.5.3")
    with pytest.raises(MedallionError, match=r"runs Spark 3\.5\.3, and this client is pyspark "
                                             r"4\.1\.\d+") as caught:
        check_server(older, target("sc://h:15002"))
    assert "pyspark[connect]==3.5.*" in caught.value.hint


@pytest.mark.unit
def test_a_session_is_not_collected_while_the_process_runs(tmp_path):
    """pyspark's Connect session, collected, shuts down the pool every session releases its
    results through, and hung a build when collected inside that pool's submit: sessions are
    kept. (In a process of its own: a Connect client switches pyspark to Connect there.)"""
    probe = subprocess.run([sys.executable, "-c", textwrap.dedent("""\
        import gc, weakref
        from medallion_cli.core.project import Target
        from medallion_cli.spark.connect import client_session
        target = Target("connect", "delta-spark", "w", "local[1]", {}, 1,
                        spark_remote="sc://127.0.0.1:1")
        first = client_session(target)  # pyspark keeps it: its default session
        made = weakref.ref(client_session(target))  # as a node's
        gc.collect()
        print("kept" if made() is not None else "collected")
        """)], capture_output=True, text=True, timeout=120)
    assert probe.stdout.strip() == "kept", probe.stdout + probe.stderr


@pytest.mark.unit
def test_a_servers_error_is_said_without_its_session_and_user_ids():
    said = error_message(RuntimeError(
        "(STREAM_FAILED) [session: 271852c4-ade4-4901-8e27-2fa68f9c412c] [userId: ] Query "
        "[id = 1] terminated with exception: [DIVIDE_BY_ZERO] Division by zero. SQLSTATE: 22012"))
    assert said == "[DIVIDE_BY_ZERO] Division by zero.", said


@pytest.mark.unit
def test_a_stray_worker_of_a_killed_servers_run_cannot_fail_the_next_run(tmp_path):
    """A server SIGKILLed mid-batch may leave its foreachBatch worker running, which reconnects
    to the server started after it and writes its failure late: into its own run's folder,
    which the next build's query does not read."""
    node = SimpleNamespace(name="bronze_orders", file="models/bronze_orders.sql")
    ctx = SimpleNamespace(
        project=SimpleNamespace(checkpoint_path=lambda file: str(tmp_path / "checkpoints")),
        graph=None, engine=None, full_refresh=False, selected=frozenset(), deferred={})
    killed = server_batch(ctx, node, None, StreamTally(), append_rows)
    tally = StreamTally()
    running = server_batch(ctx, node, None, tally, append_rows)
    stray = {"class": None, "message": "[NO_ACTIVE_SESSION] No active Spark session found."}
    write_text(None, f"{killed.reports}/{ERROR_FILE}", json.dumps(stray))
    collect(ctx, node, tally)
    assert tally.error is None and tally.batches == 0
    # the running query's own failure is still told
    write_text(None, f"{running.reports}/{ERROR_FILE}", json.dumps({**stray, "message": "own"}))
    collect(ctx, node, tally)
    assert str(tally.error) == "own"


@pytest.mark.unit
@pytest.mark.parametrize("spark_said, said", [
    ("[STREAMING_PYTHON_RUNNER_INITIALIZATION_FAILURE] ... No module named 'medallion_cli'",
     "the Spark Connect server's Python cannot import medallion_cli"),
    ("(STREAM_FAILED) [session: 27] [userId: ] Python worker exited unexpectedly (crashed)",
     "the Spark Connect server's Python worker running a micro-batch died"),
    ("java.net.SocketTimeoutException: Timed out while waiting for the Python worker to connect "
     "back", "the Spark Connect server's Python worker for this model's micro-batches did not "
     "connect back within Spark's 10 s, 4 time(s) in 35 s"),
])
def test_a_servers_python_worker_in_trouble_is_one_line_naming_the_target(spark_said, said):
    target = Target("connect", "delta-spark", "/w", "local[1]", {}, 1, spark_remote="sc://h:1")
    problem = worker_trouble(target, RuntimeError(spark_said), start_pauses(target.worker_wait))
    assert problem.message.startswith(f"target 'connect': {said}"), problem.message
    assert "\n" not in problem.message and problem.hint
    assert worker_trouble(target, RuntimeError("[DIVIDE_BY_ZERO] ...")) is None


class LateWorkers:
    """A stream's writer whose server's Python worker is late for the first `late` starts."""

    def __init__(self, late: int):
        self.late, self.starts = late, 0

    def start(self):
        self.starts += 1
        if self.starts <= self.late:
            raise RuntimeError("java.net.SocketTimeoutException: Timed out while waiting for "
                               "the Python worker to connect back")
        return "query"


@pytest.mark.unit
def test_a_busy_servers_late_python_worker_is_waited_for_as_long_as_the_target_says(
        monkeypatch, tmp_path):
    """Spark gives a worker 10 s a try (not a setting): the start is tried again after pauses
    doubling from 5 s, 35 s in all unless the target's spark: worker_wait says more (a server
    under load); past it, one line naming the setting."""
    from medallion_cli.materialize.streaming import server_batches

    slept = []
    monkeypatch.setattr(server_batches.time, "sleep", slept.append)

    def target(extra=""):
        root = write_project(tmp_path / str(len(extra)), {}, profile=profile("sc://h:1",
                                                                             extra=extra))
        return load_target(root, "test", None, None)
    assert start_stream(LateWorkers(3), target()) == "query" and slept == [5, 10, 20]
    slept.clear()
    patient = target(", worker_wait: 160")
    assert patient.worker_wait == 160
    assert start_stream(LateWorkers(5), patient) == "query" and slept == [5, 10, 20, 40, 80]
    with pytest.raises(MedallionError) as waited:
        start_stream(LateWorkers(4), target())
    assert "4 time(s) in 35 s" in waited.value.message
    assert "spark: worker_wait (now 35 s)" in waited.value.hint
    with pytest.raises(ProjectError, match=r"target 'connect': spark: worker_wait is 'soon'"):
        target(', worker_wait: "soon"')
    local = write_project(tmp_path / "local", {}, profile=textwrap.dedent("""\
        test:
          target: here
          outputs:
            here: {engine: embedded, spark: {master: "local[1]", worker_wait: 60}}
        """))
    with pytest.raises(ProjectError, match=r"target 'here': spark: worker_wait is for a "
                                           r"Spark Connect server \(spark: remote\)"):
        load_target(local, "test", None, None)


@pytest.fixture(scope="module")
def servers(spark_connect):
    """Two servers: the suite's, with Delta Lake; one without it and with a token."""
    plain = connect_server.start(delta=False, token="s3cret")
    try:
        yield SimpleNamespace(delta=spark_connect, plain=plain)
    finally:
        plain.stop()


def one_error_line(run) -> str:
    errors = [line for line in run.stdout.splitlines() + run.stderr.splitlines()
              if "Spark Connect" in line]
    assert errors, run.stdout + run.stderr
    assert "Traceback" not in run.stdout + run.stderr and "grpc" not in run.stderr.lower()
    assert "Warning" not in run.stderr  # pyspark's, of the retries it gave up
    return errors[0]


def test_a_server_is_reached_with_no_jvm_in_the_client_and_checked_by_debug(tmp_path, servers):
    root = write_project(tmp_path / "p", MODEL, profile=profile(servers.delta.url))
    probe = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""\
        import os
        from medallion_cli.load.profiles import load_target
        from medallion_cli.spark.connect import check_server, client_session
        target = load_target(__import__('pathlib').Path({str(root)!r}), 'test', None, None)
        print(check_server(client_session(target), target))
        def parent(pid):
            try:
                return open(f'/proc/{{pid}}/stat').read().split(')')[1].split()[1]
            except OSError:  # it ended while the others were read
                return None
        children = [p for p in os.listdir('/proc') if p.isdigit() and
                    parent(p) == str(os.getpid())]
        print(len(children))
        """)], capture_output=True, text=True, timeout=300)
    assert probe.returncode == 0, probe.stderr
    version, children = probe.stdout.split()
    assert version.startswith("4.1.") and children == "0", probe.stderr
    checked = medallion(root, "debug", timeout=300)
    assert f"Spark Connect server {servers.delta.url}" in checked.stdout
    assert f"Spark {version}" in checked.stdout
    assert "none needed here" in checked.stdout  # no JARs: the server has its own


def test_connection_problems_are_one_line_each(tmp_path, servers):
    cases = [
        (f"sc://127.0.0.1:{free_port()}", "did not answer ("),
        (f"sc://localhost:{servers.plain.port}/;token=wrong", "refused the token (Invalid"),
        (f"sc://127.0.0.1:{servers.plain.port}/;token=s3cret", "does not speak TLS"),
        (servers.plain.url, "has no Delta Lake"),
        (servers.delta.url + "|, conf: {spark.driver.memory: 2g}",
         "spark: conf spark.driver.memory is the Spark Connect server's own setting"),
    ]
    for n, (remote, said) in enumerate(cases):
        remote, _, extra = remote.partition("|")
        root = write_project(tmp_path / f"p{n}", MODEL, profile=profile(remote, extra=extra))
        run = medallion(root, "build", timeout=300)
        line = one_error_line(run)
        assert run.returncode != 0 and said in line, line
        assert "s3cret" not in run.stdout + run.stderr


@pytest.mark.unit
def test_a_server_that_stops_answering_mid_build_is_one_line_saying_what_stays():
    from medallion_cli.core.error_text import error_message

    grpc = ('<_MultiThreadedRendezvous of RPC that terminated with:\n\tstatus = '
            'StatusCode.UNAVAILABLE\n\tdetails = "failed to connect to all addresses; last '
            'error: UNKNOWN: ipv4:127.0.0.1:15002: Failed to connect to remote host: Connection '
            'refused"\n\tdebug_error_string = "UNAVAILABLE:failed to connect"\n>')
    assert error_message(RuntimeError(grpc)) == (
        "the Spark Connect server did not answer (UNKNOWN: ipv4:127.0.0.1:15002: Failed to "
        "connect to remote host: Connection refused), after retries; what was committed stays. "
        "Start the server again (or check the network), then build again: it goes on from "
        "each table's last commit")


@pytest.mark.unit
def test_a_warehouse_on_a_store_other_than_s3_is_refused_over_connect_for_now(tmp_path):
    root = write_project(tmp_path / "p", MODEL, profile=profile("sc://h:1", warehouse="gs://b/w"))
    with pytest.raises(ProjectError, match=r"a warehouse on gs://b/w is not built over Spark "
                       "Connect yet") as refused:
        load_target(root, "test", None, None)
    assert "S3" in refused.value.hint
    on_s3 = write_project(tmp_path / "s3", MODEL,
                          profile=profile("sc://h:1", warehouse="s3://b/w"))
    assert load_target(on_s3, "test", None, None).warehouse == "s3://b/w"


def test_the_dev_server_command_stops_its_server_when_killed():
    """`python -m medallion_cli.testing.connect_server &` then `kill %1`: its JVM goes too, and
    so do its temporary files, among them the folder Spark makes for each client session."""
    port = free_port()
    command = subprocess.Popen([sys.executable, "-m", "medallion_cli.testing.connect_server",
                                "--port", str(port)], stdout=subprocess.PIPE, text=True)
    server = None
    try:
        said = command.stdout.readline()
        assert f"Spark Connect server at sc://127.0.0.1:{port} (pid " in said, said
        server = int(said.split("(pid ")[1].split(")")[0])
        options = Path(f"/proc/{server}/cmdline").read_bytes().decode().split("\0")
        temp = Path(next(o for o in options if o.startswith("-Djava.io.tmpdir=")).split("=")[1])
        subprocess.run([sys.executable, "-c", "from pyspark.sql import SparkSession; "
                        f"SparkSession.builder.remote('sc://127.0.0.1:{port}').getOrCreate()"
                        ".range(1).collect()"], check=True, timeout=120)
        assert list((temp / "spark_connect_model_cache").iterdir())  # the session's
        command.terminate()
        assert command.wait(timeout=60) == 0
        assert not os.path.exists(f"/proc/{server}") or "Z" in open(
            f"/proc/{server}/stat").read().split(")")[1].split()[0]
        assert not temp.exists()
    finally:
        command.kill()
        if server is not None and os.path.exists(f"/proc/{server}"):
            os.kill(server, signal.SIGKILL)  # a failed check left it running


@pytest.mark.unit
def test_serve_is_refused_for_a_remote_target_in_one_line(tmp_path):
    from medallion_cli import commands

    root = write_project(tmp_path / "p", MODEL, profile=profile("sc://127.0.0.1:1"))
    with pytest.raises(MedallionError) as refused:
        commands.serve(commands.Invocation(project_dir=str(root)), lambda argv: None,
                       lambda project, port: None, lambda argv, code, seconds: None)
    assert "reaches Spark through a Spark Connect server" in refused.value.message
    assert "run commands directly" in refused.value.hint


@pytest.mark.unit
def test_a_missing_connect_client_is_said_in_pysparks_words(tmp_path):
    from medallion_cli.spark.connect import _missing

    assert _missing(ImportError("[PACKAGE_NOT_INSTALLED] grpcio >= 1.48.1 must be installed; "
                                "however, it was not found.")) == (
        "grpcio >= 1.48.1 must be installed; however, it was not found.")
    assert _missing(ModuleNotFoundError("x", name="grpc")) == "no module grpc"
