"""An engine's Spark session, started when it is first used, once per process."""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol, Self

from ..core.errors import MedallionError, StartError
from .conf import LongQueries
from .connect import is_connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_STARTING = threading.RLock()  # one start per process, however many nodes ask at once


class _Declared(Protocol):
    """What OnDemandSpark reads of an engine's capabilities (engines/base.py)."""

    @property
    def long_queries(self) -> LongQueries: ...


def _nothing() -> None:
    """No gate and no fence: what an engine has until a command sets them."""


def _told_nothing(starting: bool) -> None:
    """Nobody to tell of Spark's start."""


class OnDemandSpark:
    """An engine's `spark`, started when first used: history, show and maintenance, and builds
    whose nodes are all up to date, need only the Delta log. A failed start raises StartError
    for every use, without trying again. A node's copy of the engine (`for_node`) gets a session
    of its own (its own temp views and SQL settings), made when the node first uses Spark.
    An engine says how it starts in `_start_session` (checked: a session on a Spark Connect
    server already checked, for a node)."""

    _parent: OnDemandSpark | None = None
    _failed: StartError | None = None
    start_seconds: float | None = None  # how long this invocation's start took, once started
    on_start: Callable[[bool], None] = staticmethod(_told_nothing)  # True before, False after
    long_queries = False  # the work ahead is long queries over many rows (spark/conf.py)
    # Called by an engine that stages its writes (capabilities.stages_writes) once a write's
    # rows are computed, before it commits them; a node's gate (run/scheduler.py)
    before_commit: Callable[[], None] = staticmethod(_nothing)
    # Raises (RunStopped) once this process may no longer write the warehouse: set by the
    # command holding the warehouse's lock (run/locking.py: an S3 lease can be lost)
    fence: Callable[[], None] = staticmethod(_nothing)
    # What the engine declares (engines/base.py), and how it starts its session (checked: a
    # Spark Connect server already checked, for a node's session)
    capabilities: _Declared
    _start_session: Callable[..., SparkSession]

    def plan_start(self, on_start: Callable[[bool], None], long_queries: bool = False) -> None:
        """Before first use: whom to tell about the start, and what work follows it."""
        self.on_start, self.long_queries = on_start, long_queries

    def long_work(self) -> LongQueries | None:
        """How the JVM compiles long queries, when long queries follow the start (the
        engine's capability); None when they do not."""
        return self.capabilities.long_queries if self.long_queries else None

    def about_to_commit(self) -> None:
        """Called by both engines just before each commit: the node's gate, then the fence."""
        self.before_commit()
        self.fence()

    def for_node(self, before_commit: Callable[[], None] | None = None) -> Self:
        node = copy.copy(self)
        node.__dict__.pop("_session", None)
        node._parent = self
        if before_commit is not None:
            node.before_commit = before_commit
        return node

    @property
    def spark(self) -> SparkSession:
        session = self.__dict__.get("_session")
        if session is None:
            with _STARTING:
                session = self.__dict__.get("_session") or self._new_session()
                self.__dict__["_session"] = session
        return session

    def cancel_jobs(self) -> None:
        """Cancel every Spark job this process started (Ctrl-C), if Spark has started: all of
        its context's, or over Spark Connect each session's operations (one per node)."""
        root = self
        while root._parent is not None:
            root = root._parent
        session = root.__dict__.get("_session")
        if session is None:
            return
        if not is_connect(session):
            session.sparkContext.cancelAllJobs()
            return
        for each in [session, *root.__dict__.get("_node_sessions", ())]:
            each.interruptAll()

    def _new_session(self) -> SparkSession:
        if self._parent is not None:
            parent = self._parent.spark
            if not is_connect(parent):
                return parent.newSession()
            # Spark Connect has no newSession: a session of its own on the same server
            session = self._start_session(checked=True)
            self._parent.__dict__.setdefault("_node_sessions", []).append(session)
            return session
        if self._failed is not None:
            raise self._failed
        self.on_start(True)
        began = time.perf_counter()
        try:
            session = self._start_session()
        except MedallionError as exc:
            self._failed = StartError(exc.message, exc.path, exc.line, exc.hint)
            raise self._failed from exc
        finally:
            self.on_start(False)
        self.start_seconds = time.perf_counter() - began
        return session


@contextlib.contextmanager
def node_sessions_released(engine: object) -> Iterator[None]:
    """Over Spark Connect, have the server drop the sessions the engine's nodes made once the
    work in this block is done, and close their connections: the server keeps an idle session
    for an hour, so a shared server would gather one per node of every build. One try each: a
    server that is gone forgets them."""
    try:
        yield
    finally:
        for session in engine.__dict__.pop("_node_sessions", ()):
            session.client.set_retry_policies([])
            try:
                session.client.release_session()
            except Exception:  # noqa: BLE001 - gone already: nothing to release
                pass
            session.client.close()
