"""Target lags under a steady feed: lags chosen per layer against every model as fresh as it can be.

Two copies of the sample, each built once and then kept up by `medallion build --watch` while a
file of order events lands every second for `--minutes`:

    lags       the sample with its modes replaced by lags: bronze and silver 10 seconds, gold
               1 minute, gold_funnel_conversion 1 day (docs/streaming-and-cdc.md); compaction by
               the lags' default policy
    streaming  the sample as it is, every streaming model on a 1-second trigger and each gold
               table rebuilt as soon as its inputs change (what --watch does without lags)

Each landed file carries a probe order (a new order id on a day of its own); the bench times how
long after landing it shows in bronze_orders, silver_orders, gold_order_lines and
gold_daily_revenue (each table searched once per new version, read by delta-rs as any reader
would). It reports per table the p50 and p95 of those times against its target lag, the files
and bytes each table ends with against 50 files per GB plus 10, and the CPU seconds of the watch
and its Spark over the feed (its process tree, sampled at the feed's start and end).

    python bench/freshness_bench.py --minutes 10 --runs lags,streaming
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import psutil
import setups
from streaming_bench import make_project, medallion, one_second_trigger, percentile

from medallion_cli.core.locations import local_table_version
from medallion_cli.report.tablefacts import table_facts

# table -> (its path in the warehouse, the column a probe shows in, its target lag in seconds)
PROBED = {"bronze_orders": ("bronze/bronze_orders", "order_id", 10),
          "silver_orders": ("silver/silver_orders", "order_id", 10),
          "gold_order_lines": ("gold/gold_order_lines", "order_id", 60),
          "gold_daily_revenue": ("gold/gold_daily_revenue", "order_date", 60)}
LAGS = """\
  bronze:
    target_lag: 10 seconds
    strategy: append
    tags: [bronze]
  silver:
    target_lag: 10 seconds
    strategy: merge
    tags: [silver]
  gold:
    target_lag: 1 minute
    tags: [gold]
"""
PROBE_ID = 10**9
FIRST_DAY = dt.date(2031, 1, 1)


def with_lags(project: Path) -> None:
    """The sample's folder config with lags instead of modes (docs/streaming-and-cdc.md)."""
    config = project / "medallion_project.yml"
    text = config.read_text()
    start = text.index("  bronze:\n")
    config.write_text(text[:start] + LAGS)
    funnel = project / "models/gold/gold_funnel_conversion.sql"
    funnel.write_text("{{ config(target_lag='1 day') }}\n" + funnel.read_text())


def probe(n: int) -> tuple[int, str]:
    return PROBE_ID + n, (FIRST_DAY + dt.timedelta(days=n)).isoformat()


def land(project: Path, n: int) -> None:
    """One file: a probe order and a few ordinary updates of earlier probes."""
    order_id, day = probe(n)
    events = [{"order_id": order_id, "customer_id": 1 + n % 50, "product_id": "P-100",
               "quantity": 1, "status": "placed", "op": "I", "updated_at": f"{day}T12:00:00Z"}]
    events += [{"order_id": probe(k)[0], "customer_id": 1 + k % 50, "product_id": "P-100",
                "quantity": 2, "status": "shipped", "op": "U",
                "updated_at": f"{probe(k)[1]}T13:00:00Z"} for k in range(max(0, n - 3), n)]
    target = project / "landing/orders" / f"feed_{n:05d}.json"
    partial = target.with_suffix(".tmp")
    partial.write_text("".join(json.dumps(e) + "\n" for e in events))
    partial.rename(target)  # whole, as a landing zone's writer would put it


def shown(table: Path, column: str) -> set:
    """The probes a table shows now."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    try:
        dataset = DeltaTable(str(table)).to_pyarrow_dataset()
    except Exception:  # noqa: BLE001 - not created yet
        return set()
    least = PROBE_ID if column == "order_id" else FIRST_DAY
    found = dataset.to_table(columns=[column], filter=pc.field(column) >= least).column(0)
    return {str(v) for v in found.to_pylist()}


def watch_tables(warehouse: Path, landed: dict[str, float], seen: dict[str, dict[str, float]],
                 stop: threading.Event) -> None:
    """Record when each probe first shows in each table: searched at each new version."""
    versions: dict[str, int | None] = {}
    while not stop.is_set():
        for name, (path, column, _) in PROBED.items():
            version = local_table_version(warehouse / path)
            if version is None or version == versions.get(name):
                continue
            versions[name] = version
            now = time.time()
            for key in shown(warehouse / path, column) - set(seen[name]):
                if key in landed:
                    seen[name][key] = now - landed[key]
        stop.wait(0.2)


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its descendants so far."""
    root = psutil.Process(pid)
    total = 0.0
    for proc in [root, *root.children(recursive=True)]:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def run(kind: str, minutes: float, setup: str) -> dict:
    project, _ = make_project(2000, 4)
    if kind == "lags":
        with_lags(project)
    with setups.prepared(project, [setup]):
        subprocess.run(medallion("build", "--project-dir", str(project), *setups.args(setup)),
                       check=True, capture_output=True, env=setups.env())
        trigger = one_second_trigger(project) if kind == "streaming" else _nothing()
        with trigger:
            result = _fed(project, kind, minutes, setup)
    shutil.rmtree(project, ignore_errors=True)
    return result


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _fed(project: Path, kind: str, minutes: float, setup: str) -> dict:
    proc = subprocess.Popen(medallion("build", "--watch", "--project-dir", str(project),
                                      *setups.args(setup)), env=setups.env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    landed: dict[str, float] = {}
    seen: dict[str, dict[str, float]] = {name: {} for name in PROBED}
    stop = threading.Event()
    try:
        time.sleep(45)  # its first pass: the tables are up to date after the build before it
        watcher = threading.Thread(target=watch_tables, args=(
            project / "warehouse", landed, seen, stop), daemon=True)
        watcher.start()
        cpu_before, began = tree_cpu(proc.pid), time.time()
        n = 0
        while time.time() - began < minutes * 60:
            order_id, day = probe(n)
            now = time.time()
            landed[str(order_id)] = landed[day] = now
            land(project, n)
            n += 1
            time.sleep(max(0.0, began + n - time.time()))
        time.sleep(70)  # the last files' slowest tables (1 minute) catch up
        cpu = tree_cpu(proc.pid) - cpu_before
    finally:
        stop.set()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=180)
    files = {}
    for name in ("bronze_orders", "silver_orders", "gold_order_lines", "gold_daily_revenue",
                 "gold_customer_value", "silver_customers", "bronze_customers"):
        layer = name.split("_")[0]
        facts = table_facts(str(project / "warehouse" / layer / name))
        if facts:
            files[name] = {"files": facts.files, "bytes": facts.bytes,
                           "bound": int(50 * facts.bytes / 2**30 + 10)}
    tables = {}
    for name, (_, column, target) in PROBED.items():
        times = [seen[name][str(probe(k)[0] if column == "order_id" else probe(k)[1])]
                 for k in range(n) if str(probe(k)[0] if column == "order_id" else probe(k)[1])
                 in seen[name]]
        tables[name] = {"target_s": target, "probes": n, "shown": len(times),
                        "p50_s": round(percentile(times, 0.5), 1) if times else None,
                        "p95_s": round(percentile(times, 0.95), 1) if times else None}
    return {"kind": kind, "files_landed": n, "cpu_seconds": round(cpu, 1), "lag": tables,
            "files": files}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--runs", default="lags,streaming")
    parser.add_argument("--setup", default="embedded", choices=list(setups.TARGETS))
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    results = [run(kind, args.minutes, args.setup) for kind in args.runs.split(",")]
    for result in results:
        print(f"{result['kind']}: {result['files_landed']} files landed, "
              f"{result['cpu_seconds']} CPU seconds")
        for name, lag in result["lag"].items():
            print(f"  {name:<20} target {lag['target_s']:>3} s  p50 {lag['p50_s']} s  p95 "
                  f"{lag['p95_s']} s  ({lag['shown']} of {lag['probes']} probes shown)")
        for name, held in result["files"].items():
            print(f"  {name:<20} {held['files']} files, {held['bytes']} bytes "
                  f"(bound {held['bound']})")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    by_kind = {r["kind"]: r for r in results}
    if {"lags", "streaming"} <= set(by_kind):
        print("CPU seconds, lags / streaming:", round(
            by_kind["lags"]["cpu_seconds"] / by_kind["streaming"]["cpu_seconds"], 2))


if __name__ == "__main__":
    main()
