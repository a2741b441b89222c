"""Schema change benchmark: each kind of change on_schema_change: sync_all_columns makes to a
large incremental table in place (a column added, dropped, renamed, widened, and all four at
once), against a --full-refresh of the same edit, on delta-spark.

Lands --rows events as Parquet and builds an incremental table of them (v1). Then, per kind
and --repeat times, alternating: the table put back as v1 built it (a copy, not timed), the
edited model and --new more events, then a timed build (the change in place and the new rows
appended), and again from v1, a timed --full-refresh of the edited model. Files added and
removed are counted from the Delta log's commits after v1. All in one process and one Spark
session; seconds are each build's wall time.

    python bench/schema_change_bench.py --rows 5000000
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from medallion_cli import commands

PROFILE = """\
bench:
  target: local-delta
  outputs:
    local-delta:
      engine: delta-spark
      warehouse: warehouse
      spark: {master: "local[*]", conf: {spark.driver.memory: 3g}}
"""
SOURCES = """\
sources:
  - name: landing
    path: landing
    tables:
      - name: events
        format: parquet
        schema: "seq bigint, name string, note string, amount int"
"""
CONFIG = "{{ config(materialized='incremental', on_schema_change='sync_all_columns'%s) }}\n"
NEW_ROWS = ("from {{ source('landing', 'events') }}\n"
            "{% if is_incremental() %}where seq > (select max(seq) from {{ this }}){% endif %}\n")
V1 = CONFIG % "" + "select seq, name, note, amount\n" + NEW_ROWS
RENAMED = ", renamed_columns={'name': 'customer'}"
KINDS = {kind: config + select + NEW_ROWS for kind, config, select in (  # the edited model
    ("add", CONFIG % "", "select seq, name, note, amount, concat('c', seq) as code\n"),
    ("drop", CONFIG % "", "select seq, name, amount\n"),
    ("rename", CONFIG % RENAMED, "select seq, name as customer, note, amount\n"),
    ("widen", CONFIG % "", "select seq, name, note, cast(amount as bigint) as amount\n"),
    ("all four", CONFIG % RENAMED, "select seq, name as customer, cast(amount as bigint) as "
                                   "amount, concat('c', seq) as code\n"))}


def land(root: Path, name: str, first: int, count: int) -> None:
    folder = root / "landing/events"
    folder.mkdir(parents=True, exist_ok=True)
    seq = np.arange(first, first + count, dtype=np.int64)
    pq.write_table(pa.table({
        "seq": pa.array(seq), "name": pa.array([f"n{n % 1000}" for n in seq]),
        "note": pa.array(np.where(seq % 2 == 0, "even", "odd")),
        "amount": pa.array((seq % 997).astype(np.int32))}), folder / f"{name}.parquet")


def build(root: Path, full_refresh: bool = False) -> float:
    start = time.perf_counter()
    results = commands.build(commands.Invocation(project_dir=str(root), full_refresh=full_refresh),
                             "build")
    seconds = time.perf_counter() - start
    failed = [r.message for r in results if r.failed]
    if failed:
        raise SystemExit(f"build failed: {failed}")
    return seconds


def files_changed(table: Path, after: int) -> tuple[int, int]:
    """(files added, files removed) by the commits after version `after`."""
    added = removed = 0
    for commit in sorted((table / "_delta_log").glob("*.json")):
        if int(commit.stem) > after:
            for action in map(json.loads, commit.read_text().splitlines()):
                added += "add" in action
                removed += "remove" in action
    return added, removed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--new", type=int, default=1000, help="events landed with the edit")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--kinds", default=",".join(KINDS), help="of: " + ", ".join(KINDS))
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="schema-change-bench-"))
    try:
        measure(root, args)
    finally:  # a gigabyte at 20M rows
        shutil.rmtree(root, ignore_errors=True)


def measure(root: Path, args) -> None:
    for rel, text in {"medallion_project.yml": "name: schema_bench\nprofile: bench\n",
                      "profiles/profiles.yml": PROFILE, "models/sources.yml": SOURCES,
                      "models/silver/events.sql": V1}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    chunk = 1_000_000
    for part, first in enumerate(range(1, args.rows + 1, chunk)):
        land(root, f"initial-{part:03d}", first, min(chunk, args.rows + 1 - first))
    print(f"v1 built from {args.rows} events in {build(root):.1f} s", flush=True)
    table, built = root / "warehouse/silver/events", root / "built-v1"
    shutil.copytree(root / "warehouse", built)
    v1_version = max(int(c.stem) for c in (table / "_delta_log").glob("*.json"))

    def from_v1(model: str) -> None:
        shutil.rmtree(root / "warehouse")
        shutil.copytree(built, root / "warehouse")
        shutil.rmtree(root / "target", ignore_errors=True)
        (root / "models/silver/events.sql").write_text(model)
        land(root, "new", args.rows + 1, args.new)

    for kind in args.kinds.split(","):
        model = KINDS[kind]
        in_place, full = [], []
        for _ in range(args.repeat):
            from_v1(model)
            in_place.append(build(root))
            changed = files_changed(table, v1_version)
            from_v1(model)
            full.append(build(root, full_refresh=True))
            print(f"  {kind}: in place {in_place[-1]:.2f} s (files added {changed[0]}, removed "
                  f"{changed[1]}), full refresh {full[-1]:.2f} s", flush=True)
        fast, whole = statistics.median(in_place), statistics.median(full)
        print(f"{kind}: median in place {fast:.2f} s, full refresh {whole:.2f} s: "
              f"{fast / whole:.1%} of a full refresh", flush=True)


if __name__ == "__main__":
    main()
