"""`medallion serve`: a project's commands run on its warm Spark, give the same tables and exit
codes as on their own, can be cancelled, and fall back to a JVM of their own when the server
cannot run them."""

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from conftest import profile_for, read_delta
from helpers import (
    BATCH_1,
    BATCH_2,
    FAILING_CAST,
    MODELS,
    expected_state,
    land,
    medallion,
)

from medallion_cli.serve.protocol import server_kind

SLOW = """\
    {{ config(materialized='table') }}
    select sum(id) as total from range(100000000000)
"""


def run(*args) -> subprocess.CompletedProcess:
    return medallion(None, *args)


def start_server(root) -> subprocess.Popen:
    server = medallion(root, "serve", wait=False)
    deadline = time.monotonic() + 300
    while not (root / "target/serve.json").is_file():
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            pytest.fail(f"medallion serve did not start: {server.communicate()[0]}")
        time.sleep(0.2)
    return server


def served_pid(result: subprocess.CompletedProcess, server: str = "medallion serve"
               ) -> int | None:
    """The server's pid, when the command ran there (it says so on stderr)."""
    marker = f"(on the Spark of {server}, pid "
    line = next((x for x in result.stderr.splitlines() if x.startswith(marker)), None)
    return int(line.removeprefix(marker).rstrip(")")) if line else None


def python_threads(pid: int) -> int:
    """A process's threads named as the process (its Python threads; delta-rs and the JVM name
    theirs), counted once the count has held for half a second: a command's own threads (its
    client's watcher, py4j's callback connections) end just after the client heard its exit
    code, a moment later on a busy machine."""
    name = Path(f"/proc/{pid}/comm").read_text()

    def named_as_process(task: Path) -> bool:
        try:
            return (task / "comm").read_text() == name
        except (FileNotFoundError, ProcessLookupError):
            return False  # it ended meanwhile: gone from the listing, or gone while read

    counts, deadline = [], time.monotonic() + 30
    while len(counts) < 6 or len(set(counts[-6:])) > 1:
        if time.monotonic() > deadline:
            pytest.fail(f"the server's Python threads did not settle: {counts}")
        counts.append(sum(map(named_as_process, Path(f"/proc/{pid}/task").iterdir())))
        time.sleep(0.1)
    return counts[-1]


@pytest.mark.one_engine("the server's routing, waiting, Ctrl-C and secret do not depend on the "
                        "engine it builds with")
def test_commands_run_on_the_served_spark_and_can_be_cancelled(project, engine_name):
    other_target = profile_for(engine_name) + """\
    other:
      engine: embedded
      warehouse: elsewhere
      spark:
        master: "local[1]"
"""
    root = project({**MODELS, "models/gold/slow.sql": SLOW}, profile=other_target)
    on = ("--project-dir", str(root))
    land(root, "001.json", BATCH_1)
    server = start_server(root)
    try:
        first = run("build", "--exclude", "slow", *on)
        assert first.returncode == 0, first.stdout + first.stderr
        assert served_pid(first) == server.pid, first.stderr
        assert "OK" in first.stdout and "silver_orders" in first.stdout
        threads = python_threads(server.pid)
        land(root, "002.json", BATCH_2)
        second = run("build", "--exclude", "slow", *on)
        assert second.returncode == 0 and served_pid(second) == server.pid, second.stderr
        # Builds leave no threads behind (py4j's, one per streaming query, are shut).
        assert python_threads(server.pid) <= threads
        assert read_delta(root / "warehouse/silver/silver_orders") == expected_state(
            BATCH_1 + BATCH_2)
        assert len(read_delta(root / "warehouse/bronze/bronze_orders")) == 9

        # A model failing on the server: its one-line error and exit code 1, as on its own.
        (root / "models/silver/typed.sql").write_text(FAILING_CAST)
        failed = run("run", "-s", "typed", *on)
        assert failed.returncode == 1 and served_pid(failed) == server.pid
        assert "[CAST_INVALID_INPUT]" in failed.stdout and "Traceback" not in failed.stdout
        assert not list(root.glob("warehouse/silver/typed/_delta_log/*.json"))  # no commit
        (root / "models/silver/typed.sql").unlink()

        # Commands that come while another runs say that they wait; Ctrl-C stops one waiting
        # (the server passes it over), and Ctrl-C in the running one cancels its Spark jobs.
        slow = medallion(None, "run", "-s", "slow", *on, wait=False, merged=False)
        started = next((line for line in iter(slow.stdout.readline, "")
                        if line.startswith("Running")), None)  # the server runs it
        assert started, slow.communicate()
        waiting = medallion(None, "build", "--exclude", "slow", *on, wait=False, merged=False)
        assert "is busy: `medallion run -s slow" in waiting.stderr.readline()
        quitting = medallion(None, "seed", *on, wait=False, merged=False)
        note = quitting.stderr.readline()
        assert note.startswith(f"Note: the server (medallion serve, pid {server.pid}) is busy: "
                               f"`medallion run -s slow {' '.join(on)}` has run for "), note
        assert note.rstrip().endswith("; this command runs after it and 1 more. Ctrl-C stops "
                                      "waiting"), note
        quitting.send_signal(signal.SIGINT)
        assert quitting.wait(timeout=30) == 1 and quitting.stderr.read() == "\nAborted!\n"
        slow.send_signal(signal.SIGINT)
        out, err = slow.communicate(timeout=120)
        assert slow.returncode == 130 and "Stopped by Ctrl-C" in out, out + err
        assert not list(root.glob("warehouse/gold/slow/_delta_log/*.json"))
        again = subprocess.CompletedProcess(waiting.args, 0, *waiting.communicate(timeout=300))
        assert waiting.returncode == 0 and served_pid(again) == server.pid, again.stderr
        assert "UP TO DATE" in again.stdout

        # Another target starts Spark differently: that command runs in a JVM of its own
        # (here it has nothing to do: no seeds).
        elsewhere = run("seed", "--target", "other", *on)
        assert elsewhere.returncode == 0 and served_pid(elsewhere) is None
        assert "target 'other' starts it differently; running in a JVM of its own" in \
            elsewhere.stderr

        # Only the server's owner can use it: a request without its secret is dropped.
        port = json.loads((root / "target/serve.json").read_text())["port"]
        with socket.create_connection(("127.0.0.1", port), timeout=30) as stranger:
            stranger.sendall(json.dumps({"secret": "guess", "argv": ["clean"]}).encode() + b"\n")
            assert stranger.recv(100) == b""
        assert (root / "target").is_dir()

        # One server per project.
        second_server = run("serve", *on)
        assert second_server.returncode == 2
        assert f"medallion serve (pid {server.pid}) already serves this project" in \
            second_server.stderr
    finally:
        server.send_signal(signal.SIGTERM)
        said = server.communicate(timeout=120)[0]
    assert server.returncode == 0, said
    assert f"medallion build --exclude slow --project-dir {root}: exit 0" in said
    assert f"medallion run -s typed --project-dir {root}: exit 1" in said
    assert "medallion seed --project-dir" not in said  # the command that stopped waiting
    assert not (root / "target/serve.json").exists()

    # With the server gone, commands run on their own again.
    land(root, "003.json", [{"order_id": 9, "status": "placed", "op": "I", "seq": 1}])
    alone = run("build", "--exclude", "slow", *on)
    assert alone.returncode == 0 and served_pid(alone) is None, alone.stderr
    assert {r["order_id"] for r in read_delta(root / "warehouse/silver/silver_orders")} == \
        {1, 2, 4, 5, 6, 9}


@pytest.mark.unit
def test_a_server_that_died_leaves_commands_running_on_their_own(project):
    """Engine-independent (no Spark starts: the project has nothing to build): a serve.json
    whose server is gone (killed, so it could not remove it) is passed over."""
    root = project({"models/a.sql": "select 1 as x"})
    (root / "target").mkdir()
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens there once this is closed
    (root / "target/serve.json").write_text(json.dumps({"pid": 1, "port": port, "secret": "x"}))
    result = run("seed", "--project-dir", str(root))
    assert result.returncode == 0, result.stderr
    assert served_pid(result) is None and "Nothing selected." in result.stdout


@pytest.mark.unit
@pytest.mark.parametrize("said, error", [
    ([], "before running the command; run it again"),
    ([{"waiting": "`medallion build` has run for 3 s; this command runs after it"}],
     "before running the command; run it again"),
    ([{"out": "Running 1 node(s)\n"}],
     "during the command; the models it finished are committed and the others' tables are as "
     "they were: run it again"),
])
def test_a_server_that_stops_mid_command_is_one_error_line(project, said, error):
    """Engine-independent (the client's side; no Spark starts): a server that goes away
    before its answer ends leaves the command with exit 1 and one line saying so."""
    import os
    import threading

    root = project({"models/a.sql": "select 1 as x"})
    (root / "target").mkdir()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        def answer_and_close():
            connection, _ = listener.accept()
            connection.makefile("rb").readline()  # the request
            for message in said:
                connection.sendall(json.dumps(message).encode() + b"\n")
            connection.close()

        threading.Thread(target=answer_and_close, daemon=True).start()
        (root / "target/serve.json").write_text(json.dumps(
            {"pid": os.getpid(), "port": listener.getsockname()[1], "secret": "x",
             "kind": server_kind()}))
        result = run("seed", "--project-dir", str(root))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == f"Error: the server (medallion serve, pid {os.getpid()}) stopped {error}"
    assert "Traceback" not in result.stderr


def fake_server(root, answer=({"exit": 0},)):
    """A listener named by the project's serve.json, as a server's would be: returns the
    requests it got (a list the caller reads) and the file."""
    import os
    import threading

    (root / "target").mkdir(exist_ok=True)
    listener = socket.create_server(("127.0.0.1", 0))
    got = []

    def serve():
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            line = connection.makefile("rb").readline()
            if not line:  # a client that connected to look, and left
                connection.close()
                continue
            got.append(json.loads(line))
            for message in answer:
                connection.sendall(json.dumps(message).encode() + b"\n")
            connection.close()

    threading.Thread(target=serve, daemon=True).start()
    path = root / "target/serve.json"
    path.write_text(json.dumps({"pid": os.getpid(), "port": listener.getsockname()[1],
                                "secret": "x", "kind": server_kind()}))
    path.chmod(0o600)
    return got, path, listener


@pytest.mark.unit
def test_a_serve_json_of_another_user_or_writable_by_others_is_not_trusted(project):
    """Engine-independent (no Spark starts: nothing to build). Such a file could name any
    listener, which would get the command and its variables and could fake its exit code."""
    root = project({"models/a.sql": "select 1 as x"})
    got, path, listener = fake_server(root, answer=({"out": "faked\n"}, {"exit": 0}))
    with listener:
        for change in (lambda: path.chmod(0o666), lambda: os.chown(path, 54321, -1)):
            path.chmod(0o600)
            change()
            result = run("seed", "--project-dir", str(root))
            assert result.returncode == 0 and "faked" not in result.stdout, result.stdout
            assert "Nothing selected." in result.stdout
            assert f"Note: {path} is " in result.stderr and "ignored" in result.stderr
        assert got == []


@pytest.mark.unit
def test_a_served_command_sends_only_the_variables_the_project_reads(project, monkeypatch):
    root = project({"models/a.sql": "select '{{ env_var(\"MY_REGION\") }}' as region"})
    got, path, listener = fake_server(root)
    monkeypatch.setenv("MY_REGION", "eu")
    monkeypatch.setenv("MEDALLION_WAREHOUSE", "wh")
    monkeypatch.setenv("SOME_CLOUD_SECRET", "do-not-send")
    with listener:
        result = run("seed", "--project-dir", str(root))
    assert result.returncode == 0, result.stderr
    [request] = got
    assert request["env"]["MY_REGION"] == "eu" and request["env"]["MEDALLION_WAREHOUSE"] == "wh"
    assert "SOME_CLOUD_SECRET" not in request["env"] and "PATH" not in request["env"]


@pytest.mark.unit
def test_a_slow_or_endless_peer_is_hung_up_on_and_holds_up_no_client(monkeypatch):
    """Engine-independent: the server's admission of connections, before any command runs.
    A peer dribbling a byte every fifth of a second, and one sending a line without end, are
    hung up on within the time a request is given (5 s; 2 s here), while a client with the
    secret is taken in at once meanwhile."""
    import queue
    import threading

    from medallion_cli.serve import admission
    from medallion_cli.serve.admission import MAX_REQUEST, _accept, _Running

    monkeypatch.setattr(admission, "AUTH_SECONDS", 2.0)
    AUTH_SECONDS = admission.AUTH_SECONDS

    clients = queue.Queue()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        threading.Thread(target=_accept, daemon=True, args=(
            listener, "s3cret", clients, _Running(), lambda client: None)).start()
        slow = socket.create_connection(("127.0.0.1", port))
        endless = socket.create_connection(("127.0.0.1", port))
        began = time.monotonic()
        slow.sendall(b"{")
        client = socket.create_connection(("127.0.0.1", port))
        client.sendall(json.dumps({"secret": "s3cret", "argv": ["seed"]}).encode() + b"\n")
        taken = clients.get(timeout=5)
        assert taken.request["argv"] == ["seed"] and time.monotonic() - began < AUTH_SECONDS
        with pytest.raises(OSError):  # hung up on before it sent 8 times what is read
            for _ in range(8 * MAX_REQUEST // 65536):
                endless.sendall(b"x" * 65536)
        with pytest.raises(OSError):
            while time.monotonic() - began < 3 * AUTH_SECONDS:
                slow.sendall(b" ")
                time.sleep(0.2)
        assert time.monotonic() - began < 2 * AUTH_SECONDS
        for peer in (slow, endless, client, taken.connection):
            peer.close()


@pytest.mark.unit
def test_a_stopping_server_turns_away_who_waits_behind_a_request_to_stop():
    """Engine-independent: the clients still queued when the server stops are hung up on, a
    request that it stop among them (queued as None) included, and the server's own clean-up
    after them still runs (it raised AttributeError there)."""
    import queue

    from medallion_cli.serve.admission import _Client
    from medallion_cli.serve.server import _turn_away

    clients = queue.Queue()
    peers = []
    for waiting in (True, None, True):
        if waiting is None:
            clients.put(None)
            continue
        ours, theirs = socket.socketpair()
        clients.put(_Client(ours, ours.makefile("rb"), {"argv": ["build"]}))
        peers.append(theirs)
    _turn_away(clients)
    assert clients.empty()
    for peer in peers:
        peer.settimeout(5)
        assert peer.recv(1) == b""  # hung up on
        peer.close()
