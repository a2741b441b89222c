"""Streaming benchmark: bronze ingest and silver merge rows/s, and --watch freshness.

Copies the sample project to a temporary folder, fills its landing zone with the generated feed,
and builds it in two halves (the second half MERGEs into existing tables), reading each model's
time and rows from target/run_results.json. Then
runs `medallion build --watch` (trigger 1 second), lands one file at a time, and times how long
until gold_daily_revenue shows it.

    python bench/streaming_bench.py --orders 200000 --files 20
    python bench/streaming_bench.py --setup delta-spark    # or cluster (see setups.py)
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import setups
from generate import generate

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("medallion_project.yml", "profiles", "models", "macros", "seeds")


def medallion(*args):
    return [sys.executable, "-m", "medallion_cli.cli", *args]


def make_project(orders: int, files: int) -> tuple[Path, dict]:
    dest = Path(tempfile.mkdtemp(prefix="medallion-bench-"))
    for part in PARTS:
        src = ROOT / part
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / part)
    return dest, generate(dest / "landing", orders, files)


def build_rates(project: Path, setup: str) -> dict:
    """One `medallion build`; per model: rows in, rows written, seconds, input rows/s."""
    started = time.perf_counter()
    subprocess.run(medallion("build", "--project-dir", str(project), *setups.args(setup)),
                   check=True, capture_output=True, env=setups.env())
    wall = time.perf_counter() - started
    results = {r["name"]: r for r in json.loads(
        (project / "target/run_results.json").read_text())["results"]}
    rates = {"build_wall_seconds": round(wall, 1)}
    events_in = results["bronze_orders"]["rows"] or 0
    for name, rows_in in (("bronze_orders", events_in), ("silver_orders", events_in)):
        r = results[name]
        rates[name] = {"rows_in": rows_in, "rows_written": r["rows"],
                       "seconds": round(r["seconds"], 2),
                       "rows_in_per_second": round(rows_in / r["seconds"])}
    return rates


def two_phase_rates(project: Path, setup: str) -> dict:
    """Build the first half of the feed, then land the second half and build again: the second
    silver build is a MERGE into an existing table (updates, deletes, late events)."""
    orders = project / "landing/orders"
    held = project / "held_back"
    held.mkdir()
    files = sorted(orders.iterdir())
    for f in files[len(files) // 2:]:
        f.rename(held / f.name)
    first = build_rates(project, setup)
    for f in held.iterdir():
        f.rename(orders / f.name)
    held.rmdir()
    return {"first_half (tables created)": first, "second_half (append + MERGE)":
            build_rates(project, setup)}


@contextmanager
def one_second_trigger(project: Path):
    """Every streaming model of the project on a 1-second trigger (for `build --watch`)."""
    config = project / "medallion_project.yml"
    text = config.read_text()
    config.write_text(text.replace("models:\n", "models:\n  trigger: 1 second\n", 1))
    try:
        yield
    finally:
        config.write_text(text)


def freshness(project: Path, samples: int, setup: str) -> list[float]:
    with one_second_trigger(project):
        return _freshness(project, samples, setup)


def _freshness(project: Path, samples: int, setup: str) -> list[float]:
    proc = subprocess.Popen(medallion("build", "--watch", "--project-dir", str(project),
                                      *setups.args(setup)), env=setups.env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    from deltalake import DeltaTable

    gold = str(project / "warehouse/gold/gold_daily_revenue")
    times = []
    try:
        time.sleep(20)  # the first pass: everything already landed is built once
        for n in range(samples):
            day = f"2031-01-{n + 1:02d}"
            event = {"order_id": 10**9 + n, "customer_id": 1, "product_id": "P-100", "quantity": 1,
                     "status": "placed", "op": "I", "updated_at": f"{day}T12:00:00Z"}
            landed = time.perf_counter()
            (project / "landing/orders" / f"fresh_{n}.json").write_text(json.dumps(event) + "\n")
            while True:
                dates = DeltaTable(gold).to_pyarrow_table(columns=["order_date"]).column(0)
                if day in {str(d) for d in dates.to_pylist()}:
                    break
                time.sleep(0.2)
            times.append(round(time.perf_counter() - landed, 2))
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=100000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--freshness-samples", type=int, default=3)
    parser.add_argument("--setup", default="embedded", choices=list(setups.TARGETS))
    args = parser.parse_args()
    project, feed = make_project(args.orders, args.files)
    print("feed:", feed, "setup:", args.setup)
    with setups.prepared(project, [args.setup]):
        print("build:", json.dumps(two_phase_rates(project, args.setup), indent=2))
        if args.freshness_samples:
            times = freshness(project, args.freshness_samples, args.setup)
            print(f"watch freshness (file landed -> gold updated), seconds: {times}, "
                  f"median {statistics.median(times)}")
    shutil.rmtree(project, ignore_errors=True)


if __name__ == "__main__":
    main()
