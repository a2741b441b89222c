"""Queries through `medallion serve --sql` on the sample built from a generated feed.

    python bench/sql_endpoint_bench.py --orders 300000 --repeat 5

Copies the sample, fills its landing folder with bench/generate.py's feed (its last orders
file held back), adds a `metastore: local` to its local-delta target, starts `medallion serve
--sql` on it and builds the project through the server. Then, with PyHive on the endpoint, each
query --repeat times in one session: the first run and the median of the others (warm).
Last, freshness: the held-back file lands and the project is built again while a second
session asks gold.gold_daily_revenue's sum of orders every 0.1 s; the report gives the seconds
from that table's new commit (its Delta log's timestamp) to the first answer that counts it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from generate import generate
from sample_build_bench import sample_copy

ROOT = Path(__file__).resolve().parent.parent
QUERIES = {
    "gold group by": "select order_date, sum(revenue), sum(orders) from gold.gold_daily_revenue "
                     "group by order_date order by order_date",
    "silver group by": "select status, product_id, count(*), sum(quantity) "
                       "from silver.silver_orders group by status, product_id",
}


def medallion(project: Path, *args: str, wait: bool = True):
    command = [sys.executable, "-m", "medallion_cli.cli", *args, "--project-dir", str(project)]
    if not wait:
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"medallion {' '.join(args)}:\n{done.stdout}\n{done.stderr}")
    return done


def listening(port: int, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"nothing listened on 127.0.0.1:{port}")


def timed(cursor, sql: str) -> float:
    started = time.perf_counter()
    cursor.execute(sql)
    cursor.fetchall()
    return time.perf_counter() - started


def fresh_after_commit(project: Path, port: int, held_back: Path) -> dict:
    """Land the held-back orders, build through the server while polling the gold table; the
    seconds from the gold table's new commit to the first answer that shows it."""
    from deltalake import DeltaTable
    from pyhive import hive

    cursor = hive.connect("127.0.0.1", port=port, auth="NOSASL").cursor()
    sql = "select sum(orders) from gold.gold_daily_revenue"
    cursor.execute(sql)
    before = cursor.fetchall()[0][0]
    held_back.rename(project / "landing/orders" / held_back.name)
    build = medallion(project, "build", "-t", "local-delta", wait=False)
    answers: list[tuple[float, int]] = []
    deadline = None
    while deadline is None or time.time() < deadline:
        cursor.execute(sql)
        answers.append((time.time(), cursor.fetchall()[0][0]))
        if answers[-1][1] != before:
            break
        if deadline is None and build.poll() is not None:
            deadline = time.time() + 10  # built: the answer must change now
        time.sleep(0.1)
    build.wait()
    table = DeltaTable(str(project / "warehouse-delta/gold/gold_daily_revenue"))
    committed = table.history(1)[0]["timestamp"] / 1000
    seen = next((at for at, value in answers if value != before), None)
    return {"orders before": before, "orders after": answers[-1][1], "queries": len(answers),
            "seconds from commit to first answer": None if seen is None
            else round(seen - committed, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=300000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from pyhive import hive

    with tempfile.TemporaryDirectory() as folder:
        project = sample_copy(ROOT, Path(folder) / "sample")
        shutil.rmtree(project / "landing")
        generate(project / "landing", args.orders, args.files, 7)
        last = sorted((project / "landing/orders").iterdir())[-1]
        held_back = last.rename(Path(folder) / last.name)
        profile = project / "profiles/profiles.yml"
        profile.write_text(profile.read_text().replace(
            "      # metastore: local", "      metastore: local", 1))
        port = 10000 + int(time.time()) % 5000
        server = medallion(project, "serve", "--sql", "--sql-port", str(port), "-t",
                           "local-delta", wait=False)
        try:
            listening(port)
            started = time.perf_counter()
            medallion(project, "build", "-t", "local-delta")
            print(f"build of {args.orders} orders through the server: "
                  f"{time.perf_counter() - started:.1f} s", flush=True)
            cursor = hive.connect("127.0.0.1", port=port, auth="NOSASL").cursor()
            cursor.execute("select count(*) from silver.silver_orders")
            print(f"silver.silver_orders: {cursor.fetchall()[0][0]} rows", flush=True)
            report = {}
            for name, sql in QUERIES.items():
                runs = [timed(cursor, sql) for _ in range(args.repeat)]
                report[name] = {"first": round(runs[0], 2),
                                "warm median": round(statistics.median(runs[1:]), 2)}
                print(f"{name}: first {runs[0]:.2f} s, warm median "
                      f"{statistics.median(runs[1:]):.2f} s", flush=True)
            report["freshness"] = fresh_after_commit(project, port, held_back)
            print(f"freshness: {report['freshness']}", flush=True)
            print(json.dumps(report))
        finally:
            medallion(project, "serve", "--stop", "-t", "local-delta")
            server.wait(timeout=120)


if __name__ == "__main__":
    main()
