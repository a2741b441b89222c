"""The sample on S3 against the sample in a local folder: one first build of the sample (and
a rebuild with nothing new) on either engine, on a fresh S3 prefix or a fresh local copy, for
farm-bench to time in turn, with the requests each S3 build made of the store.

    python bench/s3_bench.py serve &            # moto's S3 server on loopback, landing uploaded
    farm-bench -n 3 --timeout 1800 --vs 'python bench/s3_bench.py one --where local' \
        -- python bench/s3_bench.py one --where s3        # --engine embedded: the other engine
    cat /tmp/medallion-s3-bench/runs.jsonl      # each run's builds: seconds, S3 requests by kind

With --orders N (serve and one alike) the feed is bench/generate.py's, N orders in 100 files
a folder: the first build lands all but the last file of orders and events, the second build
is the 1% increment that lands them. Each run appends its builds' own seconds to
runs.jsonl.

moto answers from memory on this machine: the ratio is medallion's own cost of object storage
(more requests, S3A's listings and copies), not a network's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from medallion_cli.storage.object_store import s3_client  # noqa: E402
from medallion_cli.testing import s3_server  # noqa: E402

SAMPLE_PARTS = ("models", "macros", "seeds", "landing", "tests", "profiles",
                "medallion_project.yml")


def sample_copy(dest: Path) -> Path:
    dest.mkdir(parents=True)
    for part in SAMPLE_PARTS:
        (shutil.copytree if (ROOT / part).is_dir() else shutil.copy)(ROOT / part, dest / part)
    return dest


STATE = Path(tempfile.gettempdir()) / "medallion-s3-bench"


def build(project: Path, env: dict) -> float:
    """One build; its seconds."""
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "medallion_cli.cli", "build"], cwd=project,
                         env=env, capture_output=True, text=True)
    if out.returncode != 0 or "Done. 2" not in out.stdout or " 0 error" not in out.stdout:
        raise SystemExit(f"build failed in {project}:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return time.perf_counter() - started


HELD_BACK = ("orders", "events")  # the folders whose last file is the increment


def feed(orders: int) -> Path:
    """The generated feed of that size (made once): landing/ without the increment, held/
    with it."""
    folder = STATE / f"feed-{orders}"
    if not (folder / "held").is_dir():
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run([sys.executable, str(ROOT / "bench/generate.py"), "--dest",
                        str(folder / "landing"), "--orders", str(orders), "--files", "100"],
                       check=True, capture_output=True)
        for name in HELD_BACK:
            last = sorted((folder / "landing" / name).glob("*"))[-1]
            (folder / "held" / name).mkdir(parents=True)
            last.rename(folder / "held" / name / last.name)
    return folder


def serve(orders: int | None) -> None:
    server = s3_server.start()
    server.create_bucket("bench")
    server.upload_folder(ROOT / "landing", "s3://bench/landing")
    if orders:
        server.upload_folder(feed(orders) / "landing", f"s3://bench/feed-{orders}")
    STATE.mkdir(exist_ok=True)
    (STATE / "server.json").write_text(json.dumps({"env": server.aws_env(),
                                                   "log": str(server.log)}))
    print(f"serving {server.endpoint}; stop with kill {os.getpid()}", flush=True)
    # kill's SIGTERM ends this process through `finally`, which stops the server it started
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.process.wait()
    finally:
        server.stop()


# The sample's targets: (local, on S3) per engine.
TARGETS = {"delta-spark": ("local-delta", "s3"), "embedded": ("local", "s3-embedded")}


def one(where: str, engine: str, orders: int | None) -> None:
    """One first build and one rebuild (with --orders, the increment), in a fresh place."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEDALLION_")}
    work = Path(tempfile.mkdtemp(prefix="run-", dir=STATE))
    project = sample_copy(work / "sample")
    generated = feed(orders) if orders else None
    if generated:
        shutil.rmtree(project / "landing")
        shutil.copytree(generated / "landing", project / "landing")
    server, landing = None, project / "landing"
    env = {**base, "MEDALLION_TARGET": TARGETS[engine][0]}
    if where == "s3":
        state = json.loads((STATE / "server.json").read_text())
        server = s3_server.S3Server("", None, Path(state["log"]))
        os.environ.update(state["env"])
        client = s3_client()
        prefix = uuid.uuid4().hex[:8]
        landing = f"s3://bench/{prefix}/landing"
        if generated:  # a landing zone of its own, copied within the store
            for page in client.get_paginator("list_objects_v2").paginate(
                    Bucket="bench", Prefix=f"feed-{orders}/"):
                for item in page.get("Contents", []):
                    client.copy_object(Bucket="bench", CopySource={
                        "Bucket": "bench", "Key": item["Key"]}, Key=f"{prefix}/landing/"
                        + item["Key"].split("/", 1)[1])
        else:
            landing = "s3://bench/landing"
        shutil.rmtree(project / "landing")
        env = {**base, **state["env"], "MEDALLION_TARGET": TARGETS[engine][1],
               "MEDALLION_WAREHOUSE": f"s3://bench/{prefix}/lake", "MEDALLION_LANDING": landing}
    counts, seconds = {}, {}
    for kind in ("first", "increment" if generated else "again"):
        if kind == "increment":
            for name in HELD_BACK:
                for path in (generated / "held" / name).iterdir():
                    if server:
                        client.upload_file(str(path), "bench",
                                           f"{prefix}/landing/{name}/{path.name}")
                    else:
                        shutil.copy(path, landing / name / path.name)
        before = server.requests() if server else None
        seconds[kind] = round(build(project, env), 2)
        if server:
            counts[kind] = dict(server.requests() - before)
    with open(STATE / "runs.jsonl", "a") as out:
        out.write(json.dumps({"engine": engine, "where": where, "orders": orders,
                              "seconds": seconds, "requests": counts}) + "\n")
    shutil.rmtree(work)


def main() -> None:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    serving = commands.add_parser("serve")
    serving.add_argument("--orders", type=int, help="also upload a generated feed of this size")
    run = commands.add_parser("one")
    run.add_argument("--where", choices=("s3", "local"), required=True)
    run.add_argument("--engine", choices=tuple(TARGETS), default="delta-spark")
    run.add_argument("--orders", type=int, help="the generated feed, its last 1%% the increment")
    args = parser.parse_args()
    if args.command == "serve":
        serve(args.orders)
    else:
        one(args.where, args.engine, args.orders)


if __name__ == "__main__":
    main()
