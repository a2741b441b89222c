"""Streaming models on real files and Delta tables: merge semantics, no-op rebuilds,
compaction, SCD2, malformed rows, schema changes, full refresh, and crashes mid-batch."""

import json
import shutil
import signal

import pytest
from conftest import ON_BOTH_STORES, REMOTE, at, delta_table, read_delta
from deltalake import DeltaTable
from helpers import (
    BATCH_1,
    BATCH_2,
    BATCH_3,
    MODELS,
    SOURCES,
    expected_state,
    land,
    medallion,
    silver,
)

from medallion_cli.report.eventlog import LOGGED_FILE, RECOVERED
from medallion_cli.storage.object_store import read_bytes, storage_options


def versions(root):
    return {t: delta_table(at(root, t)).version()
            for t in ("bronze/bronze_orders", "silver/silver_orders")}


@ON_BOTH_STORES
@pytest.mark.slow_case("delta-spark's reads and writes on S3 are the engine contract's "
                       "(test_engine_contract.py, on both stores)", engine_name="delta-spark",
                       store="s3")
def test_land_build_land_more_build(project, build):
    root = project(MODELS)
    land(root, "001.json", BATCH_1)
    first = build(root)
    assert first["silver_orders"].status == "success"
    assert silver(root) == expected_state(BATCH_1)
    land(root, "002.json", BATCH_2)
    land(root, "003.json", BATCH_3)
    land(root, "004.json", BATCH_2)  # the same events delivered twice, in another file
    results = build(root)
    # maxFilesPerTrigger: 1 makes one bronze batch per file
    assert results["bronze_orders"].message.startswith("3 batch(es)")
    # silver read only the rows bronze's new commits added
    assert (first["silver_orders"].rows_read, results["silver_orders"].rows_read) == (5, 11)
    assert silver(root) == expected_state(BATCH_1 + BATCH_2 + BATCH_3 + BATCH_2)
    assert len(read_delta(at(root, "bronze/bronze_orders"))) == 5 + 4 + 3 + 4


@pytest.mark.same_path_over_connect("test_land_build_land_more_build")
def test_no_new_data_makes_no_new_versions_and_compaction_is_not_reread(project, build):
    root = project(MODELS)
    land(root, "001.json", BATCH_1)
    build(root)
    land(root, "002.json", BATCH_2)
    build(root)
    before = versions(root)
    again = build(root)
    assert {r.status for r in again.values()} == {"up_to_date"}
    # inputs as they were when each query last caught up: no query is started at all
    assert {r.message for r in again.values()} == {"no new input since it last caught up"}
    assert versions(root) == before
    # compacting bronze rewrites its files with no data change: silver must not see them again
    delta_table(at(root, "bronze/bronze_orders")).optimize.compact()
    assert versions(root)["bronze/bronze_orders"] == before["bronze/bronze_orders"] + 1
    compacted = build(root)
    assert compacted["silver_orders"].message == "no new data"  # its query ran, found nothing
    assert versions(root)["silver/silver_orders"] == before["silver/silver_orders"]
    land(root, "003.json", BATCH_3)
    build(root)
    assert silver(root) == expected_state(BATCH_1 + BATCH_2 + BATCH_3)


def test_a_deleted_table_is_rebuilt_from_its_inputs_and_its_readers_start_over(project, build):
    """A streaming table deleted by hand (its checkpoint left) is rebuilt from every input
    file, not called up to date nor continued from the checkpoint (which would leave the rows
    before it out); silver, whose checkpoint knew the old table's versions, starts over too."""
    root = project(MODELS)
    land(root, "001.json", BATCH_1)
    build(root)
    land(root, "002.json", BATCH_2)
    build(root)
    shutil.rmtree(at(root, "bronze/bronze_orders"))
    again = build(root)
    assert again["bronze_orders"].status == "success", again["bronze_orders"].message
    assert "rebuilt from its inputs: its table was gone" in again["bronze_orders"].message
    assert again["silver_orders"].status == "success", again["silver_orders"].message
    assert ("recomputed from its inputs: bronze_orders's table was rebuilt"
            in again["silver_orders"].message)
    assert len(read_delta(at(root, "bronze/bronze_orders"))) == len(BATCH_1 + BATCH_2)
    assert silver(root) == expected_state(BATCH_1 + BATCH_2)
    land(root, "003.json", BATCH_3)  # and both go on from their new checkpoints
    last = build(root)
    assert "recomputed" not in last["bronze_orders"].message + last["silver_orders"].message
    assert silver(root) == expected_state(BATCH_1 + BATCH_2 + BATCH_3)
    assert len(read_delta(at(root, "bronze/bronze_orders"))) == len(BATCH_1 + BATCH_2 + BATCH_3)


# (SCD2 on S3, and over Spark Connect: test_merge_semantics.py's SCD2 test, the same path)
@pytest.mark.same_path_over_connect(
    "test_merge_semantics.py::test_scd2_history_is_the_same_however_events_fall_into_batches")
def test_scd2_history_across_three_batches(project, build):
    root = project({"models/sources.yml": SOURCES, "models/silver/customers_history.sql": """\
        {{ config(materialized='streaming', strategy='merge', unique_key='customer_id',
                  sequence_by='changed_at', scd_type=2, delete_when="op = 'D'") }}
        select customer_id, tier, op, changed_at from {{ source('landing', 'customers') }}
    """})
    folder = root / "landing/customers"
    folder.mkdir(parents=True)

    def land_customers(name, rows):
        (folder / name).write_text("".join(
            json.dumps({"customer_id": c, "tier": t, "op": op, "changed_at": f"2024-01-0{d}T00:00:00Z"})
            + "\n" for c, t, op, d in rows))

    land_customers("1.json", [(1, "bronze", "I", 1), (2, "bronze", "I", 1)])
    build(root)
    land_customers("2.json", [(1, "silver", "U", 3), (2, "gold", "U", 2)])
    build(root)
    # third batch: a late change for 1 between its two versions, and a delete of 2
    land_customers("3.json", [(1, "bronze+", "U", 2), (2, None, "D", 4)])
    build(root)
    rows = read_delta(at(root, "silver/customers_history"))
    history = sorted((r["customer_id"], r["tier"], r["valid_from"].day,
                      r["valid_to"].day if r["valid_to"] else None, r["is_current"]) for r in rows)
    assert history == [
        (1, "bronze", 1, 2, False),
        (1, "bronze+", 2, 3, False),
        (1, "silver", 3, None, True),
        (2, "bronze", 1, 2, False),
        (2, "gold", 2, 4, False),  # closed by the delete, and no current row
    ]
    # a rebuild from scratch (new checkpoint, all files again) gives the same history
    build(root, full_refresh=True)
    assert read_delta(at(root, "silver/customers_history")) == rows


# (in a local folder: the sample's landing files on S3 hold two malformed rows, which
# test_s3.py's build from S3 keeps as a local build does)
def test_malformed_rows_are_kept_and_counted(project, build):
    root = project(MODELS)
    land(root, "001.json", BATCH_1)
    with (root / "landing/orders/001.json").open("a") as f:
        f.write('{"order_id": 99, "status": \n')  # broken JSON
        f.write('{"order_id": "not a number", "status": "x", "op": "I", "seq": 1}\n')
    results = build(root)
    assert "2 malformed row(s) kept in _corrupt_record" in results["bronze_orders"].message
    bronze = read_delta(at(root, "bronze/bronze_orders"))
    assert len(bronze) == 7 and sum(r["_corrupt_record"] is not None for r in bronze) == 2
    assert silver(root) == expected_state(BATCH_1)


def test_new_source_columns_added_in_bronze_and_rejected_in_silver(project, build):
    root = project(MODELS)
    land(root, "001.json", BATCH_1)
    build(root)
    sources = root / "models/sources.yml"
    sources.write_text(sources.read_text().replace("seq int", "seq int, channel string"))
    land(root, "002.json", [{"order_id": 8, "status": "placed", "op": "I", "seq": 1,
                             "channel": "web"}])
    silver_sql = root / "models/silver/silver_orders.sql"
    silver_sql.write_text(silver_sql.read_text().replace("op, seq", "op, seq, channel"))
    results = build(root)
    assert results["bronze_orders"].status == "success"  # bronze: append_new_columns by default
    bronze = read_delta(at(root, "bronze/bronze_orders"))
    assert {r["order_id"]: r["channel"] for r in bronze}[8] == "web"
    assert results["silver_orders"].status == "error"
    assert "new columns channel" in results["silver_orders"].message


def test_full_refresh_resets_table_and_checkpoint(project, build):
    root = project(MODELS)
    land(root, "001.json", BATCH_1)
    build(root)
    build(root, full_refresh=True)
    assert len(read_delta(at(root, "bronze/bronze_orders"))) == 5  # re-read once, replaced
    assert silver(root) == expected_state(BATCH_1)


@pytest.mark.one_engine("no streamed table: both engines take the same path to this check "
                        "on the model's rows")
def test_streaming_model_needs_a_streaming_input(project, build):
    root = project({"models/a.sql": "select 1 as id",
                    "models/b.sql": "{{ config(materialized='streaming') }}"
                                    "select * from {{ ref('a') }}"})
    result = build(root)["b"]
    assert result.status == "error" and "must read a source or a streaming model" in result.message


@pytest.mark.same_path_over_connect("test_land_build_land_more_build")
def test_streaming_model_over_two_streaming_tables_reads_each_ones_new_rows(project, build):
    root = project({**MODELS, "models/bronze/bronze_customers.sql": """\
        {{ config(materialized='streaming') }}
        select * from {{ source('landing', 'customers') }}
    """, "models/silver/keys.sql": """\
        {{ config(materialized='streaming') }}
        select order_id as id, 'order' as kind from {{ ref('bronze_orders') }}
        union all
        select customer_id, 'customer' from {{ ref('bronze_customers') }}
    """})
    land(root, "001.json", BATCH_1)
    (root / "landing/customers").mkdir(parents=True)
    (root / "landing/customers/c1.json").write_text(
        '{"customer_id": 100, "tier": "gold", "op": "I", "changed_at": "2024-01-01T00:00:00"}\n')
    assert build(root)["keys"].rows == 6
    land(root, "002.json", BATCH_2)  # only orders move on
    assert build(root)["keys"].rows_read == 4
    keys = sorted((r["kind"], r["id"]) for r in read_delta(at(root, "silver/keys")))
    assert keys == [("customer", 100)] + [("order", i) for i in (1, 1, 2, 2, 3, 3, 4, 5, 6)]


def test_streaming_files_and_tables_in_one_model(project, build, engine_name):
    root = project({**MODELS, "models/silver/mixed.sql": """\
        {{ config(materialized='streaming') }}
        select o.order_id from {{ source('landing', 'orders') }} o
        join {{ ref('bronze_orders') }} b on b.order_id = o.order_id
    """})
    land(root, "001.json", BATCH_1)
    result = build(root)["mixed"]
    if engine_name == "delta-spark":  # Delta's streaming source joins with a file stream
        assert result.status == "success" and result.rows == 5
        return
    # The embedded engine follows Delta tables through their commit logs, in a query of its own.
    assert result.status == "error"
    assert "reads landing files (landing.orders) and streaming tables (bronze_orders)" in (
        result.message)
    assert "bronze model of their own" in result.message


def killed_at(root, crash_at: str) -> bool:
    """Build with the process that reaches `crash_at` killed there; True when that was the
    server's Python worker running the batch (over Spark Connect), which the build outlives."""
    killed = medallion(root, "build", crash_at=crash_at)
    if REMOTE and ":stopped:" not in crash_at:
        assert killed.returncode == 1, killed.stdout + killed.stderr
        died = [line for line in killed.stdout.splitlines() if "Python worker" in line]
        assert died and "died" in died[0] and "Traceback" not in killed.stdout, killed.stdout
        return True
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    return False


# Over Spark Connect a kill in a batch is of the server's Python worker, wherever in the batch:
# the committed kill point stands for the others there.
OVER_CONNECT_AS_COMMITTED = pytest.mark.same_path_over_connect("silver_orders:committed:1")


# The default tier kills a build at the hardest point on each engine (committed, not yet in
# the checkpoint); the rest of the matrix is the slow tier's
KILL_MATRIX = pytest.mark.slow("the rest of the kill matrix")


@pytest.mark.parametrize("crash_at", [
    # killed before the batch wrote anything
    pytest.param("silver_orders:batch_start:1", marks=[OVER_CONNECT_AS_COMMITTED, KILL_MATRIX]),
    # killed after the Delta commit, before the checkpoint knew (on S3, the commit's hardest
    # case: test_s3.py's build killed on S3, the sample's silver_orders, at its first commit)
    "silver_orders:committed:1",
    # killed mid-ingest, after some files committed
    pytest.param("bronze_orders:committed:2", marks=[OVER_CONNECT_AS_COMMITTED, KILL_MATRIX]),
    # killed once its query ran 2 batches, as the event log may still be writing them
    pytest.param("bronze_orders:stopped:2", marks=KILL_MATRIX),
])
def test_kill_mid_batch_then_rebuild_equals_uninterrupted_run(project, build, crash_at):
    root = project(MODELS)
    land(root, "001.json", BATCH_1)
    assert not [r.message for r in build(root).values() if r.failed]  # in this process: faster
    land(root, "002.json", BATCH_2)
    land(root, "003.json", BATCH_3)
    worker = killed_at(root, crash_at)
    rebuilt = build(root)  # in this process: a JVM start fewer
    assert not [r.message for r in rebuilt.values() if r.failed]
    if crash_at.endswith("committed:1") or crash_at.endswith("committed:2"):
        model = crash_at.split(":")[0]
        assert "1 replayed batch(es) already committed" in rebuilt[model].message
    assert silver(root) == expected_state(BATCH_1 + BATCH_2 + BATCH_3)
    bronze = read_delta(at(root, "bronze/bronze_orders"))
    assert len(bronze) == len(BATCH_1 + BATCH_2 + BATCH_3)  # nothing twice, nothing lost
    # The event log has each committed batch once: a batch committed just before the kill is
    # recorded by the next run of its query; the killed run started and never finished (but
    # one whose server's worker was killed did).
    log = read_delta(at(root, "_medallion/events"))
    runs = {r["run_id"] for r in log}
    finished = {r["run_id"] for r in log if r["event_type"] == "run_finished"}
    assert len(runs) == 3 and len(finished) == 2 + worker
    for model, table in (("bronze_orders", "bronze"), ("silver_orders", "silver")):
        batches = sorted(r["batch_id"] for r in log if r["event_type"] == "batch"
                         and r["node"] == model)
        commits = [c for c in delta_table(at(root, f"{table}/{model}")).history()
                   if c["operation"] != "OPTIMIZE"]
        assert batches == list(range(len(commits))), (model, batches)
        # what lets the next run skip reading the log: the last batch it has, never more (a
        # build killed once its query stopped may have appended a batch's event and not yet
        # noted it, and the next finds no new input: the note stays behind, which is safe)
        noted = json.loads(read_bytes(at(root, f"_checkpoints/{table}/{model}/{LOGGED_FILE}")))
        if crash_at.endswith(":stopped:2"):
            assert noted["batch_id"] <= batches[-1]
        else:
            assert noted["batch_id"] == batches[-1]
    recovered = {(r["node"], r["batch_id"]) for r in log if r["message"] == RECOVERED}
    model, _, batch = crash_at.partition(":committed:")
    if batch:
        assert (model, int(batch)) in recovered


def test_a_new_querys_first_batch_killed_before_the_log_had_it_is_recorded_once(project,
                                                                                build):
    """The first run of a query is killed after committing batches none of whose events had
    reached the event log: the next run records each of them once."""
    root = project(MODELS)
    land(root, "001.json", BATCH_1)
    killed_at(root, "bronze_orders:committed:0")  # before its event was queued
    logged = (read_delta(at(root, "_medallion/events"))
              if DeltaTable.is_deltatable(at(root, "_medallion/events"),
                                          storage_options(at(root))) else [])
    assert not [r for r in logged if r["event_type"] == "batch"]
    assert not [r.message for r in build(root).values() if r.failed]
    log = read_delta(at(root, "_medallion/events"))
    batches = [(r["batch_id"], r["message"]) for r in log
               if r["event_type"] == "batch" and r["node"] == "bronze_orders"]
    assert batches == [(0, RECOVERED)]
    assert len(read_delta(at(root, "bronze/bronze_orders"))) == len(BATCH_1)


def test_parquet_source_with_yaml_columns_streams_new_files(project, build):
    root = project({
        "models/sources.yml": """\
            sources:
              - name: landing
                path: landing
                tables:
                  - name: readings
                    format: parquet
                    columns:
                      - {name: sensor, data_type: string}
                      - {name: value, data_type: double}
        """,
        "models/bronze/readings.sql": "{{ config(materialized='streaming') }}"
                                      "select sensor, value, _source_file "
                                      "from {{ source('landing', 'readings') }}"})
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = root / "landing/readings"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"sensor": ["a", "b"], "value": [1.0, 2.0]}), folder / "part1.parquet")
    assert build(root)["readings"].rows == 2
    pq.write_table(pa.table({"sensor": ["c"], "value": [3.0]}), folder / "part2.parquet")
    assert build(root)["readings"].rows == 1
    rows = read_delta(at(root, "bronze/readings"))
    assert sorted((r["sensor"], r["value"]) for r in rows) == [("a", 1.0), ("b", 2.0), ("c", 3.0)]
    assert all("/landing/readings/part" in r["_source_file"] for r in rows)


def test_streaming_from_a_merged_table_fails_and_says_why(project, build):
    root = project({**MODELS, "models/gold/status_log.sql": """\
        {{ config(materialized='streaming') }}
        select order_id, status from {{ ref('silver_orders') }}
    """})
    land(root, "001.json", BATCH_1)
    assert build(root)["status_log"].status == "success"
    land(root, "002.json", BATCH_2)  # silver now updates and deletes rows: not appends
    result = build(root)["status_log"]
    assert result.status == "error"
    assert "changed or removed existing rows" in result.message
