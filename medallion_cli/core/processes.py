"""Whether a process (a build holding a lock or staging files, a JVM recording its classes, a
test broker) still runs."""

from __future__ import annotations

import os
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
