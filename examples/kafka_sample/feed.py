"""Feed the Kafka sample: a broker on loopback, and the root sample's landing files replayed into
it as a Kafka producer and a Debezium connector would send them.

    python examples/kafka_sample/feed.py start      # a one-node KRaft broker on 127.0.0.1:9092
    python examples/kafka_sample/feed.py replay     # orders -> sample.orders,
                                                    # customers -> shop.public.customers (Debezium)
    python examples/kafka_sample/feed.py replay --follow 5   # then 5 new orders a second
    python examples/kafka_sample/feed.py stop       # stop the broker (by its pid), remove its data

Needs Java 17, Maven (the broker's JARs come from Maven Central, once) and confluent-kafka
(`pip install -e '.[kafka]'`).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import sys
import time
from pathlib import Path

from medallion_cli.testing import kafka_broker

HERE = Path(__file__).resolve().parent
LANDING = HERE.parent.parent / "landing"
RECORD = HERE / ".kafka" / "broker.json"
ORDERS_TOPIC, CUSTOMERS_TOPIC = "sample.orders", "shop.public.customers"


def millis(text: str) -> int:
    return int(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def customer_changes(rows: list[dict]) -> list[tuple[str, dict]]:
    """(key, Debezium event) per customer row, in file order: a customer's first row is a
    snapshot read (op r), each later one an update with the row before it."""
    current: dict[str, dict] = {}
    events = []
    for lsn, row in enumerate(rows, start=1):
        # a timestamptz column comes as ISO text (Debezium's ZonedTimestamp)
        after = {**row, "customer_id": int(row["customer_id"])}
        before = current.get(row["customer_id"])
        events.append((json.dumps({"customer_id": after["customer_id"]}), {
            "before": before, "after": after, "op": "u" if before else "r",
            "source": {"connector": "postgresql", "name": "shop", "db": "shop",
                       "schema": "public", "table": "customers",
                       "ts_ms": millis(row["updated_at"]), "lsn": 1000 + lsn},
            "ts_ms": millis(row["updated_at"])}))
        current[row["customer_id"]] = after
    return events


def order_key(line: str) -> bytes | None:
    try:
        return str(json.loads(line)["order_id"]).encode()
    except (ValueError, KeyError, TypeError):
        return None


def producer(bootstrap: str):
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})


def replay(bootstrap: str, landing: Path = LANDING) -> dict[str, int]:
    """Every landed order line and customer row into the topics; how many went to each."""
    out = producer(bootstrap)
    orders = [line for path in sorted((landing / "orders").glob("*.json"))
              for line in path.read_text().splitlines() if line.strip()]
    for line in orders:  # as landed, a cut-off line too: bronze keeps it in _corrupt_record
        out.produce(ORDERS_TOPIC, line.encode(), key=order_key(line))
    rows = [row for path in sorted((landing / "customers").glob("*.csv"))
            for row in csv.DictReader(path.open())]
    changes = customer_changes(rows)
    for key, event in changes:
        out.produce(CUSTOMERS_TOPIC, json.dumps(event).encode(), key=key.encode())
    if out.flush(30):
        raise RuntimeError(f"could not deliver every record to {bootstrap}")
    return {ORDERS_TOPIC: len(orders), CUSTOMERS_TOPIC: len(changes)}


def follow(bootstrap: str, per_second: float, first_id: int = 100_000) -> None:
    """New placed orders, `per_second` of them, until interrupted."""
    out = producer(bootstrap)
    order_id = first_id
    while True:
        now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")
        out.produce(ORDERS_TOPIC, json.dumps({
            "order_id": order_id, "customer_id": 1 + order_id % 5, "product_id": "P-100",
            "quantity": 1, "status": "placed", "op": "I", "updated_at": now}).encode(),
            key=str(order_id).encode())
        out.poll(0)
        order_id += 1
        time.sleep(1 / per_second)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("start", help="start a broker on loopback")
    start.add_argument("--port", type=int, default=9092)
    play = commands.add_parser("replay", help="replay the landing files into the topics")
    play.add_argument("--bootstrap", default=None, help="default: the broker `start` started")
    play.add_argument("--follow", type=float, default=0, metavar="PER_SECOND",
                      help="then keep producing new orders at this rate until Ctrl-C")
    commands.add_parser("stop", help="stop the broker `start` started")
    args = parser.parse_args(argv)
    if args.command == "start":
        if RECORD.exists():
            print(f"a broker is already recorded in {RECORD}; run `stop` first", file=sys.stderr)
            return 2
        broker = kafka_broker.start(port=args.port, detached=True)
        broker.record(RECORD)
        print(f"Kafka broker on {broker.bootstrap} (pid {broker.process.pid}); "
              f"log: {broker.log}")
        print(f"export KAFKA_BOOTSTRAP_SERVERS={broker.bootstrap}")
        return 0
    if args.command == "stop":
        stopped = kafka_broker.stop_recorded(RECORD)
        print("broker stopped" if stopped else "no broker was running")
        return 0
    bootstrap = args.bootstrap or (json.loads(RECORD.read_text())["bootstrap"]
                                   if RECORD.exists() else "127.0.0.1:9092")
    for topic, count in replay(bootstrap).items():
        print(f"{count} record(s) -> {topic}")
    if args.follow:
        try:
            follow(bootstrap, args.follow)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
