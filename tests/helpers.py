"""What several test files share: small projects (the streaming sample's models and sources),
landing files, helpers that run the CLI or read what a build left. Test files import from here,
never from one another."""

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import at, model_tables, read_delta
from deltalake import DeltaTable

from medallion_cli import commands
from medallion_cli.storage.object_store import aws_settings, deltars_options


def produce(bootstrap: str, topic: str, values: list, keys: list | None = None,
            timestamps: list | None = None) -> None:
    """Values as JSON (bytes as they are, None as a tombstone), with keys and record timestamps
    (milliseconds) when given."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic not in admin.list_topics(timeout=30).topics:
        admin.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i, value in enumerate(values):
        raw = value if isinstance(value, bytes) or value is None else json.dumps(value).encode()
        producer.produce(topic, raw, key=None if keys is None else str(keys[i]).encode(),
                         timestamp=0 if timestamps is None else timestamps[i])
    assert producer.flush(30) == 0


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


DOCS_MODELS = {
    "models/sources.yml": """\
        sources:
          - name: landing
            path: landing
            freshness: {warn_after: 1 day}
            tables:
              - name: sales
                format: json
                description: Sales as the tills send them.
                schema: "sku string, qty int, price double"
                columns:
                  - {name: sku, description: The till's code, tests: [not_null]}
    """,
    "seeds/skus.csv": "sku,label\nA,Apples\n",
    "models/bronze/raw_sales.sql": "select * from {{ source('landing', 'sales') }}",
    "models/silver/sales.sql": "select s.sku, k.label, s.qty * s.price as amount "
                               "from {{ ref('raw_sales') }} s join {{ ref('skus') }} k "
                               "on k.sku = s.sku",
    "models/gold/by_label.sql": "select label, sum(amount) as total from {{ ref('sales') }} "
                                "group by label",
    "models/props.yml": """\
        models:
          - name: sales
            description: Priced sales.
            columns:
              - {name: sku, description: Stock keeping unit, tests: [not_null]}
    """,
}


def page_data(path):
    text = path.read_text()
    raw = re.search(r'<script id="project-data" type="application/json">(.*?)</script>', text,
                    re.S).group(1)
    return json.loads(raw.replace("<\\/", "</"))


def medallion(root, *args, crash_at=None, wait=True, env=None, timeout=600, cwd=None,
              merged=True, quiet=False):
    """`medallion ARGS --project-dir ROOT` in a process of its own (a fresh Python and JVM): the
    one way the tests start the CLI where a process must really start, exit, be killed or
    signalled; everywhere else they call the commands in-process. `env`: variables set for this
    run only; `crash_at`: the fault point at which the process kills itself; no `root`: no
    --project-dir (it is in `args`, or the `cwd` is the project). Returns the finished run
    (stdout and stderr apart), or with wait=False the running process (its output as text,
    stderr in stdout unless not `merged`; none kept when `quiet`, for a process no one reads,
    which must not fill a pipe)."""
    env = {**os.environ, "MEDALLION_CRASH_AT": crash_at or "", **(env or {})}
    where = ["--project-dir", str(root)] if root is not None else []
    command = [sys.executable, "-m", "medallion_cli.cli", *args, *where]
    if not wait:
        out = subprocess.DEVNULL if quiet else subprocess.PIPE
        return subprocess.Popen(command, env=env, cwd=cwd, stdout=out, text=True,
                                stderr=subprocess.STDOUT if merged else out)
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


ROOT = Path(__file__).resolve().parent.parent


PROJECT_PARTS = ("medallion_project.yml", "profiles", "models", "macros", "seeds", "landing",
                 "tests")


def sample_copy(dest):
    dest.mkdir()
    for part in PROJECT_PARTS:
        src = ROOT / part
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / part)
    return dest


LOCAL_TARGETS = {"embedded": "local", "delta-spark": "local-delta"}


@dataclass(frozen=True)
class LocalSample:
    """The sample built in a local folder on each engine: what a build of it elsewhere (on S3,
    a cluster, over Spark Connect, across engines) must equal. Built once a test run, in the
    process of the first worker to ask (its session's Spark); the others wait for it and read
    what it kept in `shared`, a folder every worker of the run sees."""
    shared: Path

    def warehouse(self, engine: str) -> Path:
        root = self.shared / f"sample-{engine}"
        with open(self.shared / f"sample-{engine}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # held until the file closes
            if not (root / "built").exists():
                shutil.rmtree(root, ignore_errors=True)  # a worker that died building it
                sample_copy(root)
                with pytest.MonkeyPatch.context() as env:
                    env.setenv("MEDALLION_WAREHOUSE", "warehouse")
                    env.delenv("MEDALLION_LANDING", raising=False)
                    results = commands.build(commands.Invocation(
                        project_dir=str(root), target=LOCAL_TARGETS[engine]), "build")
                assert not [r.message for r in results if r.failed]
                (root / "built").touch()
        return root / "warehouse"

    def tables(self, engine: str) -> dict:
        return tables_of(self.warehouse(engine))


VOLATILE = ("_ingested_at", "_quarantined_at", "_deleted_at")  # when a row arrived differs between builds


def comparable(row: dict) -> tuple:
    """A row without arrival times, its source file named without the project's folder."""
    if row.get("_source_file"):
        row = {**row, "_source_file": row["_source_file"].rsplit("/", 1)[-1]}
    return tuple(sorted((k, str(v)) for k, v in row.items() if k not in VOLATILE))


def tables_of(warehouse):
    return {str(p.relative_to(warehouse)): sorted(comparable(row) for row in read_delta(p))
            for p in model_tables(warehouse)}


def s3_tables(server, url: str) -> dict[str, list]:
    """Every Delta table under s3://bucket/prefix, read by delta-rs, as tables_of reads a
    local warehouse."""
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    keys = [o["Key"] for page in server.client().get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix + "/") for o in page.get("Contents", [])]
    roots = sorted({k.split("/_delta_log/")[0] for k in keys if "/_delta_log/" in k})
    options = deltars_options(aws_settings(server.aws_env()))
    return {root.removeprefix(prefix + "/"): sorted(
                comparable(row) for row in DeltaTable(f"s3://{bucket}/{root}",
                                                      storage_options=options)
                .to_pyarrow_table().to_pylist())
            for root in roots if not root.removeprefix(prefix + "/").startswith("_")}


SOURCES = """\
sources:
  - name: landing
    path: landing
    tables:
      - name: orders
        format: json
        schema: "order_id bigint, status string, op string, seq int"
        options: {maxFilesPerTrigger: 1}
      - name: customers
        format: json
        schema: "customer_id bigint, tier string, op string, changed_at timestamp"
"""


MODELS = {
    "models/sources.yml": SOURCES,
    "models/bronze/bronze_orders.sql": """\
        {{ config(materialized='streaming') }}
        select *, current_timestamp() as _ingested_at from {{ source('landing', 'orders') }}
    """,
    "models/silver/silver_orders.sql": """\
        {{ config(materialized='streaming', strategy='merge', unique_key='order_id',
                  sequence_by='seq', delete_when="op = 'D'") }}
        select order_id, status, op, seq from {{ ref('bronze_orders') }}
        where _corrupt_record is null
    """,
}


def land(root, name, events):
    folder = root / "landing/orders"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(e) + "\n" for e in events))


def expected_state(events):
    """The latest event per key by seq (later landing wins a tie); a delete removes the key."""
    latest = {}
    for e in events:
        if e["order_id"] not in latest or e["seq"] >= latest[e["order_id"]]["seq"]:
            latest[e["order_id"]] = e
    return sorted(({k: e[k] for k in ("order_id", "status", "op", "seq")}
                   for e in latest.values() if e["op"] != "D"), key=lambda r: r["order_id"])


def silver(root):
    return sorted(read_delta(at(root, "silver/silver_orders")), key=lambda r: r["order_id"])


# A model over MODELS' bronze that fails on every row ('placed' is no int).
FAILING_CAST = ("{{ config(materialized='table') }}\n"
                "select cast(status as int) as status_code from {{ ref('bronze_orders') }}\n")


BATCH_1 = [{"order_id": i, "status": "placed", "op": "I", "seq": 1} for i in range(1, 6)]


BATCH_2 = [
    {"order_id": 1, "status": "shipped", "op": "U", "seq": 3},
    {"order_id": 2, "status": "paid", "op": "U", "seq": 2},
    {"order_id": 3, "op": "D", "status": None, "seq": 2},
    {"order_id": 6, "status": "placed", "op": "I", "seq": 1},
]


BATCH_3 = [
    {"order_id": 1, "status": "paid", "op": "U", "seq": 2},  # older than 'shipped': ignored
    {"order_id": 4, "status": "paid", "op": "U", "seq": 2},
    {"order_id": 7, "status": "placed", "op": "I", "seq": 1},
]
