"""The Kafka-fed sample (examples/kafka_sample): the root sample's landing files replayed into
a real broker by feed.py (orders as JSON values, customers as Debezium changes) build the same
current orders and customer history as the files describe."""

import csv
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import DELTA_SPARK_IN_SLOW_TIER, read_delta

pytestmark = DELTA_SPARK_IN_SLOW_TIER

EXAMPLE = Path(__file__).resolve().parents[1] / "examples/kafka_sample"


def load_feed():
    spec = importlib.util.spec_from_file_location("kafka_sample_feed", EXAMPLE / "feed.py")
    feed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(feed)
    return feed


def test_feed_script_starts_and_stops_a_broker_by_its_recorded_pid(tmp_path, monkeypatch):
    import os

    feed = load_feed()
    monkeypatch.setattr(feed, "RECORD", tmp_path / "broker.json")
    assert feed.main(["start", "--port", "0"]) == 0
    pid = json.loads((tmp_path / "broker.json").read_text())["pid"]
    os.kill(pid, 0)  # running
    assert feed.main(["start"]) == 2  # one at a time
    assert feed.main(["stop"]) == 0
    assert not (tmp_path / "broker.json").exists()
    try:
        os.kill(pid, 0)
        raise AssertionError("the broker is still running")
    except ProcessLookupError:
        pass


@pytest.mark.unit
def test_a_child_stopped_by_its_pid_is_gone_even_when_it_ends_after_the_wait(monkeypatch):
    """stop_pid reaps a process it started once the process has ended, however long after
    the wait that ending takes (a SIGKILLed JVM on a loaded machine): an unreaped child still
    answers os.kill, as the feed script's test once saw ("the broker is still running")."""
    from medallion_cli.core import processes

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    monkeypatch.setattr(processes, "ended", lambda pid, timeout: False)  # slower than the wait
    assert processes.stop_pid(child.pid, timeout=0)
    with pytest.raises(ProcessLookupError):
        os.kill(child.pid, 0)


def parsed_lines(folder: Path) -> list[dict]:
    """The JSON lines that parse (the sample lands a cut-off one too)."""
    parsed = []
    for line in (line for p in sorted(folder.glob("*.json")) for line in p.read_text().splitlines()):
        try:
            parsed.append(json.loads(line))
        except ValueError:
            continue
    return parsed


def expected_customer_history(landing: Path) -> list[tuple]:
    rows = sorted((r for p in sorted((landing / "customers").glob("*.csv"))
                   for r in csv.DictReader(p.open())), key=lambda r: r["updated_at"])
    history, by_key = [], {}
    for row in rows:
        by_key.setdefault(int(row["customer_id"]), []).append(row)
    for key, versions in by_key.items():
        for i, row in enumerate(versions):
            nxt = versions[i + 1]["updated_at"] if i + 1 < len(versions) else None
            history.append((key, row["name"], row["email"].lower(), row["country"],
                            row["updated_at"], nxt, nxt is None))
    return sorted(history, key=str)


def test_kafka_sample_builds_from_the_replayed_feed(tmp_path, build, kafka, monkeypatch,
                                                     engine_name):
    feed = load_feed()
    root = tmp_path / "kafka_sample"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".kafka", "warehouse*"))
    suffix = uuid.uuid4().hex[:8]  # topics of their own: the broker is shared by the run
    sources = root / "models/sources.yml"
    sources.write_text(sources.read_text().replace("subscribe: sample.orders",
                                                   f"subscribe: sample.orders.{suffix}")
                       .replace("subscribe: shop.public.customers",
                                f"subscribe: shop.public.customers.{suffix}"))
    monkeypatch.setattr(feed, "ORDERS_TOPIC", f"sample.orders.{suffix}")
    monkeypatch.setattr(feed, "CUSTOMERS_TOPIC", f"shop.public.customers.{suffix}")
    counts = feed.replay(kafka.bootstrap)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka.bootstrap)
    monkeypatch.setenv("MEDALLION_WAREHOUSE", str(tmp_path / "warehouse"))
    target = "local" if engine_name == "embedded" else "local-delta"
    results = build(root, target=target)
    assert {r.status for r in results.values()} == {"success"}, {
        n: r.message for n, r in results.items()}
    warehouse = tmp_path / "warehouse"
    bronze = read_delta(warehouse / "bronze/bronze_orders")
    assert len(bronze) == counts[f"sample.orders.{suffix}"]  # every record, malformed ones too
    latest = {}
    for event in sorted(parsed_lines(feed.LANDING / "orders"), key=lambda e: e["updated_at"]):
        if isinstance(event["quantity"], int):
            latest[event["order_id"]] = event
    assert sorted(r["order_id"] for r in read_delta(warehouse / "silver/silver_orders")) == sorted(
        k for k, e in latest.items() if e["op"] != "D")

    def text(value):
        return None if value is None else value.strftime("%Y-%m-%dT%H:%M:%SZ")

    history = sorted(((r["customer_id"], r["name"], r["email"], r["country"],
                       text(r["valid_from"]), text(r["valid_to"]), r["is_current"])
                      for r in read_delta(warehouse / "silver/silver_customers")), key=str)
    assert history == expected_customer_history(feed.LANDING)
    gold = read_delta(warehouse / "gold/gold_customer_orders")
    assert {r["customer_id"]: r["country"] for r in gold}[2] == "US"
