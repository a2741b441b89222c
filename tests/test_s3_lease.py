"""One writer per warehouse on S3: the lease (run/lease.py) against moto's S3 server on loopback,
whose conditional writes (If-None-Match, If-Match) answer as S3's do. No JVM: the lease is the
store's and boto3's. One engine does not apply: both engines take the same lease."""

import json
import os
import time
import uuid

import pytest

from medallion_cli.core.errors import LockHeld, MedallionError
from medallion_cli.run import lease
from medallion_cli.run.locking import warehouse_lock

pytestmark = pytest.mark.unit


@pytest.fixture
def warehouse(s3, monkeypatch):
    for key, value in s3.aws_env().items():
        monkeypatch.setenv(key, value)
    bucket = s3.create_bucket(f"lease-{uuid.uuid4().hex[:8]}")
    return f"s3://{bucket}/lake"


def test_a_second_writer_is_refused_naming_the_holder_until_the_first_is_done(warehouse):
    with warehouse_lock(warehouse, "build"):
        with pytest.raises(LockHeld, match=r"`medallion build` \(pid \d+ on .*\) is writing "
                                           r"this warehouse") as refused:
            with warehouse_lock(warehouse, "build"):
                pass
        assert "lease runs to" in str(refused.value)
    with warehouse_lock(warehouse, "vacuum"):  # released: the next one takes it
        pass


def test_the_holder_renews_its_lease_while_it_runs(warehouse, monkeypatch):
    monkeypatch.setattr(lease, "LEASE_SECONDS", 2)
    monkeypatch.setattr(lease, "RENEW_SECONDS", 0.3)
    held = lease.acquire(warehouse, "build")
    time.sleep(2.5)  # longer than a lease: only renewals keep it
    with pytest.raises(LockHeld, match="is writing this warehouse"):
        lease.acquire(warehouse, "build")
    held.release()
    assert held.lost is None


def test_a_dead_holders_lease_lapses_and_the_next_build_takes_it_over(warehouse, s3, monkeypatch):
    monkeypatch.setattr(lease, "LEASE_SECONDS", 1)
    bucket, key = lease._where(warehouse)
    # what a SIGKILLed build leaves: its lease, never renewed again
    s3.client().put_object(Bucket=bucket, Key=key, Body=json.dumps(
        {"command": "build", "pid": 999999, "host": "gone", "since": "then"}).encode())
    time.sleep(2.2)  # the store's clock counts whole seconds
    held = lease.acquire(warehouse, "build")
    holder = json.loads(s3.client().get_object(Bucket=bucket, Key=key)["Body"].read())
    assert holder["pid"] != 999999
    held.release()


def test_of_two_builds_taking_over_one_lapsed_lease_one_wins(warehouse, s3, monkeypatch):
    """moto checks, then writes: the race is run as its two conditional writes, in turn."""
    monkeypatch.setattr(lease, "LEASE_SECONDS", 1)
    bucket, key = lease._where(warehouse)
    client = s3.client()
    client.put_object(Bucket=bucket, Key=key, Body=b'{"command": "build"}')
    time.sleep(2.2)
    stale = client.get_object(Bucket=bucket, Key=key)
    first = lease._take_over_lapsed(client, bucket, key, b'{"command": "first"}', warehouse)
    second_view = dict(stale, Body=type("B", (), {"read": lambda self: b"{}"})())
    monkeypatch.setattr(client, "get_object", lambda **_: second_view)
    with pytest.raises(LockHeld, match="another build took over"):
        lease._take_over_lapsed(client, bucket, key, b'{"command": "second"}', warehouse)
    assert first


def test_a_build_that_lost_its_lease_says_so_when_it_ends(warehouse, s3, monkeypatch):
    monkeypatch.setattr(lease, "RENEW_SECONDS", 0.2)
    bucket, key = lease._where(warehouse)
    with pytest.raises(MedallionError, match="lost the warehouse's lease"):
        with warehouse_lock(warehouse, "build"):
            s3.client().put_object(Bucket=bucket, Key=key, Body=b'{"command": "intruder"}')
            time.sleep(1)


def test_the_fence_stops_a_holder_paused_past_its_lease_before_its_next_commit(warehouse,
                                                                              monkeypatch):
    """A paused holder (SIGSTOP, a GC pause, a partition) does not know it lost its lease: the
    fence asked before each commit goes by the age of its last confirmed renewal, so it stops
    even before a renewal could be refused; a holder that keeps renewing passes."""
    monkeypatch.setattr(lease, "LEASE_SECONDS", 1.6)
    monkeypatch.setattr(lease, "RENEW_SECONDS", 0.4)
    with warehouse_lock(warehouse, "build") as fence:
        fence()
        time.sleep(1.6)  # renewed all along: still its own
        fence()
    held = lease.acquire(warehouse, "build")
    held._stop.set()  # paused: no renewal from now on
    # paused for 1.3 s: not yet the lease's 1.6 s, but past what is sure (1.6 - 0.4); set, not
    # slept, so a loaded machine's slow put cannot make it read "2 s ago"
    held.confirmed = time.monotonic() - 1.3
    with pytest.raises(lease.LeaseLost, match=r"^this build lost the warehouse's lease "
                       r"\(s3://lease-\w+/lake/_medallion/lock\): its last renewal was 1 s ago "
                       r"\(the process was paused or cut off from the store\), and after 2 s "
                       r"another build may take it over; it stopped before its next commit\n"
                       r"  hint: run the build again"):
        held.check()
    held.release()


def test_the_fence_stops_a_holder_whose_lease_was_taken_over(warehouse, s3, monkeypatch):
    monkeypatch.setattr(lease, "RENEW_SECONDS", 0.2)
    bucket, key = lease._where(warehouse)
    with pytest.raises(lease.LeaseLost, match="another build took it over") as stopped:
        with warehouse_lock(warehouse, "build") as fence:
            s3.client().put_object(Bucket=bucket, Key=key, Body=b'{"command": "intruder"}')
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # until a renewal is refused
                fence()
                time.sleep(0.1)
    assert "run the build again once no other build writes the warehouse" in str(stopped.value)


def test_an_unreachable_store_is_one_line(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with pytest.raises(MedallionError, match=r"lease \(s3://b/lake/_medallion/lock\) could not be "
                                             r"taken: Could not connect"):
        with warehouse_lock("s3://b/lake", "build"):
            pass


def test_a_dead_holder_on_this_machine_is_taken_over_at_once(warehouse, s3):
    """As with the local lock: a build killed here leaves a lease whose pid is gone."""
    import socket
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    bucket, key = lease._where(warehouse)
    s3.client().put_object(Bucket=bucket, Key=key, Body=json.dumps(
        {"command": "build", "pid": gone.pid, "host": socket.gethostname(),
         "since": "now"}).encode())
    lease.acquire(warehouse, "build").release()
    # a live holder here is not
    s3.client().put_object(Bucket=bucket, Key=key, Body=json.dumps(
        {"command": "build", "pid": os.getpid(), "host": socket.gethostname(),
         "since": "now"}).encode())
    with pytest.raises(LockHeld, match="is writing this warehouse"):
        lease.acquire(warehouse, "build")


def test_debug_checks_the_bucket_takes_writes_and_refuses_a_second_create(warehouse):
    from medallion_cli.storage.object_store import bucket_problem

    assert bucket_problem(warehouse) is None
    assert "404" in bucket_problem("s3://no-such-bucket-here/lake")
