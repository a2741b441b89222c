"""Queries through `medallion serve --sql`, and Trino, on the sample built from a generated feed.

    python bench/sql_endpoint_bench.py --orders 300000 --repeat 5 [--target local-delta]

Copies the sample, fills its landing folder with bench/generate.py's feed (its last orders
file held back), and starts a Hive Metastore on PostgreSQL (medallion_cli.testing, as the tests
do) that both targets below name. The project is built on --target: `hive` (the embedded
engine, registering through the metastore's API) or `local-delta` (delta-spark, built on the
server). `medallion serve --sql -t local-delta` answers; with Java 24+ on the machine, Trino's
Delta connector reads the same metastore too. Each query runs --repeat times in one session:
the first run and the median of the others (warm). Last, freshness: the held-back file lands
and the project is built again while each reader asks gold.gold_daily_revenue's sum of
orders every 0.1 s; the report gives, per reader, the seconds from that table's new commit
(its Delta log's timestamp) to the start of the first query that counted it and to its answer.
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
import threading
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


def first_changed(ask, before: int, stop: threading.Event, seen: list[float]) -> None:
    """Ask every 0.1 s until the answer differs from `before` or stop; `seen` gets the times
    the last query not counting the change started, the first counting it started, and when
    that one answered (a query started before the commit may answer long after it)."""
    last = time.time()
    while not stop.is_set():
        started = time.time()
        if ask() != before:
            seen.extend([last, started, time.time()])
            return
        last = started
        time.sleep(0.1)


def fresh_after_commit(project: Path, target: str, readers: dict, held_back: Path) -> dict:
    """Land the held-back orders and build while each reader polls the gold table; per
    reader, seconds from the gold table's new commit to the start of the first query that
    counted it (the change became visible between the query before it and it), and to its
    answer."""
    from deltalake import DeltaTable

    before = {name: ask() for name, ask in readers.items()}
    held_back.rename(project / "landing/orders" / held_back.name)
    stop = threading.Event()
    seen: dict[str, list[float]] = {name: [] for name in readers}
    polls = [threading.Thread(target=first_changed, args=(ask, before[name], stop, seen[name]))
             for name, ask in readers.items()]
    for poll in polls:
        poll.start()
    medallion(project, "build", "-t", target)
    deadline = time.monotonic() + 10  # built: every answer must change now
    while any(poll.is_alive() for poll in polls) and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    for poll in polls:
        poll.join()
    warehouse = "warehouse-delta" if target == "local-delta" else "warehouse"
    table = DeltaTable(str(project / warehouse / "gold/gold_daily_revenue"))
    committed = table.history(1)[0]["timestamp"] / 1000
    return {name: None if not times else {
        "query before it started": round(times[0] - committed, 2),
        "first query counting it started": round(times[1] - committed, 2),
        "and answered": round(times[2] - committed, 2)} for name, times in seen.items()}


def sum_of_orders(cursor, sql: str = "select sum(orders) from gold.gold_daily_revenue"):
    def ask() -> int:
        cursor.execute(sql)
        return cursor.fetchall()[0][0]
    return ask


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=300000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--target", choices=["hive", "local-delta"], default="hive")
    args = parser.parse_args()
    import trino as trino_client
    from pyhive import hive

    from medallion_cli.testing import hive_metastore, trino

    with tempfile.TemporaryDirectory() as folder:
        project = sample_copy(ROOT, Path(folder) / "sample")
        shutil.rmtree(project / "landing")
        generate(project / "landing", args.orders, args.files, 7)
        last = sorted((project / "landing/orders").iterdir())[-1]
        held_back = last.rename(Path(folder) / last.name)
        metastore = hive_metastore.start()
        reader = server = None
        profile = project / "profiles/profiles.yml"
        profile.write_text(profile.read_text().replace(
            "      # metastore: local", f"      metastore: {metastore.uri}", 1).replace(
            "thrift://localhost:9083", metastore.uri))
        port = 10000 + int(time.time()) % 5000
        try:
            reader = trino.start(metastore.uri)
            server = medallion(project, "serve", "--sql", "--sql-port", str(port), "-t",
                               "local-delta", wait=False)
            listening(port)
            started = time.perf_counter()
            medallion(project, "build", "-t", args.target)
            print(f"build of {args.orders} orders on {args.target}: "
                  f"{time.perf_counter() - started:.1f} s", flush=True)
            cursors = {"thrift": hive.connect("127.0.0.1", port=port, auth="NOSASL").cursor()}
            if reader is None:
                print("Trino: not measured (it needs Java 24+)", flush=True)
            else:
                cursors["trino"] = trino_client.dbapi.connect(
                    host="127.0.0.1", port=reader.port, user="bench", catalog="delta").cursor()
            report: dict = {}
            for reader_name, cursor in cursors.items():
                for name, sql in QUERIES.items():
                    runs = [timed(cursor, sql) for _ in range(args.repeat)]
                    report[f"{reader_name}: {name}"] = {
                        "first": round(runs[0], 2),
                        "warm median": round(statistics.median(runs[1:]), 2)}
                    print(f"{reader_name}: {name}: first {runs[0]:.2f} s, warm median "
                          f"{statistics.median(runs[1:]):.2f} s", flush=True)
            report["seconds from commit to first answer"] = fresh_after_commit(
                project, args.target, {name: sum_of_orders(cursor)
                                       for name, cursor in cursors.items()}, held_back)
            print(f"freshness: {report['seconds from commit to first answer']}", flush=True)
            print(json.dumps(report))
        finally:
            if server is not None:
                medallion(project, "serve", "--stop", "-t", "local-delta")
                server.wait(timeout=120)
            if reader is not None:
                reader.stop()
            metastore.stop()


if __name__ == "__main__":
    main()
