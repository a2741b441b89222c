"""Spark Connect builds on a busy machine: the sample built over a Connect server started for
the run (`-t connect`, each build from an empty warehouse, as a command of its own), first on
a quiet machine, then with CPU burners beside it (a busy loop each, by default four per core:
the load at which the server's Python workers for micro-batches came back late, issue 88).
Each build's exit, seconds, first error line and the load average it ran under are
reported (a late worker is waited for silently, up to the target's spark: worker_wait).

    python bench/connect_under_load.py --repeat 3 --burners 8
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from sample_build_bench import sample_copy  # noqa: E402


@contextmanager
def burning(count: int):
    """`count` processes that each keep a core busy until the block ends."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(count)]
    try:
        time.sleep(5)  # the load average catches up with them
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def connect_build(project: Path, env: dict) -> dict:
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "medallion_cli.cli", "build", "-t", "connect",
                          "--project-dir", str(project)], capture_output=True, text=True,
                         env=env, timeout=1800)
    seconds = time.perf_counter() - start
    said = run.stdout + run.stderr
    return {"exit": run.returncode, "seconds": round(seconds, 1),
            "load": round(os.getloadavg()[0], 1),
            "error": next((line for line in said.splitlines() if line.startswith("Error")),
                          None)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--burners", type=int, default=4 * (os.cpu_count() or 2))
    args = parser.parse_args()
    from medallion_cli.testing import connect_server

    work = Path(tempfile.mkdtemp(prefix="medallion-connect-load-"))
    server = connect_server.start()
    env = {**os.environ, "MEDALLION_SPARK_REMOTE": server.url,
           "MEDALLION_WAREHOUSE": "warehouse", "MEDALLION_DAEMON": "off"}
    runs: dict[str, list] = {"quiet": [], "busy": []}
    try:
        connect_build(sample_copy(ROOT, work / "warm-up"), env)  # the server's JIT
        for round_ in range(args.repeat):
            runs["quiet"].append(connect_build(sample_copy(ROOT, work / f"q{round_}"), env))
        with burning(args.burners):
            for round_ in range(args.repeat):
                runs["busy"].append(connect_build(sample_copy(ROOT, work / f"b{round_}"), env))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"cores": os.cpu_count(), "burners": args.burners, **runs}, indent=1))


if __name__ == "__main__":
    main()
