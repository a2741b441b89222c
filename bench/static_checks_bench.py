"""Static checks' time, no JVM: the sample and a generated project of many models (lag_project.py's
shape: bronze streams, silver merges, gold aggregates joined to earlier golds), each model's
SELECT checked against its inputs' columns (report/static_checks.py), median of several runs in
this process after the project is loaded (loading and rendering are `medallion ls`'s time),
each from cold and then again unedited (what an editor's next keystroke costs where nothing it
reaches changed).

    python bench/static_checks_bench.py --models 500 --runs 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from lag_project import write

from medallion_cli.commands.invocation import Invocation, load
from medallion_cli.report.columns import _analysed
from medallion_cli.report.static_checks import CHECKED, check_models

ROOT = Path(__file__).resolve().parent.parent


def timed(project: Path, runs: int) -> tuple[int, float, float, int]:
    """(models, median seconds of a check of them all from cold, and again with nothing
    edited (what the language server's caches keep), findings)."""
    loaded = load(Invocation(project_dir=str(project)))
    names = [n for n, node in loaded.graph.nodes.items() if node.sql is not None]
    cold, warm, found = [], [], 0
    for _ in range(runs):
        CHECKED.clear()
        _analysed.cache_clear()
        for seconds in (cold, warm):
            began = time.perf_counter()
            checked = check_models(loaded.project, loaded.graph, names, lambda path: None)
            seconds.append(time.perf_counter() - began)
        found = len(checked.findings)
    return len(names), statistics.median(cold), statistics.median(warm), found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=500)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    generated = Path(tempfile.mkdtemp(prefix="medallion-checks-")) / "project"
    write(generated, args.models)
    for label, project in (("sample", ROOT), (f"generated ({args.models})", generated)):
        models, cold, warm, found = timed(project, args.runs)
        print(f"{label}: {models} models checked in {cold:.2f} s, {warm:.2f} s again unedited "
              f"(medians of {args.runs}), {found} finding(s)")


if __name__ == "__main__":
    main()
