"""Event log benchmark: what one commit to <warehouse>/_medallion/events costs per engine (the
background writer makes one per second at most, holding up no build), alternating.

Each round appends one micro-batch's event per engine (an app transaction of its own) and times
it; the figure is the median and 90th percentile over --events rounds, after --warmup.

    python bench/eventlog_bench.py --events 40
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from medallion_cli import commands
from medallion_cli.commands import invocation
from medallion_cli.report.eventlog import EventLog

TARGETS = {"embedded": "local", "delta-spark": "local-delta"}
PROFILE = """\
bench:
  target: local
  outputs:
    local: {engine: embedded, warehouse: wh-embedded, spark: {master: "local[2]"}}
    local-delta: {engine: delta-spark, warehouse: wh-delta,
                  spark: {master: "local[2]", conf: {spark.sql.shuffle.partitions: 2}}}
"""


def event_logs(root: Path) -> dict[str, EventLog]:
    logs = {}
    for engine, target in TARGETS.items():
        inv = commands.Invocation(project_dir=str(root), target=target)
        loaded = invocation.load(inv)
        logs[engine] = EventLog(invocation.engine_of(loaded.project, inv), loaded.project,
                                loaded.graph, "bench")
    return logs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="eventlog-bench-"))
    (root / "profiles").mkdir()
    (root / "profiles/profiles.yml").write_text(PROFILE)
    (root / "medallion_project.yml").write_text("name: bench\nprofile: bench\n")
    (root / "models").mkdir()
    (root / "models/stream.sql").write_text("{{ config(materialized='streaming') }}select 1 as x")
    logs = event_logs(root)
    seconds: dict[str, list[float]] = {engine: [] for engine in logs}
    for batch_id in range(args.warmup + args.events):
        for engine, log in logs.items():
            event = log._event("batch", node="stream", batch_id=batch_id, rows_written=100,
                               expectations={"rule": 1}, query_id="medallion:stream:bench")
            start = time.perf_counter()
            log._append([event], ("bench", batch_id))
            if batch_id >= args.warmup:
                seconds[engine].append(time.perf_counter() - start)
    for engine, times in seconds.items():
        times.sort()
        print(f"{engine:<12} one batch event: median {statistics.median(times) * 1000:.0f} ms, "
              f"p90 {times[int(len(times) * 0.9)] * 1000:.0f} ms ({len(times)} events)")
    for log in logs.values():
        log.close()


if __name__ == "__main__":
    main()
