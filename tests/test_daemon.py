"""medallion's daemon: a command that finds no server starts one that keeps the project's Spark
warm for the next commands, which run on it with the same tables and exit codes; it stops when
asked, when idle, or when its serve.json goes, and is replaced when the next command would start
Spark otherwise. On in a terminal, off in scripts unless asked for."""

import json
import os
import subprocess
import sys

import pytest
from conftest import read_delta
from helpers import (
    BATCH_1,
    BATCH_2,
    FAILING_CAST,
    MODELS,
    expected_state,
    land,
    medallion,
)
from test_serve import fake_server, served_pid

from medallion_cli.core.errors import MedallionError
from medallion_cli.core.processes import ended, running
from medallion_cli.serve import daemon

STARTED = "Started medallion's daemon (pid "


def run(root, *args, **env) -> subprocess.CompletedProcess:
    return medallion(root, *args, env=env)


def daemon_pid(result: subprocess.CompletedProcess) -> int | None:
    """The daemon's pid, when the command ran on one (it says so on stderr)."""
    return served_pid(result, "medallion's daemon")


@pytest.mark.one_engine("the daemon's start, reuse and stop are the same whatever it builds")
def test_a_build_leaves_a_daemon_the_next_commands_run_on_until_it_is_stopped(
        project, engine_name):
    root = project(MODELS)
    land(root, "001.json", BATCH_1)
    first = run(root, "build", MEDALLION_DAEMON="on")
    pid = daemon_pid(first)
    try:
        assert first.returncode == 0, first.stderr
        assert f"{STARTED}{pid}): it keeps this project's Spark warm" in first.stderr
        assert json.loads((root / "target/serve.json").read_text())["pid"] == pid
        assert "OK" in first.stdout and "silver_orders" in first.stdout
        assert running(pid)

        # The increment, a command of its own, runs on the daemon: no JVM of its own.
        land(root, "002.json", BATCH_2)
        second = run(root, "build", MEDALLION_DAEMON="on")
        assert second.returncode == 0 and daemon_pid(second) == pid, second.stderr
        assert STARTED not in second.stderr
        assert read_delta(root / "warehouse/silver/silver_orders") == expected_state(
            BATCH_1 + BATCH_2)
        assert len(read_delta(root / "warehouse/bronze/bronze_orders")) == 9

        # A script's command (no terminal, no MEDALLION_DAEMON) uses the running daemon too;
        # a failure there is its one line and exit code, as on its own.
        (root / "models/silver/typed.sql").write_text(FAILING_CAST)
        failed = run(root, "run", "-s", "typed")
        assert failed.returncode == 1 and daemon_pid(failed) == pid, failed.stderr
        assert "[CAST_INVALID_INPUT]" in failed.stdout and "Traceback" not in failed.stdout
        (root / "models/silver/typed.sql").unlink()

        # A preview Spark computes (show --inline, --cte) runs on the warm daemon too
        shown = run(root, "show", "--inline",
                    "select count(*) as orders from {{ ref('silver_orders') }}")
        assert shown.returncode == 0 and daemon_pid(shown) == pid, shown.stderr
        expected = len(expected_state(BATCH_1 + BATCH_2))
        assert [line.split() for line in shown.stdout.splitlines()][-1] == [str(expected)], \
            shown.stdout

        stopped = run(root, "serve", "--stop")
        assert stopped.stdout.strip() == f"Stopped the project's server (pid {pid})"
        assert ended(pid, 5) and not (root / "target/serve.json").exists()
        assert f"medallion run -s typed --project-dir {root}: exit 1" in \
            (root / "target/daemon.log").read_text()
    finally:
        if pid and running(pid):
            os.kill(pid, 15)

    # Without a terminal and without being asked, a command starts none.
    alone = run(root, "build")
    assert alone.returncode == 0 and daemon_pid(alone) is None and STARTED not in alone.stderr
    assert not (root / "target/serve.json").exists()
    assert run(root, "serve", "--stop").stdout.strip() == "No server runs for this project"


def test_a_daemon_stops_when_idle_or_cleaned_and_is_replaced_when_spark_would_start_otherwise(
        project):
    """Engine-independent (the server's life, not its builds): embedded engine only."""
    root = project({"models/a.sql": "{{ config(materialized='table') }} select 1 as x"})
    first = run(root, "run", "--daemon")
    pid = daemon_pid(first)
    assert first.returncode == 0 and pid, first.stderr
    try:
        # Another Java, Spark, Hadoop or AWS variable: the daemon would run the command
        # otherwise than the command would itself, so a new one replaces it.
        other = run(root, "run", "--daemon", AWS_REGION="eu-west-3")
        replaced = daemon_pid(other)
        assert other.returncode == 0 and replaced not in (None, pid), other.stderr
        assert f"Note: medallion's daemon (pid {pid}) started with another Python" in other.stderr
        assert ended(pid, 5)
        pid = replaced

        # medallion clean removes target/serve.json: nobody can reach the daemon, which stops.
        assert run(root, "clean").returncode == 0
        assert ended(pid, 30)

        quick = run(root, "run", "--daemon", MEDALLION_DAEMON_IDLE="2")
        pid = daemon_pid(quick)
        assert quick.returncode == 0 and pid, quick.stderr
        assert ended(pid, 30) and not (root / "target/serve.json").exists()
    finally:
        if pid and running(pid):
            os.kill(pid, 15)


HOLD_LOCK = ("import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY); "
             "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(3)")


def test_a_daemon_starts_once_a_lock_held_a_moment_is_free(project):
    """Engine-independent: a daemon that stops holds its lock a moment after its pid shows it
    gone (its threads end last), so a command replacing it found the lock taken and ran without
    one (a full run saw it); it now waits for the lock."""
    root = project({"models/a.sql": "{{ config(materialized='table') }} select 1 as x"})
    (root / "target").mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(root / "target/serve.lock")],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    result = run(root, "run", "--daemon")
    pid = daemon_pid(result)
    try:
        assert result.returncode == 0 and pid and holder.wait(timeout=30) == 0, result.stderr
    finally:
        if pid and running(pid):
            os.kill(pid, 15)


@pytest.mark.unit
def test_a_daemon_that_cannot_start_spark_leaves_the_command_its_own_error(project):
    """Engine-independent (no Spark starts anywhere): the daemon fails before it listens, and
    the command, run on its own, says why in one line."""
    root = project({"models/a.sql": "{{ config(materialized='table') }} select 1 as x"})
    result = run(root, "run", "--daemon", JAVA_HOME="/nonexistent", PATH="/usr/bin:/bin")
    assert result.returncode == 2 and STARTED not in result.stderr
    error, hint = [x for x in result.stderr.splitlines() if x.strip()]
    assert error.startswith("Error: ") and hint.startswith("  hint: check Java"), result.stderr
    assert not (root / "target/serve.json").exists()


@pytest.mark.unit
def test_no_daemon_for_a_cluster_or_a_connect_server(project):
    """Engine-independent: a daemon would hold a cluster's cores while idle, and a Spark
    Connect server keeps its Spark warm itself."""
    for where in ('master: "spark://127.0.0.1:1"', 'remote: "sc://127.0.0.1:1"'):
        profile = ("test:\n  target: t\n  outputs:\n    t:\n      engine: delta-spark\n"
                   f"      warehouse: warehouse\n      spark:\n        {where}\n")
        root = project({"models/a.sql": "select 1 as x"}, profile=profile)
        result = run(root, "seed", "--daemon")
        assert result.returncode == 0 and STARTED not in result.stderr, result.stderr
        assert not (root / "target/daemon.log").exists()


@pytest.mark.unit
def test_an_explicit_server_started_otherwise_is_passed_over_with_a_note(project):
    root = project({"models/a.sql": "select 1 as x"})
    got, path, listener = fake_server(root)
    path.write_text(json.dumps({**json.loads(path.read_text()), "kind": "another"}))
    with listener:
        result = run(root, "seed")
    assert result.returncode == 0 and got == [] and "Nothing selected." in result.stdout
    assert "started with another Python, medallion, or other Java, Spark, Hadoop or AWS " \
           "variables than this command's; running in a JVM of its own" in result.stderr


@pytest.mark.unit
def test_when_the_daemon_is_wanted(monkeypatch):
    monkeypatch.delenv(daemon.DAEMON_VARIABLE, raising=False)
    assert daemon.wanted(None, terminal=True) and not daemon.wanted(None, terminal=False)
    assert not daemon.wanted(False, terminal=True) and daemon.wanted(True, terminal=False)
    monkeypatch.setenv(daemon.DAEMON_VARIABLE, "off")
    assert not daemon.wanted(None, terminal=True) and daemon.wanted(True, terminal=True)
    monkeypatch.setenv(daemon.DAEMON_VARIABLE, "ON")
    assert daemon.wanted(None, terminal=False)
    monkeypatch.setenv(daemon.DAEMON_VARIABLE, "maybe")
    with pytest.raises(MedallionError, match="MEDALLION_DAEMON='maybe' is neither on nor off"):
        daemon.wanted(None, terminal=True)
    monkeypatch.setenv(daemon.IDLE_VARIABLE, "soon")
    with pytest.raises(MedallionError, match="is not a number of seconds above 0"):
        daemon.idle_seconds()
    monkeypatch.setenv(daemon.IDLE_VARIABLE, "90")
    assert daemon.idle_seconds() == 90
