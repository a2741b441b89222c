"""Kafka topics as sources, against a real broker on loopback: rows with their Kafka position,
values that do not fit kept apart and counted, each record once."""

import socket
import uuid
from types import SimpleNamespace

import pytest
from conftest import DELTA_SPARK_IN_SLOW_TIER, read_delta
from helpers import produce

pytestmark = DELTA_SPARK_IN_SLOW_TIER


def kafka_project(project, kafka, topic, timeout_ms=None):
    # a client's timeout, for one request and for a whole call (no shorter than a request)
    more_options = "".join(f"\n{' ' * 22}kafka.{key}.timeout.ms: {timeout_ms}"
                           for key in ("request", "default.api") if timeout_ms)
    return project({
        "models/sources.yml": f"""\
            sources:
              - name: stream
                tables:
                  - name: orders
                    format: kafka
                    schema: "order_id bigint, status string"
                    options:
                      kafka.bootstrap.servers: "{{{{ env_var('TEST_KAFKA', '{kafka.bootstrap}') }}}}"
                      subscribe: {topic}
                      startingOffsets: earliest{more_options}
        """,
        "models/bronze/bronze_orders.sql": """\
            {{ config(materialized='streaming') }}
            select * from {{ source('stream', 'orders') }}
        """})


def test_kafka_records_land_in_bronze_once_with_their_position(project, build, kafka):
    topic = f"orders_{uuid.uuid4().hex[:8]}"
    root = kafka_project(project, kafka, topic)
    produce(kafka.bootstrap, topic, [{"order_id": 1, "status": "placed"},
                                     {"order_id": 2, "status": "paid", "extra": 7},
                                     b"not json"], keys=[1, 2, 3])
    result = build(root)["bronze_orders"]
    assert result.status == "success", result.message
    assert "1 malformed row(s) kept in _corrupt_record" in result.message
    assert list(result.stream["kafka_lag"].values()) == [0]  # all read
    assert result.stream["rows_per_second"] > 0 and result.stream["batch_seconds"]["max"] > 0
    rows = read_delta(root / "warehouse/bronze/bronze_orders")
    assert sorted((r["order_id"], r["status"], r["_key"], r["_corrupt_record"], r["_rescued_data"])
                  for r in rows if r["order_id"]) == [(1, "placed", "1", None, None),
                                                      (2, "paid", "2", None, '{"extra":7}')]
    assert [r["_corrupt_record"] for r in rows if not r["order_id"]] == ["not json"]
    assert {r["_topic"] for r in rows} == {topic}
    assert sorted((r["_partition"], r["_offset"]) for r in rows) == sorted(
        {(r["_partition"], r["_offset"]) for r in rows})  # each position once
    assert all(r["_kafka_timestamp"] is not None for r in rows)
    produce(kafka.bootstrap, topic, [{"order_id": 3, "status": "placed"}], keys=[3])
    assert build(root)["bronze_orders"].status == "success"
    again = build(root)["bronze_orders"]
    assert again.status == "up_to_date"
    assert sorted(r["order_id"] or 0 for r in read_delta(
        root / "warehouse/bronze/bronze_orders")) == [0, 1, 2, 3]


@pytest.mark.slow("a fault case: builds killed in processes of their own while a producer "
                  "runs; the default tier reads Kafka exactly once in-process (above)")
def test_every_record_lands_once_while_builds_are_killed_and_a_producer_keeps_producing(
        project, build, kafka):
    import threading

    from helpers import medallion

    topic = f"orders_{uuid.uuid4().hex[:8]}"
    root = kafka_project(project, kafka, topic)
    sources = root / "models/sources.yml"
    sources.write_text(sources.read_text().replace(
        "startingOffsets: earliest", "startingOffsets: earliest\n          maxOffsetsPerTrigger: 40"))
    total = 300
    produced = threading.Event()

    def producing():
        for start in range(0, total, 20):
            produce(kafka.bootstrap, topic, [{"order_id": i, "status": "placed"}
                                            for i in range(start, start + 20)])
        produced.set()

    producer = threading.Thread(target=producing)
    producer.start()
    # the first run dies after its Delta commit, before its checkpoint knew; the second
    # replays that batch as committed, then dies as its next batch starts
    kills = ["bronze_orders:committed:0", "bronze_orders:batch_start:1"]
    for crash_at in kills:
        run = medallion(root, "build", crash_at=crash_at)
        assert run.returncode == -9, run.stdout + run.stderr
    producer.join(timeout=300)
    assert produced.is_set()
    final = build(root)  # in this process: no JVM to start
    assert not [r.message for r in final.values() if r.failed]
    ids = sorted(r["order_id"] for r in read_delta(root / "warehouse/bronze/bronze_orders"))
    assert ids == list(range(total))


@pytest.mark.one_engine("the loss fails Spark's Kafka source before any batch is written; "
                        "the message is medallion's, the same for any engine")
def test_records_gone_from_kafka_before_they_were_read_fail_the_build_in_one_line(
        project, build, kafka):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    topic = f"orders_{uuid.uuid4().hex[:8]}"
    root = kafka_project(project, kafka, topic)
    produce(kafka.bootstrap, topic, [{"order_id": i, "status": "placed"} for i in range(10)])
    assert build(root)["bronze_orders"].status == "success"
    produce(kafka.bootstrap, topic, [{"order_id": i, "status": "placed"} for i in range(10, 20)])
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    # every record of both partitions deleted (as retention would), read or not
    for future in admin.delete_records([TopicPartition(topic, p, -1) for p in (0, 1)]).values():
        future.result(timeout=30)
    result = build(root)["bronze_orders"]
    assert result.status == "error"
    assert result.message.startswith("models/bronze/bronze_orders.sql: records this query had "
                                     "not read yet are gone from Kafka")
    assert "failOnDataLoss: false" in result.message and "\n" not in result.message
    assert sorted(r["order_id"] for r in read_delta(
        root / "warehouse/bronze/bronze_orders")) == list(range(10))  # the table as it was


@pytest.mark.one_engine("Spark's Kafka source meets the brokers before any batch is written; "
                        "the message is medallion's, the same for any engine")
def test_a_broker_that_does_not_answer_fails_the_build_in_one_line(project, build):
    """No broker at the address the source names: one line saying so and what to do, after
    the client's timeout (5 s here; Kafka's default, 60 s, is waited once: PATIENCE)."""
    with socket.socket() as nobody:  # a port nothing listens on once it is closed
        nobody.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{nobody.getsockname()[1]}"
    root = kafka_project(project, SimpleNamespace(bootstrap=address), "orders", timeout_ms=5000)
    result = build(root)["bronze_orders"]
    assert result.status == "error"
    assert result.message.startswith("models/bronze/bronze_orders.sql: no Kafka broker answered")
    assert "kafka.bootstrap.servers" in result.message and "\n" not in result.message
    assert not (root / "warehouse/bronze/bronze_orders").exists()
