"""Streaming benchmark: bronze ingest and silver merge rows/s, and --watch freshness.

Copies the sample project to a temporary folder, fills its landing zone with the generated feed,
and builds it in two halves (the second half MERGEs into existing tables), reading each model's
time and rows from target/run_results.json. Then
runs `medallion build --watch` (trigger 1 second), lands one file at a time, and times how long
until each table on its way (bronze, silver, gold_order_lines, gold_daily_revenue) shows it:
p50 and p95 per hop.

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

from medallion_cli.core.locations import local_table_version

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


# Each hop of the sample's path to gold, with the table and the column that shows an order.
HOPS = (("bronze", "bronze/bronze_orders", "order_id"),
        ("silver", "silver/silver_orders", "order_id"),
        ("gold_order_lines", "gold/gold_order_lines", "order_id"),
        ("gold", "gold/gold_daily_revenue", "order_date"))


def freshness(project: Path, samples: int, setup: str) -> list[dict]:
    with one_second_trigger(project):
        return _freshness(project, samples, setup)


def shows(table: str, column: str, value) -> bool:
    """Whether the Delta table at `table` has a row whose `column` is `value` (read by delta-rs,
    as another reader would see it)."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    try:
        dataset = DeltaTable(table).to_pyarrow_dataset()
    except Exception:  # noqa: BLE001 - not created yet
        return False
    if column == "order_date":
        value = __import__("datetime").date.fromisoformat(value)
    return dataset.count_rows(filter=pc.field(column) == value) > 0


def first_seen(table: Path, column: str, value, since: int | None) -> None:
    """Wait until the table shows the row: opened and searched once per new commit, not at
    every poll (a search of bronze_orders took 77 ms of CPU: searched every 50 ms, most of a
    core, on the two cores the watch it measures runs on). since: its version before."""
    searched = since
    while True:
        newest = local_table_version(table)
        if newest != searched:
            searched = newest
            if shows(str(table), column, value):
                return
        time.sleep(0.05)


def _freshness(project: Path, samples: int, setup: str) -> list[dict]:
    """For each order landed: seconds from its file landing to its row in each hop's table."""
    proc = subprocess.Popen(medallion("build", "--watch", "--project-dir", str(project),
                                      *setups.args(setup)), env=setups.env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    warehouse = project / "warehouse"
    measured = []
    try:
        time.sleep(20)  # the first pass: everything already landed is built once
        for n in range(samples):
            day = f"2031-{1 + n // 28:02d}-{n % 28 + 1:02d}"
            order_id = 10**9 + n
            event = {"order_id": order_id, "customer_id": 1, "product_id": "P-100",
                     "quantity": 1, "status": "placed", "op": "I",
                     "updated_at": f"{day}T12:00:00Z"}
            since = {table: local_table_version(warehouse / table) for _, table, _ in HOPS}
            landed = time.perf_counter()
            (project / "landing/orders" / f"fresh_{n}.json").write_text(json.dumps(event) + "\n")
            seen = {}
            for hop, table, column in HOPS:
                value = day if column == "order_date" else order_id
                first_seen(warehouse / table, column, value, since[table])
                seen[hop] = round(time.perf_counter() - landed, 2)
            measured.append(seen)
            time.sleep(0.5 + (n % 5) * 0.37)  # land at varied phases of the triggers
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    return measured


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def freshness_summary(measured: list[dict]) -> dict:
    """p50 and p95 of landed -> visible, per hop."""
    return {hop: {"p50": statistics.median(m[hop] for m in measured),
                  "p95": percentile([m[hop] for m in measured], 0.95)} for hop, _, _ in HOPS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=100000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--freshness-samples", type=int, default=3)
    parser.add_argument("--no-rates", action="store_true",
                        help="one build of the whole feed, then only the freshness")
    parser.add_argument("--setup", default="embedded", choices=list(setups.TARGETS))
    args = parser.parse_args()
    project, feed = make_project(args.orders, args.files)
    print("feed:", feed, "setup:", args.setup)
    with setups.prepared(project, [args.setup]):
        if args.no_rates:
            build_rates(project, args.setup)
        else:
            print("build:", json.dumps(two_phase_rates(project, args.setup), indent=2))
        if args.freshness_samples:
            measured = freshness(project, args.freshness_samples, args.setup)
            print("watch freshness, seconds from a file landed to its row in each table:")
            print(json.dumps(measured))
            print(json.dumps(freshness_summary(measured), indent=2))
    shutil.rmtree(project, ignore_errors=True)


if __name__ == "__main__":
    main()
