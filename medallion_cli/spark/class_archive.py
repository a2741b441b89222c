"""The driver JVM's class archive: the classes a build loads, kept by the JVM itself (Java's
class-data sharing, AppCDS) so that later JVMs map them instead of loading and verifying them one
by one again. A build's JVM spends seconds on that, at its start and at each kind of query's
first run; with the archive, a sample build's increment took 18 s instead of 23 s.

The first JVM of a kind (the same Java, pyspark and JARs) records the archive when it exits,
which takes ten seconds to minutes on a busy machine. The command does not wait for that: as it
exits it hands the recording to a keeper process of its own, which waits for the JVM to exit and
only then puts the archive in place under its final name, because a JVM given an incomplete
archive crashes. A recording left by a command (or keeper) killed meanwhile is taken by a later
start once it has not changed for a minute and a JVM reads it whole. One JVM of a kind records at a time: the
command that records holds a claim, and others start without the archive meanwhile (so builds
killed one after another do not each write one more archive as their JVMs exit, and a killed
command's recording has a minute to settle). An archive a JVM cannot start with is removed and
Spark started without one. A target whose Java options say anything about class sharing
(-Xshare, SharedArchiveFile, ArchiveClassesAtExit) decides alone.
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib.metadata import distribution, version
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.processes import ended

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CACHE_ENV = "MEDALLION_CLASS_ARCHIVE_DIR"
OPTIONS = "spark.driver.extraJavaOptions"
TARGET_DECIDES = ("-Xshare", "SharedArchiveFile", "ArchiveClassesAtExit")
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # its notes would fill Spark's log
SETTLED_SECONDS = 60  # a recording unchanged this long is finished, whole or cut short
EXIT_SECONDS = 900  # longest a keeper waits for its JVM to exit


@dataclass(frozen=True)
class ClassArchive:
    path: Path  # the archive, once it exists
    recording: Path | None = None  # where this JVM records it at exit, when there is none yet

    def option(self) -> str:
        if self.recording:
            return f"-XX:ArchiveClassesAtExit={self.recording} {QUIET}"
        return f"-XX:SharedArchiveFile={self.path} {QUIET}"


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "medallion" / "classes")


def pyspark_home() -> str:
    return str(distribution("pyspark").locate_file("pyspark"))


def class_archive(conf: dict[str, str]) -> ClassArchive | None:
    """The archive for a JVM started with this Spark conf: one to use, or one to record."""
    if any(word in conf.get(OPTIONS, "") for word in TARGET_DECIDES):
        return None
    java = java_binary()
    if java is None:
        return None
    # The JVM checks an archive against its own version and class path and ignores one that
    # does not match; the key keeps one archive per kind of JVM so none is recorded in vain.
    # (where pyspark is installed too: its JARs are on the class path, so a second virtual
    # environment's JVMs could never use the first one's archive, nor record their own)
    kind = "\n".join((str(java), str(java.stat().st_mtime_ns), version("pyspark"),
                      pyspark_home(), conf.get("spark.jars", ""),
                      conf.get("spark.driver.extraClassPath", "")))
    root = cache_root()
    path = root / f"{hashlib.sha256(kind.encode()).hexdigest()[:16]}.jsa"
    try:
        root.mkdir(parents=True, exist_ok=True)
        _take_settled_recordings(java, path)
    except OSError:
        return None  # no cache folder: start without an archive
    if path.is_file():
        _claim_file(path).unlink(missing_ok=True)
        return ClassArchive(path)
    if not _claimed(path):
        return None  # another command records it
    return ClassArchive(path, path.with_name(f"{path.stem}.{os.getpid()}.recording"))


def with_archive(conf: dict[str, str], archive: ClassArchive | None) -> dict[str, str]:
    if archive is None:
        return conf
    return {**conf, OPTIONS: " ".join(filter(None, (conf.get(OPTIONS), archive.option())))}


def keep_when_recorded(archive: ClassArchive | None, spark: SparkSession) -> None:
    """When this JVM records the archive: at the command's exit, start the keeper (holding this
    command's claim) and let the JVM exit and record, without waiting for either."""
    if archive is None or archive.recording is None:
        return
    process = getattr(spark.sparkContext._gateway, "proc", None)
    if process is None:  # a JVM this process did not start (not a local launch)
        return

    def hand_off() -> None:
        try:
            # run in the archives' folder: a medallion_cli folder where the command ran (a
            # checkout) must not stand in for the one that runs
            subprocess.Popen([sys.executable, "-c", KEEPER, str(process.pid),
                              str(archive.recording), str(archive.path)],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True,
                             pass_fds=tuple(_claims), cwd=archive.path.parent)
            process.stdin.close()  # the JVM exits, recording, when its parent's pipe closes
        except Exception:  # an archive is only ever a saving; a build never fails for one
            pass

    atexit.register(hand_off)


KEEPER = ("import sys; from pathlib import Path; from medallion_cli.spark.class_archive "
          "import keep_after_exit; keep_after_exit(int(sys.argv[1]), Path(sys.argv[2]), "
          "Path(sys.argv[3]))")


def keep_after_exit(pid: int, recording: Path, path: Path) -> None:
    """The keeper: once the JVM `pid` has exited, its recording, read whole by a JVM, becomes
    the archive; otherwise it is removed."""
    exited = ended(pid, EXIT_SECONDS, poll_seconds=0.5)
    try:
        java = java_binary()
        if exited and recording.is_file() and java and _readable(java, recording):
            os.replace(recording, path)
            _claim_file(path).unlink(missing_ok=True)
    except (OSError, subprocess.SubprocessError):
        pass
    finally:
        recording.unlink(missing_ok=True)


def forget(archive: ClassArchive | None) -> None:
    """A JVM did not start with this archive: remove it, so the next start records a new one."""
    if archive is not None and archive.recording is None:
        archive.path.unlink(missing_ok=True)


def java_binary() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else shutil.which("java")
    if not found or not Path(found).is_file():
        return None
    return Path(found).resolve()


def _claim_file(path: Path) -> Path:
    return path.with_suffix(".claim")


_claims: list[int] = []  # held open, so the claim lasts as long as this process


def _claimed(path: Path) -> bool:
    """Claim the recording of this archive for this process (an OS file lock, which goes with
    its process however it ends): False while another command holds it, or for a minute after
    one last claimed it or a recording was written (a killed command's JVM records as it
    exits, after its command is gone)."""
    claim = _claim_file(path)
    descriptor = os.open(claim, os.O_CREAT | os.O_WRONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        newest = max(p.stat().st_mtime for p in (
            claim, *path.parent.glob(f"{path.stem}.*.recording")))
        fresh = claim.stat().st_size == 0  # never claimed before
        if not fresh and time.time() - newest < SETTLED_SECONDS:
            raise BlockingIOError
        os.write(descriptor, b".")  # marks the file claimed, and its time
    except OSError:
        os.close(descriptor)
        return False
    _claims.append(descriptor)
    return True


def _take_settled_recordings(java: Path, path: Path) -> None:
    """Recordings of this kind left by JVMs whose command was killed: the first that a JVM
    reads whole becomes the archive (unless there is one); the rest are removed."""
    for recording in path.parent.glob(f"{path.stem}.*.recording"):
        try:
            if time.time() - recording.stat().st_mtime < SETTLED_SECONDS:
                continue  # maybe still being written
            if not path.is_file() and _readable(java, recording):
                os.replace(recording, path)
            else:
                recording.unlink()
        except (OSError, subprocess.SubprocessError):
            pass


def _readable(java: Path, archive: Path) -> bool:
    """A JVM reads the whole archive and checks it (a cut-short one crashes it)."""
    return subprocess.run(
        [str(java), f"-XX:SharedArchiveFile={archive}", "-XX:+VerifySharedSpaces", "-Xshare:auto",
         "-XX:ErrorFile=/dev/null", "-XX:-CreateCoredumpOnCrash", "-version"],
        capture_output=True, timeout=60).returncode == 0
