"""The sample project's `medallion build`, timed for two checkouts of medallion in turn.

    python bench/sample_build_bench.py --before ../main --after . --repeat 3

Each checkout is built with its own venv's Python (`<checkout>/.venv/bin/python`) on a copy of
its own sample, from an empty warehouse, alternating before/after so both see the same machine
load. Prints the seconds of each run, the medians and their ratio (after / before) as JSON.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

SAMPLE_PARTS = ("models", "macros", "seeds", "landing", "tests", "profiles",
                "medallion_project.yml")


def sample_copy(checkout: Path, dest: Path) -> Path:
    dest.mkdir(parents=True)
    for part in SAMPLE_PARTS:
        src = checkout / part
        if src.is_dir():
            shutil.copytree(src, dest / part)
        elif src.exists():
            shutil.copy(src, dest / part)
    return dest


def timed_build(checkout: Path, work: Path) -> float:
    project = sample_copy(checkout, work / f"run{time.monotonic_ns()}")
    python = checkout / ".venv/bin/python"
    start = time.perf_counter()
    out = subprocess.run([str(python), "-m", "medallion_cli.cli", "build", "--project-dir",
                          str(project)], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"build failed in {checkout}:\n{out.stdout}\n{out.stderr}")
    shutil.rmtree(project)
    return round(seconds, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    runs: dict[str, list[float]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as work:
        for _ in range(args.repeat):
            for label in ("before", "after"):
                runs[label].append(timed_build(getattr(args, label).resolve(), Path(work)))
    medians = {label: statistics.median(seconds) for label, seconds in runs.items()}
    print(json.dumps({"seconds": runs, "medians": medians,
                      "ratio_after_to_before": round(medians["after"] / medians["before"], 2)},
                     indent=2))


if __name__ == "__main__":
    main()
