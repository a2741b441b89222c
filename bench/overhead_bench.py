"""Framework overhead: `medallion build` against the same work written by hand, and the speed
of `medallion compile` / `ls` on a 500-model project.

    python bench/overhead_bench.py --orders 300000 --repeat 3   # about a minute a run, 2 cores
    python bench/overhead_bench.py --orders 2000 --models 50    # CI's smoke run
    python bench/overhead_bench.py --setups embedded,delta-spark,cluster --repeat 3

--setups runs medallion on each setup in turn (see setups.py: the embedded engine, delta-spark on
local[2], delta-spark on a 2-worker standalone cluster), alternating with the hand-written
pipeline, and reports each one's median against it and against the first setup.

Both start from an empty warehouse on the same landing files, each in its own process (JVM start
included), one after the other; medallion's timed command is `run` (models, no data tests).
With --repeat N the pair runs N times, alternating, and the report gives the medians (shared
machines are noisy: single runs of the same work vary by a third).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import setups
from streaming_bench import make_project, medallion

HERE = Path(__file__).resolve().parent


def timed(cmd, cwd=None) -> float:
    started = time.perf_counter()
    run = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=setups.env())
    if run.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{run.stdout}{run.stderr}")
    return time.perf_counter() - started


def make_wide_project(root: Path, models: int) -> Path:
    """A project with `models` models: a fifth bronze over a source, the rest chained on them."""
    (root / "models/bronze").mkdir(parents=True)
    (root / "models/silver").mkdir(parents=True)
    (root / "macros").mkdir()
    (root / "profiles").mkdir()
    shutil.copy(HERE.parent / "profiles/profiles.yml", root / "profiles/profiles.yml")
    (root / "medallion_project.yml").write_text("name: wide\nprofile: medallion\n")
    (root / "macros/m.sql").write_text("{% macro cents(c) %}cast({{ c }} * 100 as bigint)"
                                       "{% endmacro %}")
    (root / "models/sources.yml").write_text(
        "sources:\n  - name: raw\n    tables:\n      - {name: t, format: delta, path: raw}\n")
    bronze = max(1, models // 5)
    for i in range(bronze):
        (root / f"models/bronze/b{i}.sql").write_text(
            "select id, amount, {{ cents('amount') }} as cents "
            "from {{ source('raw', 't') }} where id % " + str(bronze) + f" = {i}")
    for i in range(models - bronze):
        parent = f"b{i % bronze}" if i < bronze else f"s{i - bronze}"
        (root / f"models/silver/s{i}.sql").write_text(
            f"select id, sum(cents) as cents from {{{{ ref('{parent}') }}}} group by id")
    return root


def cli_seconds(project: Path, command: str, runs: int = 3) -> float:
    return statistics.median(timed(medallion(command, "--project-dir", str(project)))
                             for _ in range(runs))


def run_medallion(project: Path, setup: str = "embedded") -> tuple[float, dict]:
    """Seconds of `medallion run` from an empty warehouse, and its run results by model."""
    for folder in ("warehouse", "target"):
        shutil.rmtree(project / folder, ignore_errors=True)
    # The hand-written script runs no data tests, so time `run` (models only) after the seed.
    on = ["--project-dir", str(project), *setups.args(setup)]
    subprocess.run(medallion("seed", *on), check=True, capture_output=True, env=setups.env())
    seconds = timed(medallion("run", *on))
    return seconds, {r["name"]: r for r in json.loads(
        (project / "target/run_results.json").read_text())["results"]}


def run_handwritten(project: Path) -> dict:
    shutil.rmtree(project / "handwritten_warehouse", ignore_errors=True)
    out = subprocess.run([sys.executable, str(HERE / "handwritten.py"), str(project)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=300000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--models", type=int, default=500)

    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--setups", default="embedded",
                        help="comma-separated: embedded, delta-spark, cluster (see setups.py)")
    args = parser.parse_args()
    chosen = setups.parse(args.setups)

    project, feed = make_project(args.orders, args.files)
    runs: dict[str, list] = {setup: [] for setup in chosen}
    handwritten_runs = []
    with setups.prepared(project, chosen):
        for _ in range(args.repeat):
            for setup in chosen:
                runs[setup].append(run_medallion(project, setup))
            handwritten_runs.append(run_handwritten(project))
    handwritten_seconds = statistics.median(h["seconds"] for h in handwritten_runs)
    medians = {setup: statistics.median(seconds for seconds, _ in done)
               for setup, done in runs.items()}
    handwritten = handwritten_runs[-1]
    report = {
        "feed": feed,
        "runs": args.repeat,
        "handwritten_seconds": [h["seconds"] for h in handwritten_runs],
        "medallion_run_seconds": {setup: [round(seconds, 1) for seconds, _ in done]
                                  for setup, done in runs.items()},
        "ratio_of_medians_to_handwritten": {setup: round(m / handwritten_seconds, 2)
                                            for setup, m in medians.items()},
        f"ratio_of_medians_to_{chosen[0]}": {setup: round(m / medians[chosen[0]], 2)
                                             for setup, m in medians.items()},
        "medallion_rows_per_second": {setup: {
            n: round((r["rows"] or 0) / r["seconds"]) for n, r in done[-1][1].items()
            if r["kind"] == "model" and r["rows"]} for setup, done in runs.items()},
        "handwritten_rows_per_second": {
            n: round(t["rows"] / t["seconds"]) for n, t in handwritten["tables"].items()
            if t["seconds"]},
    }
    shutil.rmtree(project, ignore_errors=True)
    wide = make_wide_project(Path(tempfile.mkdtemp(prefix="medallion-wide-")), args.models)
    report[f"compile_{args.models}_models_seconds"] = round(cli_seconds(wide, "compile"), 2)
    report[f"ls_{args.models}_models_seconds"] = round(cli_seconds(wide, "ls"), 2)
    shutil.rmtree(wide, ignore_errors=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
