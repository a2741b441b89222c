"""Where the delta-spark engine reads a table's Delta log (versions, app transactions, history,
file counts, properties) without a Spark job, by how it reaches Spark.

- A local table: delta-rs in this process, always (its log read in a millisecond; Delta's
  history manager takes 0.1-0.2 s warm and 2 s cold).
- Spark in this process (local or a cluster's driver): Delta's own DeltaLog through the JVM
  (JvmLog). It reaches every store Spark does, with the cluster's credentials.
- Spark Connect (no JVM here): delta-rs wherever this machine reaches the storage (S3 with the
  AWS variables), else Delta's SQL on the server (SqlLog: DESCRIBE HISTORY and DETAIL). SQL has
  no app transactions: there a replayed streaming batch goes to Delta, whose txnAppId and
  txnVersion skip it (nothing doubles; the batch's reported rows are then its last commit's).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from deltalake.exceptions import DeltaError

from ...core.errors import MedallionError
from ...core.locations import is_remote
from ..base import Json
from ..deltars import open_table
from ..sql import table

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyspark.sql import Row, SparkSession

Answer = TypeVar("Answer")


def client_log(path: str, read: Callable[[DeltaTable], Answer], anywhere: bool
               ) -> Answer | None:
    """read(the table opened by delta-rs); None where it cannot answer (no table, a store this
    machine does not reach, a table it cannot read). anywhere: also for object storage (over
    Spark Connect), else only for a local table. A log with a damaged commit is one line
    naming it (open_table), not left to Delta, which may read a commit cut short as empty."""
    if is_remote(str(path)) and not anywhere:
        return None
    try:
        return read(open_table(str(path)))
    except (DeltaError, OSError):
        return None


class JvmLog:
    """Delta's DeltaLog in this process's JVM (cached by Delta per path): its snapshot's
    version, metadata and checksum cost no Spark job, and its history no DataFrame
    (DeltaTable.history and detail plan a query each time: 0.2-3 s apiece on a busy machine)."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    @property
    def _jvm(self) -> Any:
        """py4j's view of this process's JVM (a session in this process has one)."""
        return self.spark._jvm

    def _snapshot(self, path: str) -> Any:
        """The table's current snapshot; raises, as delta-rs and DeltaTable.forPath do, where
        there is no table (Delta gives an empty snapshot, version -1)."""
        jvm = self._jvm
        none = jvm.scala.Option.empty()
        delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
            self.spark._jsparkSession, str(path))
        snapshot = delta_log.update(False, none, none)
        if snapshot.version() < 0:
            raise MedallionError(f"{path} is not a Delta table")
        return snapshot

    def version(self, path: str) -> int:
        return int(self._snapshot(path).version())

    def app_version(self, path: str, app_id: str) -> int | None:
        snapshot = self._snapshot(path)
        # Delta lists a version's app transactions in its checksum file (.crc): read there,
        # they cost no Spark job (Snapshot.transactions and setTransactionsIfKnown run 1-3).
        # A version without one (a delta-rs commit, a writer killed before writing it) has
        # them found by replaying the log.
        checksum = snapshot.checksumOpt()
        known = checksum.get().setTransactions() if checksum.isDefined() else None
        if known is not None and known.isDefined():
            versions: list[int] = [t["version"] for t in json.loads(self._json(known.get()))
                                   if t["appId"] == app_id]
            return max(versions, default=None)
        version = snapshot.transactions().get(app_id)
        return None if version.isEmpty() else int(version.get())

    def history(self, path: str, limit: int | None) -> list[Json]:
        jvm = self._jvm
        none = jvm.scala.Option.empty()
        commits = self._snapshot(path).deltaLog().history().getHistory(
            none if limit is None else jvm.scala.Option.apply(limit), none)
        history: list[Json] = json.loads(self._json(commits))
        return history

    def file_count(self, path: str) -> int:
        return self.file_totals(path)[0]

    def file_totals(self, path: str) -> tuple[int, int]:
        """(data files, their bytes), from the version's checksum where it has one, as
        app_version reads it: no Spark job. Delta 4.4's Snapshot.numOfFiles replays the log in
        one even when the checksum has the count."""
        snapshot = self._snapshot(path)
        checksum = snapshot.checksumOpt()
        if checksum.isDefined():
            return int(checksum.get().numFiles()), int(checksum.get().tableSizeBytes())
        return int(snapshot.numOfFiles()), int(snapshot.sizeInBytes())

    def properties(self, path: str) -> dict[str, str]:
        jvm = self._jvm
        return dict(jvm.scala.jdk.javaapi.CollectionConverters.asJava(
            self._snapshot(path).metadata().configuration()))

    def _json(self, value: Any) -> str:
        """A Delta object (actions, history) as JSON, by Delta's own mapper: one call."""
        jvm = self._jvm
        return str(jvm.org.apache.spark.sql.delta.util.JsonUtils.mapper()
                   .writeValueAsString(value))


class SqlLog:
    """Delta's SQL on a Spark Connect server, where delta-rs does not reach the storage."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def version(self, path: str) -> int:
        return int(self.history(path, 1)[0]["version"])

    def app_version(self, path: str, app_id: str) -> int | None:
        return None  # not in Delta's SQL: Delta's own txnAppId/txnVersion skip a replay

    def history(self, path: str, limit: int | None) -> list[Json]:
        """As DESCRIBE HISTORY has them, newest first: timestamps in ms, absent fields left
        out (as Delta's JSON mapper and delta-rs give them)."""
        rows = self.spark.sql(f"DESCRIBE HISTORY {table(str(path))}"
                              + (f" LIMIT {int(limit)}" if limit else "")).collect()
        return [{key: _plain(value) for key, value in row.asDict(recursive=True).items()
                 if value is not None} for row in rows]

    def file_count(self, path: str) -> int:
        return self.file_totals(path)[0]

    def file_totals(self, path: str) -> tuple[int, int]:
        detail = self._detail(path)
        return int(detail["numFiles"]), int(detail["sizeInBytes"])

    def properties(self, path: str) -> dict[str, str]:
        return dict(self._detail(path)["properties"] or {})

    def _detail(self, path: str) -> Row:
        detail = self.spark.sql(f"DESCRIBE DETAIL {table(str(path))}").first()
        assert detail is not None  # DESCRIBE DETAIL answers one row
        return detail


def _plain(value: Any) -> Any:
    return int(value.timestamp() * 1000) if isinstance(value, datetime) else value
