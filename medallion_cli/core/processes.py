"""Whether a process (a build holding a lock or staging files, a JVM recording its classes, a
test broker) still runs, and stopping one this process started."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path


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


def terminate(process: subprocess.Popen, timeout: float = 30) -> None:
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
