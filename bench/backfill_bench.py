"""Backfill benchmark: one day of a year-long table replaced (`build --start/--end`) against a
full rebuild of the same table, alternated.

Lands --rows events over 365 days as Parquet, builds a silver table of them (a table model
with `event_time`, partitioned by day unless --unpartitioned) and a gold table of daily
totals read from it. Then, for each of the two models, --repeat times: times a one-day
backfill of it, then a full rebuild (--full-refresh) of it. All in one process and one Spark session per engine;
seconds are each build's wall time. After the last backfill, the Delta log's last commit says
how many files it removed and added.

    python bench/backfill_bench.py --rows 5000000 --engine embedded
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable
from incremental_bench import PROFILE, TARGETS  # the same two local targets

from medallion_cli import commands

SOURCES = """\
sources:
  - name: landing
    path: landing
    tables:
      - name: events
        format: parquet
        schema: "event_day date, id bigint, amount bigint"
"""
SILVER = """\
{{ config(event_time='event_day'PARTITION) }}
select event_day, id, amount * {{ var('rate', 1) }} as amount
from {{ source('landing', 'events') }}
"""
GOLD = """\
{{ config(event_time='event_day') }}
select event_day, count(*) as events, sum(amount) as amount
from {{ ref('silver_events') }} group by event_day
"""
FIRST_DAY = dt.date(2025, 1, 1)


def build(root: Path, target: str, select: tuple[str, ...] = ("silver_events", "gold_daily"),
          **options) -> float:
    start = time.perf_counter()
    results = commands.build(commands.Invocation(project_dir=str(root), target=target,
                                                 select=select, **options), "build")
    seconds = time.perf_counter() - start
    failed = [r.message for r in results if r.failed]
    if failed:
        raise SystemExit(f"build failed: {failed}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--engine", choices=sorted(TARGETS), default="embedded")
    parser.add_argument("--unpartitioned", action="store_true")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="backfill-bench-"))
    try:
        measure(root, TARGETS[args.engine], args)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def measure(root: Path, target: str, args) -> None:
    partition = "" if args.unpartitioned else ", partition_by='event_day'"
    files = {"medallion_project.yml": "name: backfill_bench\nprofile: bench\n",
             "profiles/profiles.yml": PROFILE, "models/sources.yml": SOURCES,
             "models/silver/silver_events.sql": SILVER.replace("PARTITION", partition),
             "models/gold/gold_daily.sql": GOLD}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    rng = np.random.default_rng(93)
    folder = root / "landing/events"
    folder.mkdir(parents=True)
    days = np.array([FIRST_DAY + dt.timedelta(days=int(d)) for d in range(365)])
    for part, start in enumerate(range(0, args.rows, 1_000_000)):
        n = min(1_000_000, args.rows - start)
        pq.write_table(pa.table({
            "event_day": pa.array(days[rng.integers(0, 365, n)], pa.date32()),
            "id": pa.array(np.arange(start, start + n), pa.int64()),
            "amount": pa.array(rng.integers(1, 1000, n), pa.int64())}),
            folder / f"part-{part:03d}.parquet")
    print(f"{args.engine}: first build of {args.rows} events over 365 days "
          f"({'un' if args.unpartitioned else ''}partitioned): {build(root, target):.1f} s",
          flush=True)
    # silver reads the landing files whole (a source has no event_time); gold reads silver's day
    for model in ("silver_events", "gold_daily"):
        backfills, rebuilds = [], []
        for n in range(args.repeat):
            day = FIRST_DAY + dt.timedelta(days=100 + n)
            backfills.append(build(root, target, (model,), vars={"rate": n + 2}, event_range=(
                day.isoformat(), (day + dt.timedelta(days=1)).isoformat())))
            rebuilds.append(build(root, target, (model,), full_refresh=True))
            print(f"  {model}: one day {backfills[-1]:.2f} s; full rebuild {rebuilds[-1]:.2f} s",
                  flush=True)
        backfill, rebuild = statistics.median(backfills), statistics.median(rebuilds)
        print(f"{args.engine} {model}: median one-day backfill {backfill:.2f} s, full rebuild "
              f"{rebuild:.2f} s: {backfill / rebuild:.1%} of a rebuild", flush=True)
    build(root, target, event_range=("2025-06-01", "2025-06-02"))
    table = DeltaTable(str(root / "warehouse/silver/silver_events"))
    metrics = table.history(1)[0].get("operationMetrics", {})
    print(f"  the last backfill's commit: {metrics}; the table has "
          f"{len(table.file_uris())} files", flush=True)


if __name__ == "__main__":
    main()
