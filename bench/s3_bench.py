"""The sample on S3 against the sample in a local folder: one first build of the sample (and
a rebuild with nothing new) on either engine, on a fresh S3 prefix or a fresh local copy, for
farm-bench to time in turn, with the requests each S3 build made of the store.

    python bench/s3_bench.py serve &            # moto's S3 server on loopback, landing uploaded
    farm-bench -n 3 --timeout 1800 --vs 'python bench/s3_bench.py one --where local' \
        -- python bench/s3_bench.py one --where s3        # --engine embedded: the other engine
    cat /tmp/medallion-s3-bench/requests.jsonl  # each S3 run's requests by kind

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
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from medallion_cli.testing import s3_server  # noqa: E402

SAMPLE_PARTS = ("models", "macros", "seeds", "landing", "tests", "profiles",
                "medallion_project.yml")


def sample_copy(dest: Path) -> Path:
    dest.mkdir(parents=True)
    for part in SAMPLE_PARTS:
        (shutil.copytree if (ROOT / part).is_dir() else shutil.copy)(ROOT / part, dest / part)
    return dest


STATE = Path(tempfile.gettempdir()) / "medallion-s3-bench"


def build(project: Path, env: dict) -> None:
    out = subprocess.run([sys.executable, "-m", "medallion_cli.cli", "build"], cwd=project,
                         env=env, capture_output=True, text=True)
    if out.returncode != 0 or "25 success" not in out.stdout and "25 up to date" not in out.stdout:
        raise SystemExit(f"build failed in {project}:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")


def serve() -> None:
    server = s3_server.start()
    server.create_bucket("bench")
    server.upload_folder(ROOT / "landing", "s3://bench/landing")
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


def one(where: str, engine: str) -> None:
    """One first build and one rebuild, in a fresh place."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEDALLION_")}
    work = Path(tempfile.mkdtemp(prefix="run-", dir=STATE))
    project = sample_copy(work / "sample")
    if where == "local":
        env = {**base, "MEDALLION_TARGET": TARGETS[engine][0]}
        build(project, env)
        build(project, env)
        shutil.rmtree(work)
        return
    state = json.loads((STATE / "server.json").read_text())
    server = s3_server.S3Server("", None, Path(state["log"]))
    shutil.rmtree(project / "landing")
    env = {**base, **state["env"], "MEDALLION_TARGET": TARGETS[engine][1],
           "MEDALLION_WAREHOUSE": f"s3://bench/{uuid.uuid4().hex[:8]}",
           "MEDALLION_LANDING": "s3://bench/landing"}
    counts = {}
    for kind in ("first", "again"):
        before = server.requests()
        build(project, env)
        counts[kind] = dict(server.requests() - before)
    with open(STATE / "requests.jsonl", "a") as out:
        out.write(json.dumps({"engine": engine, **counts}) + "\n")
    shutil.rmtree(work)


def main() -> None:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve")
    run = commands.add_parser("one")
    run.add_argument("--where", choices=("s3", "local"), required=True)
    run.add_argument("--engine", choices=tuple(TARGETS), default="delta-spark")
    args = parser.parse_args()
    if args.command == "serve":
        serve()
    else:
        one(args.where, args.engine)


if __name__ == "__main__":
    main()
