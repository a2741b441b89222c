"""Debezium change streams (`cdc: debezium`) into SCD1 and SCD2 silver tables, from a Kafka
topic and from JSON files, checked against a state computed here from the events alone: late
and duplicated events, deletes, tombstones and key changes included."""

import datetime as dt
import json
import random
import uuid

import pytest
from conftest import read_delta
from helpers import produce

from medallion_cli.core.errors import ProjectError
from medallion_cli.load.project import load_project

SCHEMA = "id bigint, name string, email string"
EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
MODELS = {
    "models/silver/silver_customers.sql": """\
        {{ config(materialized='streaming', cdc='debezium', unique_key='id') }}
        select id, name, email, _cdc_committed_at, _cdc_lsn, _cdc_deleted
        from {{ source('cdc', 'customers') }}
        where _corrupt_record is null
    """,
    "models/silver/silver_customers_history.sql": """\
        {{ config(materialized='streaming', cdc='debezium', unique_key='id', scd_type=2) }}
        select id, name, email, _cdc_committed_at, _cdc_lsn, _cdc_deleted
        from {{ source('cdc', 'customers') }}
        where _corrupt_record is null
    """,
}


def change_events(seed: int, count: int = 70, keys: int = 10) -> list[dict]:
    """Debezium events of one table as a connector sends them, in commit order: snapshot reads,
    creates, updates, deletes each followed by a tombstone, and key changes both as Debezium
    sends them (delete, tombstone, create) and as one update with a before image. Each is
    {"key": id, "value": envelope or None (a tombstone), "ms": commit time}."""
    rng = random.Random(seed)
    rows: dict[int, dict] = {}
    events, ms, lsn = [], millis(EPOCH), 1000

    def emit(op, before, after, key):
        events.append({"key": key, "ms": ms, "value": {
            "op": op, "before": before, "after": after, "ts_ms": ms + 7,
            "source": {"connector": "postgresql", "ts_ms": ms, "lsn": lsn, "txId": lsn}}})

    for i in range(count):
        ms += rng.choice([0, 1000, 2500])  # some changes share a millisecond: lsn orders them
        lsn += rng.randint(1, 50)
        key = rng.randint(1, keys)
        row = {"id": key, "name": f"n{i}", "email": f"e{i}@x"}
        if key not in rows:
            emit("r" if i < 5 else "c", None, row, key)
            rows[key] = row
            continue
        action = rng.choices(["u", "d", "rekey", "rekey_u"], [6, 2, 1, 1])[0]
        new_key = max(keys + 1, *rows) + 1
        if action == "u":
            emit("u", rows[key], row, key)
            rows[key] = row
        elif action == "d":
            emit("d", rows.pop(key), None, key)
            events.append({"key": key, "ms": ms, "value": None})
        elif action == "rekey":  # Debezium's own handling of a primary key change
            emit("d", rows.pop(key), None, key)
            events.append({"key": key, "ms": ms, "value": None})
            rows[new_key] = {**row, "id": new_key}
            emit("c", None, rows[new_key], new_key)
        else:  # one update event whose before and after keys differ
            rows[new_key] = {**row, "id": new_key}
            emit("u", rows.pop(key), rows[new_key], key)
    return events


def delivered(events: list[dict], seed: int) -> tuple[list[dict], list[dict]]:
    """The events in two deliveries as an at-least-once pipeline brings them: some re-sent,
    some held back into the second (late), some wrapped in the JSON converter's schema/payload."""
    rng = random.Random(seed)
    first, second = [], []
    for event in events:
        if event["value"] is not None and rng.random() < 0.3:
            event = {**event, "value": {"schema": {"type": "struct"}, "payload": event["value"]}}
        (second if rng.random() < 0.15 else first).append(event)
        if rng.random() < 0.1:
            second.append(event)  # a duplicate, delivered again later
    return first, second


def changes(events: list[dict]) -> list[tuple]:
    """(key, (ms, lsn), deleted, row) per change the events stand for; a tombstone deletes its
    key at its record time, older than any event of that millisecond."""
    out = []
    for event in events:
        value = event["value"]
        if value is None:
            out.append((event["key"], (event["ms"], -1), True, None))
            continue
        value = value.get("payload", value)
        seq = (value["source"]["ts_ms"], value["source"]["lsn"])
        before, after = value["before"], value["after"]
        if value["op"] == "d":
            out.append((before["id"], seq, True, None))
        elif before and before["id"] != after["id"]:
            out += [(before["id"], seq, True, None), (after["id"], seq, False, after)]
        else:
            out.append((after["id"], seq, False, after))
    return sorted(set((k, s, d, json.dumps(r)) for k, s, d, r in out))


def expected_current(events) -> list[tuple]:
    latest = {}
    for key, seq, deleted, row in changes(events):  # sorted by key, then sequence
        latest[key] = (deleted, json.loads(row))
    return sorted((r["id"], r["name"], r["email"]) for d, r in latest.values() if not d)


def expected_history(events) -> list[tuple]:
    timeline: dict[int, list] = {}
    for key, seq, deleted, row in changes(events):
        timeline.setdefault(key, []).append((seq, deleted, json.loads(row)))
    versions = []
    for steps in timeline.values():
        for i, (seq, deleted, row) in enumerate(steps):
            if deleted:
                continue
            following = steps[i + 1][0][0] if i + 1 < len(steps) else None
            versions.append((row["id"], row["name"], row["email"], seq[0], following,
                             following is None))
    return sorted(versions, key=str)


def millis(value) -> int | None:
    return None if value is None else round(
        value.replace(tzinfo=dt.timezone.utc).timestamp() * 1000)


def check_against_events(root, seen):
    """The tables against the state computed from the events delivered so far."""
    current = sorted((r["id"], r["name"], r["email"])
                     for r in read_delta(root / "warehouse/silver/silver_customers"))
    history = sorted(((r["id"], r["name"], r["email"], millis(r["valid_from"]),
                       millis(r["valid_to"]), r["is_current"])
                      for r in read_delta(root / "warehouse/silver/silver_customers_history")),
                     key=str)
    assert current == expected_current(seen)
    assert history == expected_history(seen)
    return current


def kafka_sources(kafka, topic):
    return f"""\
        sources:
          - name: cdc
            tables:
              - name: customers
                format: kafka
                cdc: debezium
                unique_key: id
                schema: "{SCHEMA}"
                options:
                  kafka.bootstrap.servers: "{kafka.bootstrap}"
                  subscribe: {topic}
                  startingOffsets: earliest
    """


def file_sources():
    return f"""\
        sources:
          - name: cdc
            path: landing
            tables:
              - name: customers
                format: json
                cdc: debezium
                unique_key: id
                schema: "{SCHEMA}"
    """


@pytest.mark.parametrize("feed", ["kafka", "files"])
def test_debezium_feed_builds_scd1_and_scd2_tables_equal_to_the_events_state(
        project, build, request, feed):
    events = change_events(seed=7)
    first, second = delivered(events, seed=11)
    if feed == "kafka":
        kafka = request.getfixturevalue("kafka")
        topic = f"customers_cdc_{uuid.uuid4().hex[:8]}"
        root = project({**MODELS, "models/sources.yml": kafka_sources(kafka, topic)})

        def deliver(batch, part):
            produce(kafka.bootstrap, topic, [e["value"] for e in batch],
                    keys=[json.dumps({"id": e["key"]}) for e in batch],
                    timestamps=[e["ms"] for e in batch])
    else:
        first = [e for e in first if e["value"] is not None]  # files carry no tombstones
        second = [e for e in second if e["value"] is not None]
        root = project({**MODELS, "models/sources.yml": file_sources()})

        def deliver(batch, part):
            folder = root / "landing/customers"
            folder.mkdir(parents=True, exist_ok=True)
            lines = [json.dumps(e["value"]) for e in batch] + ["not an event", "null"]
            (folder / f"part{part}.json").write_text("\n".join(lines) + "\n")

    deliver(first, 1)
    results = build(root)
    assert {r.status for r in results.values()} == {"success"}, [
        r.message for r in results.values()]
    check_against_events(root, first)
    deliver(second, 2)
    results = build(root)
    assert {r.status for r in results.values()} == {"success"}, [
        r.message for r in results.values()]
    current = check_against_events(root, first + second)
    assert len(current) >= 3  # the generated stream leaves rows to compare


@pytest.mark.one_engine("the events are unpacked by the source read in Spark, the same on both; "
                        "writes are tested above")
def test_change_events_unpacked_with_their_mapping(project, build):
    """The column mapping of one event of each kind, as documented in the README."""
    root = project({
        "models/sources.yml": file_sources(),
        "models/bronze/bronze_customer_changes.sql": """\
            {{ config(materialized='streaming') }}
            select * from {{ source('cdc', 'customers') }}
        """})
    folder = root / "landing/customers"
    folder.mkdir(parents=True)
    lines = [
        {"op": "c", "before": None, "after": {"id": 1, "name": "a", "email": "a@x", "vip": True},
         "source": {"ts_ms": 1767225600000, "lsn": 10}},
        {"schema": {}, "payload": {"op": "u", "before": {"id": 1, "name": "a", "email": "a@x"},
                                   "after": {"id": 2, "name": "b", "email": "a@x"},
                                   "source": {"ts_ms": 1767225601000, "lsn": 20}}},
        {"op": "d", "before": {"id": 2, "name": "b", "email": "a@x"}, "after": None,
         "source": {"ts_ms": 1767225602000, "lsn": None}},
        {"op": "x", "after": {"id": 3}},
    ]
    (folder / "f.json").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    result = build(root)["bronze_customer_changes"]
    assert result.status == "success"
    assert "1 malformed row(s) kept in _corrupt_record" in result.message
    rows = read_delta(root / "warehouse/bronze/bronze_customer_changes")
    at = EPOCH.replace(tzinfo=None)
    got = sorted(((r["id"], r["name"], r["_cdc_op"], r["_cdc_deleted"], r["_cdc_lsn"],
                   r["_cdc_committed_at"] and r["_cdc_committed_at"].replace(tzinfo=None),
                   r["_rescued_data"]) for r in rows if r["_corrupt_record"] is None), key=str)
    assert got == sorted([
        (1, "a", "c", False, 10, at, '{"vip":true}'),
        (1, "a", "d", True, 20, at + dt.timedelta(seconds=1), None),  # the key change: old key
        (2, "b", "c", False, 20, at + dt.timedelta(seconds=1), None),  # and new key
        (2, "b", "d", True, None, at + dt.timedelta(seconds=2), None)], key=str)
    assert [json.loads(r["_corrupt_record"]) for r in rows if r["_corrupt_record"]] == [lines[3]]


@pytest.mark.unit
@pytest.mark.parametrize("table, problem", [
    ({"format": "csv", "cdc": "debezium", "schema": "id int"}, "reads JSON change events"),
    ({"format": "json", "cdc": "debezium"}, "needs the schema of the changed table"),
    ({"format": "json", "cdc": "maxwell", "schema": "id int"}, "cdc: 'maxwell'"),
    ({"format": "json", "unique_key": "id", "schema": "id int"}, "only read with cdc"),
    ({"format": "kafka", "options": {"subscribe": "t"}}, "without kafka.bootstrap.servers"),
    ({"format": "kafka", "options": {"kafka.bootstrap.servers": "h:1", "subscribe": "t",
                                     "assign": "x"}}, "exactly one of"),
])
def test_change_and_kafka_source_mistakes_name_the_file(project, table, problem):
    source = {"sources": [{"name": "cdc", "tables": [{"name": "customers", **table}]}]}
    root = project({"models/sources.yml": json.dumps(source)})
    with pytest.raises(ProjectError, match=problem) as err:
        load_project(root)
    assert err.value.path == os_path("models/sources.yml")


def os_path(path: str) -> str:
    import os

    return path.replace("/", os.sep)


@pytest.mark.unit
def test_model_cdc_config_sets_merge_order_and_deletes(project):
    root = project({"models/silver/m.sql": "{{ config(cdc='debezium', unique_key='id', "
                                           "materialized='streaming') }} select 1 as id"})
    from medallion_cli.load.rendering import render_project

    node = render_project(load_project(root))["m"]
    assert (node.config.strategy, node.config.sequence_by, node.config.delete_when) == (
        "merge", ("_cdc_committed_at", "_cdc_lsn"), "_cdc_deleted")
    bad = project({"models/silver/m.sql": "{{ config(cdc='maxwell', unique_key='id') }} "
                                          "select 1 as id"})
    with pytest.raises(ProjectError, match="config 'cdc' is 'maxwell'"):
        render_project(load_project(bad))
