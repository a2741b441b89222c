"""One writer per warehouse on S3: a lease, since object storage has no file lock.

The lease is one object, `<warehouse>/_medallion/lock`, created only if absent (a conditional
PUT, `If-None-Match: *`, which S3 and the compatible stores make atomic), naming its holder. The
holder renews it every RENEW_SECONDS, each renewal conditional on the version it wrote last
(`If-Match`), and deletes it when done. A holder that dies (SIGKILL, a lost machine) stops
renewing: LEASE_SECONDS after its last renewal, by the store's clock (no two machines' clocks
are compared), the next build takes the lease over, again conditionally, so two waiting builds
cannot both take it. A holder on this machine whose process is gone is known to be dead at
once, as with the local lock: its lease is taken over without waiting.

A holder that was paused (SIGSTOP, a long GC pause, a network cut) past LEASE_SECONDS may have
lost its lease without knowing it yet: before each commit both engines ask `Lease.check`, which
stops the run unless the last renewal the store confirmed was sent less than LEASE_SECONDS -
RENEW_SECONDS ago by this process's own monotonic clock (a takeover comes LEASE_SECONDS after
it by the store's). What is left is a pause in the moment between that check and the commit
(on delta-spark: during the Spark command that computes and commits). Every commit is still
guarded on its own too (delta-rs's conditional puts; Delta's app transactions on a replayed
batch).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

from ..core.errors import LockHeld, RunStopped
from ..core.processes import running
from ..storage.object_store import s3_client

# (settable, for tests that pause a holder past its lease without waiting a minute)
LEASE_SECONDS = float(os.environ.get("MEDALLION_LEASE_SECONDS", "60"))
RENEW_SECONDS = LEASE_SECONDS / 4
LOCK_KEY = "_medallion/lock"


def _refused(exc: Any) -> bool:
    """A conditional write the store refused: the object exists (If-None-Match), or changed
    (If-Match); some stores answer 409 to a conditional write racing another."""
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status in (409, 412)


class LeaseLost(RunStopped):
    """This build may no longer write the warehouse: another may hold its lease."""


@dataclass
class Lease:
    client: Any  # a boto3 S3 client (object_store.s3_client)
    bucket: str
    key: str
    body: bytes
    etag: str
    confirmed: float  # when (time.monotonic) the last write of it the store accepted was sent
    lost: str | None = None  # why a renewal failed, if one did
    _stop: threading.Event = field(default_factory=threading.Event)

    def renew_until_released(self) -> None:
        while not self._stop.wait(RENEW_SECONDS):
            sent = time.monotonic()
            try:
                self.etag = self.client.put_object(Bucket=self.bucket, Key=self.key,
                                                   Body=self.body, IfMatch=self.etag)["ETag"]
                self.confirmed = sent
            except Exception as exc:
                if getattr(exc, "response", None) and _refused(exc):
                    self.lost = str(exc)
                    return  # another build took it over: it is not ours to renew
                # the store did not answer: the build's own reads and writes fail on their
                # own; the next renewal tries again

    def check(self) -> None:
        """Raise LeaseLost unless the lease is surely still this process's (see above)."""
        age = time.monotonic() - self.confirmed
        if self.lost is None and age < LEASE_SECONDS - RENEW_SECONDS:
            return
        why = (f"another build took it over ({self.lost.splitlines()[0]})" if self.lost else
               f"its last renewal was {age:.0f} s ago (the process was paused or cut off from "
               f"the store), and after {LEASE_SECONDS:.0f} s another build may take it over")
        raise LeaseLost(
            f"this build lost the warehouse's lease (s3://{self.bucket}/{self.key}): {why}; "
            "it stopped before its next commit", hint="run the build again once no other "
            "build writes the warehouse: each table continues from its last commit")

    def release(self) -> None:
        self._stop.set()
        if self.lost:
            return
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self.key, IfMatch=self.etag)
        except Exception:
            pass  # the lease lapses by itself


def _where(warehouse: str) -> tuple[str, str]:
    parts = urlsplit(warehouse)
    return parts.netloc, "/".join(filter(None, [parts.path.strip("/"), LOCK_KEY]))


def _holder_text(held: dict[str, Any], expires: dt.datetime) -> str:
    return (f"`medallion {held.get('command', '?')}` (pid {held.get('pid', '?')} on "
            f"{held.get('host', '?')}, since {held.get('since', '?')}; its lease runs to "
            f"{expires:%H:%M:%S} UTC unless renewed)")


def acquire(warehouse: str, command: str, client: Any = None) -> Lease:
    """Take the warehouse's lease, or raise naming its holder."""
    client = client or s3_client()
    bucket, key = _where(warehouse)
    body = json.dumps({
        "command": command, "pid": os.getpid(), "host": socket.gethostname(),
        "since": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")}).encode()
    sent = time.monotonic()
    try:
        etag = client.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")["ETag"]
    except Exception as exc:
        if not (getattr(exc, "response", None) and _refused(exc)):
            raise
        etag = _take_over_lapsed(client, bucket, key, body, warehouse)
    lease = Lease(client, bucket, key, body, etag, confirmed=sent)
    threading.Thread(target=lease.renew_until_released, name="medallion-lease",
                     daemon=True).start()
    return lease


def _take_over_lapsed(client: Any, bucket: str, key: str, body: bytes, warehouse: str) -> str:
    held = client.get_object(Bucket=bucket, Key=key)
    renewed = held["LastModified"]
    now = parsedate_to_datetime(held["ResponseMetadata"]["HTTPHeaders"]["date"])
    expires = renewed + dt.timedelta(seconds=LEASE_SECONDS)
    try:
        holder = json.loads(held["Body"].read())
    except ValueError:
        holder = {}
    dead_here = (holder.get("host") == socket.gethostname()
                 and isinstance(holder.get("pid"), int) and not running(holder["pid"]))
    if now < expires and not dead_here:
        raise LockHeld(
            f"{_holder_text(holder, expires)} is writing this warehouse; two at once could "
            "write the same rows twice", path=warehouse,
            hint="wait for it to finish, or stop it; a stopped build's lease lapses "
                 f"{LEASE_SECONDS:.0f} s after its last renewal, then run this again")
    try:
        taken: str = client.put_object(Bucket=bucket, Key=key, Body=body,
                                       IfMatch=held["ETag"])["ETag"]
        return taken
    except Exception as exc:
        if getattr(exc, "response", None) and _refused(exc):
            raise LockHeld(
                "another build took over this warehouse's lapsed lease a moment ago",
                path=warehouse, hint="wait for it to finish, then run this again") from None
        raise
