"""One writer per warehouse: commands that write tables hold a lock on the warehouse.

Two builds at once on one warehouse (a scheduled run over a manual one, a build beside
`build --watch`) would race on the same streaming batches. The second is refused at once, naming
the holder, or (--wait-for-lock) waits for the lock that long first, as a scheduled run should.
The lock is an OS file lock (flock) on `<warehouse>/_medallion/lock`, so it goes with its
process, however that process ends (a SIGKILLed build leaves no stale lock). On S3 it is a
lease (lease.py) on the object of the same name. Other object stores have neither: there,
Delta's own conflict checks refuse a commit whose app transaction another build took
meanwhile, and a scheduler should run one build at a time.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from ..core.errors import LockHeld, MedallionError
from ..core.locations import is_remote, on_s3
from . import lease

LOCK_FILE = Path("_medallion") / "lock"
POLL_SECONDS = 0.5  # how often a command waiting for the lock asks for it again


def _holder(text: str) -> str:
    try:
        held = json.loads(text)
    except ValueError:
        return "another medallion command"
    return (f"`medallion {held['command']}` (pid {held['pid']} on {held['host']}, "
            f"since {held['since']})")


def _held() -> None:
    """The fence of a lock that cannot be lost while its process lives."""


@contextmanager
def warehouse_lock(warehouse: str, command: str, wait: float = 0
                   ) -> Iterator[Callable[[], None]]:
    """Hold the warehouse's lock while the block runs; refuse if another process holds it
    after `wait` seconds. Yields the fence for the engine to ask before each commit
    (OnDemandSpark.fence): an S3 lease can be lost while the block runs; a lock on a local
    file cannot."""
    deadline = time.monotonic() + wait
    while True:
        held = ExitStack()
        try:
            fence = held.enter_context(_lock(warehouse, command))
        except LockHeld as refused:
            left = deadline - time.monotonic()
            if left <= 0:
                if wait:
                    refused.message += f" (waited {wait:g} s for it)"
                raise
            time.sleep(min(POLL_SECONDS, left))
            continue
        with held:
            yield fence
        return


@contextmanager
def _lock(warehouse: str, command: str) -> Iterator[Callable[[], None]]:
    if on_s3(warehouse):
        with _s3_lease(warehouse, command) as fence:
            yield fence
        return
    if is_remote(warehouse):
        yield _held
        return
    path = Path(warehouse) / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise LockHeld(
                f"{_holder(handle.read())} is writing this warehouse; two at once could write "
                "the same rows twice", path=warehouse,
                hint="wait for it to finish, or stop it (its lock goes with its process), then "
                     "run this again") from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({
            "command": command, "pid": os.getpid(), "host": socket.gethostname(),
            "since": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")}))
        handle.flush()
        try:
            yield _held
        finally:
            handle.truncate(0)


@contextmanager
def _s3_lease(warehouse: str, command: str) -> Iterator[Callable[[], None]]:
    try:
        held = lease.acquire(warehouse, command)
    except MedallionError:
        raise
    except Exception as exc:  # boto3's: unreachable store, refused keys, missing bucket
        raise MedallionError(f"the warehouse's lease ({warehouse}/{lease.LOCK_KEY}) could not "
                             f"be taken: {str(exc).splitlines()[0]}", path=warehouse,
                             hint="check the AWS variables and the bucket, then run this "
                                  "again") from exc
    try:
        yield held.check
    finally:
        held.release()
    if held.lost:
        raise MedallionError(
            f"this build lost the warehouse's lease while it ran ({held.lost.splitlines()[0]}); "
            "another build may have written beside it (each commit was still guarded: nothing "
            "is doubled)", path=warehouse,
            hint="run the build again: it continues from each table's last commit")
