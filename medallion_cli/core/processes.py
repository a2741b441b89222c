"""Whether a process (a build holding a lock or staging files, a JVM recording its classes, a
test broker) still runs, stopping one this process started, this process's own Ctrl-C, and its
end."""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn


def running(pid: int) -> bool:
    """Whether the process runs; on Linux, one that exited and that nobody reaped yet does not
    (its parent may be gone, and a zombie answers os.kill as if it ran)."""
    if Path("/proc/self").exists():
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process
    return True


def ended(pid: int, timeout: float, poll_seconds: float = 0.2) -> bool:
    """Wait up to `timeout` seconds for a process (not necessarily this one's child) to end:
    whether it did."""
    deadline = time.monotonic() + timeout
    while running(pid) and time.monotonic() < deadline:
        time.sleep(poll_seconds)
    return not running(pid)


def stop_pid(pid: int, sig: signal.Signals = signal.SIGTERM, timeout: float = 30) -> bool:
    """Stop a process by its id, not necessarily this one's child: `sig`, then SIGKILL after
    `timeout` seconds; reaped when it is this process's child. Whether it was running."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    if not ended(pid, timeout):
        os.kill(pid, signal.SIGKILL)
        ended(pid, 10)
    try:
        # started by this process (start, then stop_recorded): reaped once it is gone, even
        # when a SIGKILLed JVM takes longer than the wait above to end
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass  # started by an earlier command, reaped by init
    return True


def terminate(process: subprocess.Popen[Any], timeout: float = 30) -> None:
    """Stop a process this one started: SIGTERM (a JVM's shutdown hooks run), then SIGKILL
    after `timeout` seconds."""
    if process.poll() is not None:
        return
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()


@contextmanager
def deferred_ctrl_c(stop: threading.Event | None) -> Iterator[threading.Event | None]:
    """An event that Ctrl-C sets, for a loop that polls it: Python would raise
    KeyboardInterrupt wherever the main thread is (in the middle of saying a result, say), and
    code that cannot handle it there would leave running work uncancelled. A second Ctrl-C
    raises at once. `stop` when the caller has one already (--watch); None off the main thread
    or when Ctrl-C is not Python's to handle."""
    if stop is not None or threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield stop
        return
    pressed = threading.Event()

    def ctrl_c(*_: object) -> None:
        if pressed.is_set():
            raise KeyboardInterrupt
        pressed.set()

    previous = signal.signal(signal.SIGINT, ctrl_c)
    try:
        yield pressed
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def environment_set(values: dict[str, str]) -> Iterator[None]:
    """These environment variables set while the block runs (for a process it starts), then
    as they were."""
    before = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def exit_now(code: int) -> NoReturn:
    """End this process with `code` as Python's own exit does, without its teardown: freeing
    every module's objects (pyspark's, pandas', pyarrow's) took 0.15 s of each command's end
    on 2 cores. First what Python's exit does before that teardown, in its order: threading's
    shutdown (it tells thread pools to stop, as Spark Connect's client's idle pool must be
    told, then waits for the threads that are not daemons), the exit handlers (the class
    archive's hand-off, logging's flush), the output flushed."""
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # (Python's own, private)
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe (`medallion ls | head`)
                pass
    finally:
        os._exit(code)
