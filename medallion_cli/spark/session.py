"""An engine's Spark session, started when it is first used, once per process."""

from __future__ import annotations

import copy
import threading
import time

from ..core.errors import MedallionError, StartError

_STARTING = threading.RLock()  # one start per process, however many nodes ask at once


class OnDemandSpark:
    """An engine's `spark`, started when first used: history, show and maintenance, and builds
    whose nodes are all up to date, need only the Delta log. A failed start raises StartError
    for every use, without trying again. A node's copy of the engine (`for_node`) gets a session
    of its own (its own temp views and SQL settings), made when the node first uses Spark.
    An engine says how it starts in `_start_session`."""

    _parent: OnDemandSpark | None = None
    _failed: StartError | None = None
    start_seconds: float | None = None  # how long this invocation's start took, once started
    on_start = staticmethod(lambda starting: None)  # told True before a start, False after
    long_queries = False  # the work ahead is long queries over many rows (spark.py)

    def plan_start(self, on_start, long_queries: bool = False) -> None:
        """Before first use: whom to tell about the start, and what work follows it."""
        self.on_start, self.long_queries = on_start, long_queries

    def for_node(self):
        node = copy.copy(self)
        node.__dict__.pop("_session", None)
        node._parent = self
        return node

    @property
    def spark(self):
        session = self.__dict__.get("_session")
        if session is None:
            with _STARTING:
                session = self.__dict__.get("_session") or self._new_session()
                self.__dict__["_session"] = session
        return session

    def cancel_jobs(self) -> None:
        """Cancel every Spark job running in this process (Ctrl-C), if Spark has started."""
        root = self
        while root._parent is not None:
            root = root._parent
        session = root.__dict__.get("_session")
        if session is not None:
            session.sparkContext.cancelAllJobs()

    def _new_session(self):
        if self._parent is not None:
            return self._parent.spark.newSession()
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
