"""Bounded-memory benchmark: a backfill larger than the driver's memory.

Generates a feed whose JSON is larger than the driver heap given here (default 512m), builds the
sample project on it in one go, and samples the resident memory of the whole process tree
(Python driver + JVM) every half second.

    python bench/memory_bench.py --orders 4000000 --driver-memory 512m
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import threading
import time

from streaming_bench import make_project, medallion


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and all its descendants, in MB."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,rss="], capture_output=True, text=True)
    rows = [tuple(map(int, line.split())) for line in out.stdout.splitlines() if line.strip()]
    family, total = {pid}, 0
    for _ in range(5):  # a few generations deep is enough: python -> java -> python workers
        family |= {p for p, parent, _ in rows if parent in family}
    for p, _, rss in rows:
        if p in family:
            total += rss
    return total / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=4_000_000)
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--driver-memory", default="512m")
    args = parser.parse_args()
    project, feed = make_project(args.orders, args.files)
    landed = sum(f.stat().st_size for f in (project / "landing").rglob("*") if f.is_file())
    profiles = project / "profiles/profiles.yml"
    profiles.write_text(profiles.read_text().replace("spark.driver.memory: 2g",
                                                     f"spark.driver.memory: {args.driver_memory}"))
    print(f"feed: {feed}, {landed / 2**20:.0f} MB of landing files; "
          f"driver memory {args.driver_memory}")
    proc = subprocess.Popen(medallion("build", "--project-dir", str(project)),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = [0.0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], tree_rss_mb(proc.pid))
            time.sleep(0.5)

    sampler = threading.Thread(target=sample)
    started = time.perf_counter()
    sampler.start()
    output = proc.communicate()[0]
    sampler.join()
    print("\n".join(line for line in output.splitlines() if " of " in line or "Done" in line))
    print(f"exit {proc.returncode} after {time.perf_counter() - started:.0f} s; "
          f"peak resident memory of driver + JVM: {peak[0]:.0f} MB")
    shutil.rmtree(project, ignore_errors=True)


if __name__ == "__main__":
    main()
