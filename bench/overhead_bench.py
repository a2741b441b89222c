"""Framework overhead: medallion's first build, a daily increment and a no-op build, against
the same work written by hand; and the speed of `medallion compile` / `ls` on a 500-model project.

    python bench/overhead_bench.py --orders 300000 --repeat 3   # minutes a round, 2 cores
    python bench/overhead_bench.py --orders 2000 --models 50    # CI's smoke run
    python bench/overhead_bench.py --setups embedded,delta-spark,cluster --repeat 3

The feed is generated in --files files per landing folder; the last file of the orders and of
the click events (1% at the default 100) is held back. Each round, for each setup (see
setups.py: the embedded engine, delta-spark on local[2], delta-spark on a 2-worker standalone
cluster), from an empty warehouse, each command its own process (JVM start included):
  first      `medallion build --exclude resource_type:test`: seeds and models
  increment  the held-back files landed, the same command again
  no-op      `medallion build` twice (the first runs the data tests, which pass): the second
  watch      with --watch: the first build's tables back, `medallion build --watch` (trigger
             1 second) started over them, the held-back files landed: seconds until every gold
             table is rebuilt with them (the increment when the JVM stays up between loads)
  served     with --served: from an empty warehouse, `medallion serve` started, then the first
             build and the increment as above, each a command of its own that runs on the
             server's JVM; with --served daemon, no server started: the first build starts
             medallion's daemon (MEDALLION_DAEMON=on, as in a terminal) and the increment runs
             on it; `medallion serve --stop` after
  by hand    with --handwritten-increment and a delta-spark setup: the increment written by
             hand on Delta Lake for Spark in a warm JVM (handwritten_increment.py), what Delta
             itself costs for it
and then the hand-written pipeline (handwritten.py: seeds and models, no data tests) over the
files the first build read (the increment's held back), which is also nearly what a
full-recompute tool does for the increment (1% less): writing with delta-rs (the issue's
reference), and when a delta-spark setup runs, also with Delta Lake for Spark (like for like
for that engine). Rounds alternate; the report gives medians and their ratios (shared
machines are noisy: single runs of the same work vary by a third).

With --dbt PATH (a `dbt` executable with dbt-spark's session mode, in a venv of its own:
`python -m venv dbtv && dbtv/bin/pip install "dbt-spark[session]==1.11.*" "dbt-core==1.10.*"
pyspark==<the installed version>`; dbt-core 1.11 downloads a parser from GitHub as it
installs), each round also runs the tool users would pick instead:
dbt_baseline/ is the same pipeline for dbt-spark (with the sample's own gold models and
macros), every model a Parquet table recomputed from the whole feed (no Delta log), in
local[2] as medallion. Then, from empty warehouses over the
whole feed:
  build      `medallion build` (seeds, models and data tests) against `dbt build`
  recompute  `dbt build --exclude-resource-type test`: a full-recompute tool's increment,
             against medallion's increment
and the tables dbt wrote are checked against medallion's: the same row counts.

Every run is timed as a whole process, from its start to its exit, and with the CPU time the
whole machine used meanwhile (Linux: /proc/stat), all cores summed: on a CPU-bound build that
figure swings less than the wall time, so ratios of both are reported. The hand-written job's own
figure, from its SparkSession's start to its last write, is reported beside its process time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import setups
from streaming_bench import make_project, medallion, one_second_trigger

HERE = Path(__file__).resolve().parent


def machine_cpu_seconds() -> float | None:
    """CPU time all of the machine's cores have spent busy since it started (None off Linux)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = map(int, fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def measured(cmd, cwd=None, env: dict | None = None) -> tuple[dict, str]:
    """Run a command (with `env` added to medallion's environment): ({seconds, cpu_seconds},
    its output)."""
    cpu, started = machine_cpu_seconds(), time.perf_counter()
    run = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True,
                         env={**setups.env(), **(env or {})})
    seconds, cpu_after = time.perf_counter() - started, machine_cpu_seconds()
    if run.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{run.stdout}{run.stderr}")
    return {"seconds": seconds,
            "cpu_seconds": None if cpu is None else cpu_after - cpu}, run.stdout


def timed(cmd, cwd=None, env: dict | None = None) -> dict:
    return measured(cmd, cwd, env)[0]


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
    return statistics.median(timed(medallion(command, "--project-dir", str(project)))["seconds"]
                             for _ in range(runs))


BUILD_MODELS = ("build", "--exclude", "resource_type:test")
HELD_BACK = ("orders", "events")  # landing folders whose last file is the increment


def hold_back(project: Path) -> None:
    """Move the last file of each HELD_BACK landing folder aside: the increment."""
    for name in HELD_BACK:
        (project / "held_back" / name).mkdir(parents=True)
        last = sorted((project / "landing" / name).iterdir())[-1]
        last.rename(project / "held_back" / name / last.name)


def land_held_back(project: Path) -> None:
    for name in HELD_BACK:
        for f in (project / "held_back" / name).iterdir():
            f.rename(project / "landing" / name / f.name)
    shutil.rmtree(project / "held_back")


def run_medallion(project: Path, setup: str = "embedded", watch: bool = False) -> dict:
    """A first build, an increment and a no-op build from an empty warehouse: each one's
    seconds, and its CPU-seconds as `<phase>_cpu`. With watch, also the same increment under
    `build --watch` over the first build's tables (`increment_watch`, see watched_increment)."""
    for folder in ("warehouse", "target", "held_back", "after_first"):
        shutil.rmtree(project / folder, ignore_errors=True)
    hold_back(project)
    on = ["--project-dir", str(project), *setups.args(setup)]
    first = timed(medallion(*BUILD_MODELS, *on))
    first_results = run_results(project)
    first_versions = gold_versions(project) if watch else {}
    if watch:  # copied with their mtimes, which the next build compares with the landed files'
        for folder in ("warehouse", "target"):
            shutil.copytree(project / folder, project / "after_first" / folder)
    land_held_back(project)
    increment = timed(medallion(*BUILD_MODELS, *on))
    rebuilt = {name for name, version in gold_versions(project).items()
               if version > first_versions[name]} if watch else set()
    timed(medallion("build", *on))  # the data tests run once, pass, and are recorded
    noop = timed(medallion("build", *on))
    done = run_results(project)
    phases = {"first": first, "increment": increment, "noop": noop}
    watched = {}
    expected = medallion_rows(project, "gold")
    if watch:
        for folder in ("warehouse", "target"):
            shutil.rmtree(project / folder)
            (project / "after_first" / folder).rename(project / folder)
        hold_back(project)
        watched = {"increment_watch": watched_increment(project, setup, rebuilt, expected)}
    return {**{phase: run["seconds"] for phase, run in phases.items()},
            **{f"{phase}_cpu": run["cpu_seconds"] for phase, run in phases.items()},
            **watched,
            "gold_rows": expected,
            # none starts when no node needs Spark (null in run_results)
            "noop_after_spark_start": done["elapsed_seconds"] - (done["spark_start_seconds"] or 0),
            "results": first_results["results"],
            "first_spark_start": first_results["spark_start_seconds"],
            "first_in_medallion": first_results["elapsed_seconds"]}


def run_served(project: Path, setup: str, expected: dict[str, int], how: str) -> dict:
    """From an empty warehouse, with `medallion serve` running for the project (how="serve"),
    or none and medallion's daemon on (how="daemon": the first build starts it): the first
    build and then the increment, each a command of its own (its whole process) that runs on
    the server's JVM. Gold must end with the rows the increment as its own command gave it
    (`expected`)."""
    for folder in ("warehouse", "target", "held_back"):
        shutil.rmtree(project / folder, ignore_errors=True)
    hold_back(project)
    on = ["--project-dir", str(project), *setups.args(setup)]
    daemon = {"MEDALLION_DAEMON": "on"} if how == "daemon" else {}
    server = None if daemon else subprocess.Popen(
        medallion("serve", *on), env=setups.env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        if server:
            wait_for(lambda: (project / "target/serve.json").is_file(), server, what="serve")
        first = timed(medallion(*BUILD_MODELS, *on), env=daemon)
        land_held_back(project)
        increment = timed(medallion(*BUILD_MODELS, *on), env=daemon)
    finally:
        if server:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=300)
        else:
            timed(medallion("serve", "--stop", *on))
    if medallion_rows(project, "gold") != expected:
        raise SystemExit(f"served increment: gold rows {medallion_rows(project, 'gold')}, "
                         f"expected {expected}")
    return {"first": first, "increment": increment}


SERVED_BY = {"serve": "medallion serve running", "daemon": "medallion's daemon on"}


def gold_versions(project: Path) -> dict[str, int]:
    from deltalake import DeltaTable

    return {table.name: DeltaTable(str(table)).version()
            for table in (project / "warehouse/gold").iterdir()}


def watched_increment(project: Path, setup: str, rebuilt: set[str],
                      expected: dict[str, int]) -> float:
    """Seconds from the held-back files landing to the gold tables the increment changes
    (`rebuilt`) rebuilt with them, under `medallion build --watch` (trigger 1 second, batch
    models checked every 2 s) started over the first build's tables: the increment when the
    JVM is kept between loads. Gold must end with the rows the increment as its own command
    gave it (`expected`)."""
    with one_second_trigger(project):
        return _watched_increment(project, setup, rebuilt, expected)


def _watched_increment(project: Path, setup: str, rebuilt: set[str],
                       expected: dict[str, int]) -> float:
    proc = subprocess.Popen(medallion(*BUILD_MODELS, "--watch", "--log-format", "json",
                                      "--project-dir", str(project), *setups.args(setup)),
                            env=setups.env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    events: list[dict] = []

    def read() -> None:
        for line in proc.stdout:
            if line.startswith("{"):
                events.append(json.loads(line))

    def first_pass_done() -> bool:
        start = next((e for e in events if e["event"] == "start"), None)
        return start is not None and sum(e["event"] == "result" for e in events) >= start["nodes"]

    threading.Thread(target=read, daemon=True).start()
    try:
        wait_for(first_pass_done, proc)
        seen = len(events)
        landed = time.perf_counter()
        land_held_back(project)
        wait_for(lambda: {e["name"] for e in events[seen:] if e["event"] == "result"
                          and e["status"] == "success"} >= rebuilt
                 and medallion_rows(project, "gold") == expected, proc,
                 why=lambda: f"gold rows {medallion_rows(project, 'gold')}, expected {expected}; "
                             f"events since landing: {events[seen:]}")
        return time.perf_counter() - landed
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=300)


def wait_for(condition, proc: subprocess.Popen, seconds: float = 600, why=lambda: "",
             what: str = "build --watch") -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"`medallion {what}` stopped or took too long: {why()}")
        time.sleep(0.2)


def run_medallion_build(project: Path, setup: str) -> dict:
    """`medallion build` (seeds, models and data tests) over the whole feed, from an empty
    warehouse: like for like with `dbt build`."""
    for folder in ("warehouse", "target"):
        shutil.rmtree(project / folder, ignore_errors=True)
    return timed(medallion("build", "--project-dir", str(project), *setups.args(setup)))


def run_dbt(project: Path, dbt: Path, tests: bool) -> dict:
    """dbt_baseline's `dbt build` over the whole feed from an empty warehouse (with the data
    tests, or models and seeds only), in a copy beside the feed; its seconds and CPU-seconds,
    and the rows of each table it wrote."""
    folder = project / "dbt_baseline"
    if not folder.exists():
        shutil.copytree(HERE / "dbt_baseline", folder)
        (folder / "seeds").mkdir()
        shutil.copy(project / "seeds/products.csv", folder / "seeds")
        # The gold layer is batch SQL over ref() in both tools: the sample's files, not copies.
        for source, copy_to in (("models/gold", "models"), ("macros", "macros")):
            for sql in (project / source).glob("*.sql"):
                shutil.copy(sql, folder / copy_to)
    for made in ("spark-warehouse", "metastore_db", "target", "logs"):
        shutil.rmtree(folder / made, ignore_errors=True)
    warehouse = folder / "spark-warehouse"
    cmd = [str(dbt), "build", "--profiles-dir", ".", "--vars",
           json.dumps({"landing": str(project / "landing")}),
           *([] if tests else ["--exclude-resource-type", "test"])]
    run = timed(cmd, cwd=folder, env={"BASELINE_WAREHOUSE": str(warehouse),
                                      "PYSPARK_PYTHON": str(dbt.parent / "python")})
    import pyarrow.dataset as ds

    tables = {t.name: ds.dataset(t, format="parquet").count_rows()
              for t in (warehouse / "baseline.db").iterdir() if t.is_dir()}
    return {**run, "tables": tables}


def medallion_rows(project: Path, layer: str = "") -> dict[str, int]:
    """Rows of each table in the warehouse (or one layer's folder of it), from its Delta log."""
    from deltalake import DeltaTable

    return {log.parent.name: sum(DeltaTable(str(log.parent)).get_add_actions(flatten=True)
                                 .column("num_records").to_pylist())
            for log in (project / "warehouse" / layer).glob("**/_delta_log")}


def phase_seconds(run: dict) -> dict:
    """Where a first build's time went: starting Spark, then each build step summed over the
    nodes (their own threads may overlap), and the whole process."""
    steps: dict[str, float] = {}
    for result in run["results"]:
        for step, seconds in (result.get("phases") or {}).items():
            steps[step] = steps.get(step, 0.0) + seconds
    return {"process": round(run["first"], 1), "in_medallion": round(run["first_in_medallion"], 1),
            "spark_start": round(run["first_spark_start"], 1),
            **{step: round(seconds, 1) for step, seconds in sorted(steps.items())}}


def run_results(project: Path) -> dict:
    return json.loads((project / "target/run_results.json").read_text())


WRITERS = {"embedded": "delta-rs", "delta-spark": "delta-spark", "cluster": "delta-spark",
           "connect": "delta-spark"}


def run_handwritten(project: Path, writer: str) -> dict:
    """The hand-written job's process: its seconds and CPU-seconds, as medallion's are
    measured, with its own timings (`in_job`: from its SparkSession's start) and tables. It
    reads the files medallion's first build read: the increment's are held back."""
    shutil.rmtree(project / "handwritten_warehouse", ignore_errors=True)
    flags = ["--delta-spark"] if writer == "delta-spark" else []
    hold_back(project)
    try:
        process, out = measured([sys.executable, str(HERE / "handwritten.py"), str(project),
                                 *flags])
    finally:
        land_held_back(project)
    job = json.loads(out.strip().splitlines()[-1])
    return {**process, "in_job": job["seconds"], "tables": job["tables"]}


def run_handwritten_increment(project: Path) -> dict:
    """handwritten_increment.py's warm increment on the feed (its own first build first)."""
    _, out = measured([sys.executable, str(HERE / "handwritten_increment.py"), str(project)])
    run = json.loads(out.strip().splitlines()[-1])
    if any(run["rows_differing_from_recompute"].values()):
        raise SystemExit(f"hand-written increment: gold rows differ from a recompute: {run}")
    return run


def dbt_report(runs: dict, builds: dict, dbt_runs: dict, differ: dict, with_cpu: bool) -> dict:
    """medallion against dbt-spark: whole builds, and the increment against dbt's recompute."""
    keys = ("seconds", "cpu_seconds") if with_cpu else ("seconds",)
    med = lambda done, key: statistics.median(run[key] for run in done)  # noqa: E731
    return {
        "dbt (whole process)": {kind: {key: [round(run[key], 1) for run in done] for key in keys}
                                for kind, done in dbt_runs.items()},
        "medallion build with data tests (whole process)": {
            setup: {key: [round(run[key], 1) for run in done] for key in keys}
            for setup, done in builds.items()},
        "tables whose rows differ from medallion's": differ,
        **{f"ratios of medians, {key}": {
            "medallion_build_to_dbt_build": {
                setup: round(med(done, key) / med(dbt_runs["build"], key), 2)
                for setup, done in builds.items()},
            "increment_speedup_over_dbt_recompute (dbt recompute / increment)": {
                setup: round(med(dbt_runs["recompute"], key)
                             / med(runs[setup], "increment" + ("_cpu" if key != "seconds"
                                                               else "")), 2)
                for setup in runs}} for key in keys}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=300000)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--models", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--setups", default="embedded",
                        help="comma-separated: embedded, delta-spark, cluster, connect "
                             "(see setups.py)")
    parser.add_argument("--watch", action="store_true",
                        help="also time the increment under `build --watch` (increment_watch)")
    parser.add_argument("--served", nargs="?", const="serve", choices=("serve", "daemon"),
                        help="also time the first build and the increment as commands of "
                             "their own while `medallion serve` runs, or (daemon) with "
                             "medallion's daemon on (served)")
    parser.add_argument("--handwritten-increment", action="store_true",
                        help="also time the increment written by hand on Delta Lake for Spark "
                             "in a warm JVM (handwritten_increment.py), when a delta-spark "
                             "setup runs")
    parser.add_argument("--dbt", type=Path,
                        help="a dbt executable with dbt-spark[session]: also run dbt_baseline/")
    args = parser.parse_args()
    chosen = setups.parse(args.setups)

    project, feed = make_project(args.orders, args.files)
    runs: dict[str, list[dict]] = {setup: [] for setup in chosen}
    writers = ["delta-rs"] + sorted({WRITERS[s] for s in chosen} - {"delta-rs"})
    handwritten_runs: dict[str, list[dict]] = {writer: [] for writer in writers}
    builds: dict[str, list[dict]] = {setup: [] for setup in chosen}
    served_runs: dict[str, list[dict]] = {setup: [] for setup in chosen}
    dbt_runs: dict[str, list[dict]] = {"build": [], "recompute": []}
    by_hand = args.handwritten_increment and "delta-spark" in {WRITERS[s] for s in chosen}
    hand_increments: list[dict] = []
    differ: dict[str, dict] = {}
    with setups.prepared(project, chosen):
        for _ in range(args.repeat):
            for setup in chosen:
                runs[setup].append(run_medallion(project, setup, args.watch))
                if args.served:
                    served_runs[setup].append(
                        run_served(project, setup, runs[setup][-1]["gold_rows"],
                                   args.served))
            for writer in writers:
                handwritten_runs[writer].append(run_handwritten(project, writer))
            if by_hand:
                hand_increments.append(run_handwritten_increment(project))
            if args.dbt:
                for setup in chosen:
                    builds[setup].append(run_medallion_build(project, setup))
                for tests in (True, False):
                    dbt_runs["build" if tests else "recompute"].append(
                        run_dbt(project, args.dbt, tests))
                built = medallion_rows(project)
                differ.update({name: {"dbt": rows, "medallion": built.get(name, 0)}
                               for name, rows in dbt_runs["build"][-1]["tables"].items()
                               if rows != built.get(name, 0)})

    def hand(writer: str, key: str) -> float:
        return statistics.median(run[key] for run in handwritten_runs[writer])

    def median(setup: str, phase: str) -> float:
        return statistics.median(run[phase] for run in runs[setup])

    def ratios(suffix: str, key: str) -> dict:
        """Ratios of medians: medallion's phases (`first` + suffix) against the hand-written
        job's `key`, with delta-rs and with the setup's own writer."""
        rs = hand("delta-rs", key)
        return {
            "first_build_to_handwritten_delta_rs": {
                setup: round(median(setup, "first" + suffix) / rs, 2) for setup in chosen},
            "first_build_to_handwritten_same_writer": {
                setup: round(median(setup, "first" + suffix) / hand(WRITERS[setup], key), 2)
                for setup in chosen},
            "increment_speedup_over_full_recompute (handwritten delta-rs / increment)": {
                setup: round(rs / median(setup, "increment" + suffix), 2) for setup in chosen},
            "increment_speedup_over_full_recompute_same_writer": {
                setup: round(hand(WRITERS[setup], key) / median(setup, "increment" + suffix), 2)
                for setup in chosen}}

    with_cpu = machine_cpu_seconds() is not None
    phases = ("first", "increment", "noop")
    watched = {setup: [round(run["increment_watch"], 1) for run in done]
               for setup, done in runs.items() if args.watch}
    measures = ("seconds", "cpu_seconds")[:1 + with_cpu]
    served = {setup: {f"{phase} {key}": [round(run[phase][key], 1) for run in done]
                      for phase in ("first", "increment") for key in measures}
              for setup, done in served_runs.items() if args.served}
    report = {
        "feed": feed,
        "runs": args.repeat,
        "handwritten (whole process; in_job: from its SparkSession's start)": {
            writer: {key: [round(run[key], 1) for run in done] for key in (
                ("seconds", "cpu_seconds", "in_job") if with_cpu else ("seconds", "in_job"))}
            for writer, done in handwritten_runs.items()},
        "medallion (whole process)": {
            setup: {**{phase: [round(run[phase], 1) for run in done] for phase in phases},
                    **({f"{phase}_cpu_seconds": [round(run[f"{phase}_cpu"], 1) for run in done]
                        for phase in phases} if with_cpu else {}),
                    "noop_after_spark_start": [round(run["noop_after_spark_start"], 1)
                                               for run in done]}
            for setup, done in runs.items()},
        **({"medallion increment under build --watch (seconds, landed -> every gold table "
             "rebuilt)": watched} if watched else {}),
        **({f"medallion with {SERVED_BY[args.served]}, from an empty warehouse (each "
             "command's whole process)": served} if served else {}),
        **({"increment written by hand on Delta Lake for Spark, warm JVM (seconds)":
            [run["increment_seconds"] for run in hand_increments]} if by_hand else {}),
        "ratios of medians, wall seconds": ratios("", "seconds"),
        **({"ratios of medians, CPU-seconds": ratios("_cpu", "cpu_seconds")} if with_cpu else {}),
        "noop_seconds (median; after Spark started)": {
            setup: [round(median(setup, "noop"), 1),
                    round(median(setup, "noop_after_spark_start"), 1)] for setup in chosen},
        "first_build_phases (seconds, last run)": {
            setup: phase_seconds(done[-1]) for setup, done in runs.items()},
        "medallion_rows_per_second (first build)": {setup: {
            r["name"]: round((r["rows"] or 0) / r["seconds"]) for r in done[-1]["results"]
            if r["kind"] == "model" and r["rows"]} for setup, done in runs.items()},
        "handwritten_rows_per_second": {
            n: round(t["rows"] / t["seconds"]) for n, t in
            handwritten_runs["delta-rs"][-1]["tables"].items() if t["seconds"]},
    }
    if args.dbt:
        report["dbt_baseline"] = dbt_report(runs, builds, dbt_runs, differ, with_cpu)
        if watched:
            report["dbt_baseline"]["watch_increment_speedup_over_dbt_recompute"] = {
                setup: round(statistics.median(run["seconds"] for run in dbt_runs["recompute"])
                             / statistics.median(times), 2) for setup, times in watched.items()}
        if served:
            report["dbt_baseline"]["served_increment_speedup_over_dbt_recompute"] = {
                setup: {key: round(statistics.median(run[key] for run in dbt_runs["recompute"])
                                   / statistics.median(run["increment"][key] for run in done), 2)
                        for key in measures}
                for setup, done in served_runs.items()}
        if by_hand:
            recompute = statistics.median(run["seconds"] for run in dbt_runs["recompute"])
            report["dbt_baseline"]["handwritten_delta_spark_increment_speedup_over_dbt_"
                                   "recompute"] = round(recompute / statistics.median(
                                       run["increment_seconds"] for run in hand_increments), 2)
    shutil.rmtree(project, ignore_errors=True)
    wide = make_wide_project(Path(tempfile.mkdtemp(prefix="medallion-wide-")), args.models)
    report[f"compile_{args.models}_models_seconds"] = round(cli_seconds(wide, "compile"), 2)
    report[f"ls_{args.models}_models_seconds"] = round(cli_seconds(wide, "ls"), 2)
    shutil.rmtree(wide, ignore_errors=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
