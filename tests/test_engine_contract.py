"""The engine interface's contract, run against both engines."""

from contextlib import contextmanager
from decimal import Decimal as D
from pathlib import Path

import pytest
import sqlglot
from conftest import ON_BOTH_STORES, target_for
from sqlglot import exp

from medallion_cli.core.errors import CapabilityError
from medallion_cli.core.project import Target
from medallion_cli.engines import make_engine
from medallion_cli.engines.sql import MergeSpec, merge_sql, snapshot_sql, sql_literal
from medallion_cli.storage.files import read_text, remove
from medallion_cli.storage.object_store import with_s3a


@pytest.fixture
def engine(engine_name, spark, lake):
    """The engine, its warehouse under the test's lake (a local folder, or a bucket on S3)."""
    return make_engine(with_s3a(target_for("contract", engine_name, f"{lake}/wh")))


def rows(engine, path):
    return sorted(tuple(r) for r in engine.read_table(path).collect())


def frame(spark, data):
    return spark.createDataFrame(data, "id long, v string, seq int")


@ON_BOTH_STORES
def test_overwrite_append_and_read(engine, spark, lake):
    path = f"{lake}/wh/t"
    assert not engine.table_exists(path)
    first = engine.write(frame(spark, [(1, "a", 1)]), path, "overwrite",
                         metadata={"medallion.note": "x"})
    assert (first.version, first.rows) == (0, 1) and engine.table_exists(path)
    assert engine.last_commit_value(path, "medallion.note") == "x"
    engine.write(frame(spark, [(2, "b", 1)]), path, "append")
    assert rows(engine, path) == [(1, "a", 1), (2, "b", 1)]
    engine.write(frame(spark, [(3, "c", 1)]), path, "overwrite")
    assert rows(engine, path) == [(3, "c", 1)] and engine.table_version(path) == 2


def test_a_table_whose_early_commits_were_cleaned_up_still_exists(engine, spark, tmp_path):
    from deltalake import DeltaTable

    path = tmp_path / "wh/t"
    for n in range(3):
        engine.write(frame(spark, [(n, "a", 1)]), path, "append")
    DeltaTable(str(path)).create_checkpoint()  # at version 2
    (path / "_delta_log/00000000000000000000.json").unlink()  # as log retention does
    (path / "_delta_log/00000000000000000001.json").unlink()
    assert engine.table_exists(path) and engine.table_version(path) == 2
    (path / "_delta_log/00000000000000000002.json").unlink()
    (path / "_delta_log/_last_checkpoint").unlink()
    (path / "_delta_log/00000000000000000002.checkpoint.parquet").rename(path / "elsewhere")
    assert not engine.table_exists(path)  # a folder with a log but no commit is no table


@pytest.mark.parametrize("cut", ["its first line", "a later line"])
def test_a_table_whose_newest_commit_was_cut_short_is_refused_in_one_line_naming_it(
        engine, spark, tmp_path, cut):
    """A commit file truncated (a write cut short, a bad copy), whether in its first line (Delta
    Lake for Spark then read the commit as empty: its rows silently gone, and a write went on
    over it) or a later one: reading, writing or merging the table fails, naming the table and
    the file and how to recover, and the table is as it was."""
    from medallion_cli.core.errors import MedallionError

    path = tmp_path / "wh/t"
    engine.write(frame(spark, [(1, "a", 1)]), path, "append")
    engine.write(frame(spark, [(2, "b", 1)]), path, "append")
    commit = path / "_delta_log/00000000000000000001.json"
    text = commit.read_text()
    commit.write_text(text[:40] if cut == "its first line" else text[:text.index("\n") + 40])
    before = sorted(p.name for p in (path / "_delta_log").iterdir())
    attempts = {
        "read": lambda: engine.read_table(path).collect(),
        "write": lambda: engine.write(frame(spark, [(3, "c", 1)]), path, "append"),
        "merge": lambda: engine.merge(frame(spark, [(1, "z", 2)]), path, MergeSpec(
            keys=("id",), sequence_by=("seq",))),
    }
    for name, attempt in attempts.items():
        with pytest.raises(MedallionError) as refused:
            attempt()
        said = str(refused.value)
        assert said.startswith(f"{path}: the Delta log of this table cannot be read"), (name, said)
        assert f"{commit} is damaged or was not written whole" in said, name
        assert "--full-refresh" in said, name
    assert sorted(p.name for p in (path / "_delta_log").iterdir()) == before


@ON_BOTH_STORES
def test_an_engine_that_skips_empty_writes_commits_nothing_for_no_rows(engine, spark, lake):
    # Callers look for rows before an append or MERGE only where the engine says it does not
    # skip empty writes (delta-spark commits them): this is what that promise rests on.
    path = f"{lake}/wh/t"
    engine.write(frame(spark, [(1, "a", 1)]), path, "overwrite")
    none = frame(spark, [])
    appended = engine.write(none, path, "append", txn=("app", 0))
    merged = engine.merge(none, path, MergeSpec(keys=("id",), sequence_by=("seq",)),
                          txn=("app", 1))
    assert (appended.rows, merged.rows) == (0, 0) and rows(engine, path) == [(1, "a", 1)]
    assert engine.table_version(path) == (0 if engine.capabilities.skips_empty_writes else 2)


@ON_BOTH_STORES
def test_app_transaction_makes_a_replay_a_no_op(engine, spark, lake):
    path = f"{lake}/wh/t"
    engine.write(frame(spark, [(1, "a", 1)]), path, "append", txn=("app", 0))
    engine.write(frame(spark, [(1, "a", 1)]), path, "append", txn=("app", 0))  # replayed batch
    assert engine.committed_version(path, "app") == 0
    assert engine.committed_version(path, "other") is None
    engine.write(frame(spark, [(2, "b", 1)]), path, "append", txn=("app", 1))
    assert rows(engine, path) == [(1, "a", 1), (2, "b", 1)]
    assert engine.committed_version(path, "app") == 1
    # every app's last version is kept by the table, not only by the commit that wrote it
    engine.write(frame(spark, [(3, "c", 1)]), path, "append", txn=("other", 7))
    engine.write(frame(spark, [(4, "d", 1)]), path, "append")
    assert (engine.committed_version(path, "app"),
            engine.committed_version(path, "other")) == (1, 7)


@ON_BOTH_STORES
def test_append_rows_appends_python_rows_once_per_app_transaction(engine, lake):
    # The event log's append. delta-spark appends a local table with delta-rs (test_event_log),
    # and with Delta's own writer on object storage: both run here.
    import pyarrow as pa

    writers = [engine.append_rows] + (
        [engine.delta_append_rows] if engine.name == "delta-spark" else [])
    batch = pa.table({"id": pa.array([1, 2], pa.int64()), "v": ["a", "b"]})
    for n, append in enumerate(writers):
        path = f"{lake}/wh/events{n}"
        append(batch, path, ("run", 1))
        append(batch, path, ("run", 1))  # replayed: nothing
        append(batch.slice(1), path, ("run", 2))
        assert rows(engine, path) == [(1, "a"), (2, "b"), (2, "b")]
        assert engine.committed_version(path, "run") == 2


@ON_BOTH_STORES
def test_merge_keeps_newer_rows_and_applies_deletes(engine, spark, lake):
    path = f"{lake}/wh/t"
    engine.write(frame(spark, [(1, "a", 2), (2, "b", 1), (3, "c", 1), (6, "f", 1)]), path,
                 "overwrite")
    source = spark.createDataFrame(
        [(1, "old", 1, False), (2, "new", 2, False), (3, "gone", 2, True), (4, "d", 1, False),
         (5, "never", 1, True)], "id long, v string, seq int, _medallion_delete boolean")
    merged = engine.merge(source, path, MergeSpec(("id",), ("seq",), "_medallion_delete"))
    assert rows(engine, path) == [(1, "a", 2), (2, "new", 2), (4, "d", 1), (6, "f", 1)]
    # the rows it changed (1 updated, 1 deleted, 1 inserted), not the unchanged ones it copied
    assert (merged.version, merged.rows) == (1, 3)


def test_a_merge_into_a_table_that_is_gone_fails_naming_it_and_creates_nothing(
        engine, spark, tmp_path):
    """A build creates a table before it merges into it; one deleted in between is an error
    that names it (Delta's own on delta-spark), not a table made from the MERGE's rows."""
    path = str(tmp_path / "wh/gone")
    with pytest.raises(Exception, match=f"{path}: no Delta table here|Path does not exist: {path}"
                       ) as refused:
        engine.merge(frame(spark, [(1, "a", 1)]), path, MergeSpec(("id",)))
    assert not engine.table_exists(path)
    if engine.name == "embedded":  # medallion's own line says what to do
        assert "hint: build its model first (medallion build -s <model>)" in str(refused.value)


@pytest.mark.unit
def test_an_engine_refuses_in_one_line_the_stream_reads_its_capabilities_rule_out(tmp_path):
    """A stream over a table is Delta's own source (capabilities.delta_streaming_source) or
    follows the table's commit log, never both: the other kind's reads say which it does."""
    for name in ("embedded", "delta-spark"):
        engine = make_engine(Target("t", name, str(tmp_path / name), "local[1]", {}, 1))
        calls = ([lambda: engine.commit_stream("t"), lambda: engine.read_commits("t", [0], True)]
                 if engine.capabilities.delta_streaming_source
                 else [lambda: engine.read_stream("t")])
        for call in calls:
            with pytest.raises(CapabilityError, match=f"the {name} engine .*commit log"):
                call()


def test_merge_replaces_whole_groups(engine, spark, tmp_path):
    """MergeSpec.replace_groups (incremental gold kept per group): per group of the source, a
    marker row (delete column true) deletes every stored row of the group and the group's new
    rows are inserted; groups the source lacks keep their rows."""
    path = str(tmp_path / "wh/t")
    engine.write(spark.createDataFrame([(1, 1, "a"), (1, 2, "b"), (2, 3, "c")],
                                       "g long, id long, v string"), path, "overwrite")
    source = spark.createDataFrame(
        [(1, None, None, True), (1, 4, "x", False), (3, None, None, True), (3, 5, "y", False)],
        "g long, id long, v string, _medallion_delete boolean")
    merged = engine.merge(source, path, MergeSpec(("g",), delete_column="_medallion_delete",
                                                  replace_groups=True))
    assert rows(engine, path) == [(1, 4, "x"), (2, 3, "c"), (3, 5, "y")]
    assert merged.version == 1


def test_merge_adds_changes_to_stored_sums_and_counts(engine, spark, tmp_path):
    """MergeSpec.added: the source holds changes (rows, a count, a nullable sum) added to the
    stored values; a group whose rows come to 0 is deleted, and one with none to add is not
    inserted."""
    path = str(tmp_path / "wh/t")
    schema = "k long, n long, c long, s decimal(12,2)"
    engine.write(spark.sql(
        "select * from values (1L, 2L, 2L, 10.00BD), (2L, 1L, 0L, null), (3L, 1L, 1L, 5.00BD),"
        " (null, 1L, 1L, 1.00BD), (9L, 1L, 1L, 7.00BD) as v(k, n, c, s)").to(
        spark.createDataFrame([], schema).schema), path, "overwrite")
    changes = spark.sql(
        "select * from values (1L, 1L, 1L, 2.50BD), (2L, 0L, 1L, 4.00BD), (3L, -1L, -1L, -5.00BD),"
        " (null, 0L, 0L, null), (4L, 2L, 1L, 3.00BD), (5L, -1L, -1L, -1.00BD) as v(k, n, c, s)"
    ).to(spark.createDataFrame([], schema).schema)
    merged = engine.merge(changes, path, MergeSpec(("k",), null_safe_keys=("k",),
                                                   added=("n", "c", "s"), added_rows="n"))
    assert sorted(engine.read_table(path).collect(), key=lambda r: (r.k is not None, r.k)) == [
        (None, 1, 1, D("1.00")),  # a null change keeps the stored sum; null keys match
        (1, 3, 3, D("12.50")), (2, 1, 1, D("4.00")),  # a stored null sum counts as 0
        (4, 2, 1, D("3.00")),  # inserted; 3 had no rows left, and 5 none to add
        (9, 1, 1, D("7.00"))]
    assert merged.rows == 5  # 3 updated, 1 deleted, 1 inserted


def test_columns_without_nulls_are_read_from_the_log_at_a_version(engine, spark, tmp_path):
    path = str(tmp_path / "wh/t")
    nested = "id long, v string, seq int, pair struct<a: int>"
    engine.write(spark.sql("select 1L as id, 'a' as v, 1 as seq, named_struct('a', 1) as pair"
                           ).to(spark.createDataFrame([], nested).schema), path, "overwrite")
    engine.write(spark.sql("select 2L as id, null as v, 1 as seq, named_struct('a', 2) as pair"
                           ).to(spark.createDataFrame([], nested).schema), path, "append")
    # a nested column's own statistics are its fields': it is never said to hold no null
    assert engine.columns_without_nulls(path, 0) == {"id", "v", "seq"}
    assert engine.columns_without_nulls(path, 1) == {"id", "seq"}


@pytest.mark.parametrize("through, kept", [
    ("2024-05-01 10:00:00", [(1, "new"), (3, "later")]),  # rows at or before it go
    (None, [(1, "new"), (2, "b"), (3, "later")]),  # a truncate with no time is the oldest
])
def test_merge_deletes_the_rows_a_truncate_is_not_older_than(engine, spark, tmp_path, through,
                                                              kept):
    path = tmp_path / "wh/t"
    stored = "id long, v string, at timestamp"
    engine.write(spark.sql("select 1 as id, 'a' as v, timestamp'2024-05-01 09:00:00' as at "
                           "union all select 2, 'b', timestamp'2024-05-01 10:00:00' "
                           "union all select 3, 'c', timestamp'2024-05-01 11:00:00'")
                 .to(spark.createDataFrame([], stored).schema), path, "overwrite")
    source = spark.sql("select 1 as id, 'new' as v, timestamp'2024-05-01 12:00:00' as at "
                       "union all select 3, 'later', timestamp'2024-05-01 12:00:00'")
    engine.merge(source, path, MergeSpec(("id",), ("at",), truncated_through={
        "at": sql_literal(through, "timestamp")}))
    assert sorted((r["id"], r["v"]) for r in engine.read_table(path).collect()) == kept


@ON_BOTH_STORES
def test_history_snapshot_restore_optimize_and_vacuum(engine, spark, lake):
    path = f"{lake}/wh/t"
    engine.write(frame(spark, [(1, "a", 1)]), path, "overwrite")
    engine.write(frame(spark, [(2, "b", 1)]), path, "append")
    engine.write(frame(spark, [(3, "c", 1)]), path, "append")
    assert [h["version"] for h in engine.history(path)] == [2, 1, 0]
    assert engine.snapshot(path, 0).to_pylist() == [{"id": 1, "v": "a", "seq": 1}]
    assert engine.file_count(path) == 3
    layout = engine.file_layout(path, small_below=1 << 20)  # what a compaction policy weighs
    assert (layout.files, layout.small_files, layout.small_bytes) == (3, 3, layout.bytes) \
        and 0 < layout.bytes < 3 << 20
    assert engine.file_layout(path, small_below=1).small_files == 0
    assert engine.optimize(path)["files_removed"] == 3 and engine.file_count(path) == 1
    assert engine.file_layout(path, small_below=1 << 20).small_files == 1
    assert engine.restore(path, 1) == 4
    assert rows(engine, path) == [(1, "a", 1), (2, "b", 1)]
    # the third write's files and the compacted one are no longer referenced: they go, once
    assert engine.vacuum(path, 0, enforce_retention=False)
    assert engine.vacuum(path, 0, enforce_retention=False) == []
    assert rows(engine, path) == [(1, "a", 1), (2, "b", 1)]


@pytest.mark.local_spark  # counts the Spark jobs of this process's SparkContext
def test_file_count_reads_the_log_not_the_rows(engine, spark, tmp_path):
    """file_count decides between a MERGE and a rewrite before every per-group write: from the
    version's checksum it costs no Spark job; a version without one (delta-rs writes none)
    is counted from the log all the same."""
    path = tmp_path / "wh/t"
    engine.write(frame(spark, [(1, "a", 1)]), path, "overwrite")
    engine.write(frame(spark, [(2, "b", 1)]), path, "append")
    engine.write(frame(spark, [(3, "c", 1)]), path, "append")
    group = f"file_count-{engine.name}"
    spark.sparkContext.setJobGroup(group, "counting files")
    try:
        assert engine.file_count(path) == 3
    finally:  # the session is shared: later tests' jobs keep neither group nor label
        for key in ("spark.jobGroup.id", "spark.job.description"):
            spark.sparkContext.setLocalProperty(key, None)
    assert list(spark.sparkContext.statusTracker().getJobIdsForGroup(group)) == []
    for checksum in (path / "_delta_log").glob("*.crc"):
        checksum.unlink()
    engine.write(frame(spark, [(4, "d", 1)]), path, "append")
    (path / "_delta_log" / f"{3:020d}.crc").unlink(missing_ok=True)
    assert engine.file_count(path) == 4


def _file_stats(path) -> dict:
    """Per column: (rows, nulls, min, max) over a table's files, from their Delta statistics."""
    import pyarrow as pa
    from deltalake import DeltaTable

    actions = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True)).to_pydict()
    columns = {k.split(".", 1)[1] for k in actions if k.startswith("null_count.")}
    return {c: (sum(actions["num_records"]), sum(actions[f"null_count.{c}"]),
                min(v for v in actions.get(f"min.{c}", [None]) if v is not None),
                max(v for v in actions.get(f"max.{c}", [None]) if v is not None))
            for c in columns}


@pytest.mark.local_spark  # JvmLog reads Delta's log in this process's JVM
def test_delta_spark_reads_a_log_alike_by_delta_rs_the_jvm_and_sql(spark, tmp_path):
    # delta-spark reads a local table's log with delta-rs (1 ms against Delta's 0.1-2 s);
    # Delta's own in the JVM is what object storage gets, and Delta's SQL what a Spark Connect
    # client gets where delta-rs does not reach the store: the fields builds read must agree.
    from medallion_cli.engines.delta_spark.log import JvmLog, SqlLog, client_log

    engine = make_engine(Target("contract", "delta-spark", str(tmp_path / "wh"), "local[2]", {}, 1))
    path = str(tmp_path / "wh/t")
    engine.write(frame(spark, [(1, "a", 1)]), path, "overwrite", metadata={"medallion.x": "1"},
                 txn=("app", 4), properties={"delta.appendOnly": "false"})
    engine.merge(frame(spark, [(1, "b", 2), (2, "c", 1)]), path, MergeSpec(("id",), ("seq",)),
                 metadata={"medallion.x": "2"})
    fields = ("version", "operation", "operationMetrics", "userMetadata", "isBlindAppend")
    read = [[commit.get(f) for f in fields] for commit in engine.history(path)]
    for log in (JvmLog(spark), SqlLog(spark)):
        assert read == [[commit.get(f) for f in fields] for commit in log.history(path, None)]
        assert [c["version"] for c in log.history(path, 1)] == [1]
        assert (log.version(path), log.file_count(path)) == (1, engine.file_count(path))
        assert log.properties(path)["delta.appendOnly"] == "false"
        layout = engine.file_layout(path, small_below=1)
        assert log.file_totals(path) == (layout.files, layout.bytes)
    assert [r[:2] for r in read] == [[1, "MERGE"], [0, "WRITE"]]
    assert engine.last_commit_value(path, "medallion.x") == "2"
    assert engine.committed_version(path, "app") == JvmLog(spark).app_version(path, "app") == 4
    assert SqlLog(spark).app_version(path, "app") is None  # not in SQL: Delta skips a replay
    assert client_log(path, lambda table: table.version(), anywhere=False) == 1
    assert client_log(str(tmp_path / "none"), lambda table: table.version(), anywhere=True) is None


def embedded_with_staging_seen(tmp_path, monkeypatch):
    """An embedded engine, and the list of DataFrames it stages as Parquet (not collected)."""
    engine = make_engine(Target("t", "embedded", str(tmp_path / "wh"), "local[2]", {}, 1))
    staged = []
    stage = engine._staged
    monkeypatch.setattr(engine, "_staged", lambda df: staged.append(df) or stage(df))
    return engine, staged


@contextmanager
def broadcast_threshold(spark, value: str):
    """Spark's broadcast threshold, which decides what the embedded engine collects."""
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", value)
    try:
        yield
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")


@pytest.mark.local_spark  # the embedded engine: Spark in this process
def test_embedded_commits_sparks_files_with_the_statistics_delta_rs_would_write(spark, tmp_path):
    """Embedded only: the other engine's files are Delta Lake for Spark's own. Appends and
    overwrites of rows Spark does not estimate small (here: the broadcast threshold off) commit
    the Parquet files Spark wrote instead of rewriting them through delta-rs; their statistics
    must be what delta-rs writes, or readers would skip files wrongly."""
    engine = make_engine(Target("t", "embedded", str(tmp_path / "wh"), "local[2]", {}, 1))
    with broadcast_threshold(spark, "-1"):
        _write_staged_files(spark, engine, tmp_path)


def _write_staged_files(spark, engine, tmp_path):
    from deltalake import DeltaTable, write_deltalake

    df = spark.sql("""select id, cast(id * 7 % 5 as int) as small, concat('k', id) as key,
        case when id % 3 = 0 then null else timestamp'2024-03-01 10:00:00.123456'
             + make_interval(0, 0, 0, id, 0, 0, 0.000789) end as ts,
        date_add(date'2024-01-01', cast(id as int)) as d, cast(id / 4 as decimal(10, 2)) as amount,
        id % 2 = 0 as even, double(id) / 3 as ratio from range(40)""").repartition(3)
    written = engine.write(df, tmp_path / "wh/t", "overwrite")
    assert (written.rows, written.files_added) == (40, 3)
    write_deltalake(str(tmp_path / "by_delta_rs"), df.toArrow())
    assert _file_stats(tmp_path / "wh/t") == _file_stats(tmp_path / "by_delta_rs")
    engine.write(df.where("id < 5"), tmp_path / "wh/t", "append")
    files = DeltaTable(str(tmp_path / "wh/t")).file_uris()
    assert len(files) == 6 and {Path(f).parent for f in files} == {tmp_path / "wh/t"}
    assert not list((tmp_path / "wh/_staging").glob("*/*"))  # moved, not copied


@pytest.mark.local_spark  # the embedded engine: Spark in this process
def test_embedded_merges_a_small_source_without_staging_it_and_a_large_one_staged(
        spark, tmp_path, monkeypatch):
    """Embedded only: how its MERGE hands the source to delta-rs (delta-spark's reads it in the
    JVM). A source Spark estimates within its broadcast threshold is collected through Arrow;
    with the threshold off (-1) it is staged as Parquet. The tables and counts are the same,
    timestamps, decimals, nulls and nested values included."""
    engine, staged = embedded_with_staging_seen(tmp_path, monkeypatch)
    start = spark.sql("""select id, concat('k', id) as s, timestamp'2024-03-01 10:00:00.123456'
        + make_interval(0, 0, 0, id, 0, 0, 0) as ts, cast(id / 4 as decimal(10, 2)) as amount,
        named_struct('n', id) as nested, false as _medallion_delete from range(6)""")
    source = start.selectExpr("id + 3 as id", "if(id = 1, null, 'new') as s", "ts", "amount",
                              "nested", "id = 0 as _medallion_delete")
    tables, counts = [], []
    for threshold in ("10MB", "-1"):
        with broadcast_threshold(spark, threshold):
            path = tmp_path / "wh" / f"t{len(tables)}"
            engine.write(start.drop("_medallion_delete"), path, "overwrite")
            staged.clear()  # the table's first write: only the merge's source counts here
            merged = engine.merge(source, path,
                                  MergeSpec(("id",), delete_column="_medallion_delete"))
        assert len(staged) == (threshold == "-1")  # the merge's source staged only then
        tables.append(sorted(tuple(r) for r in engine.read_table(path).collect()))
        counts.append((merged.rows, merged.non_null))
    assert tables[0] == tables[1] and counts[0] == counts[1]
    assert [(r[0], r[1]) for r in tables[0]] == [
        (0, "k0"), (1, "k1"), (2, "k2"), (4, None), (5, "new"), (6, "new"), (7, "new"), (8, "new")]
    assert counts[0][0] == 6  # 3 updated, 1 deleted, 2 inserted
    assert counts[0][1]["s"] == 5 and counts[0][1]["id"] == 6


@pytest.mark.local_spark  # the embedded engine: Spark in this process
def test_embedded_writes_small_rows_without_staging_them_and_large_ones_staged(
        spark, tmp_path, monkeypatch):
    """Embedded only: how its writes hand rows to delta-rs (delta-spark writes them in the JVM).
    Rows Spark estimates within its broadcast threshold are collected through Arrow, as a small
    MERGE source is, and written by delta-rs; with the threshold off (-1) Spark stages them as
    Parquet. Tables, counts and the tables' own file statistics are the same either way."""
    import pyarrow as pa
    from deltalake import DeltaTable

    engine, staged = embedded_with_staging_seen(tmp_path, monkeypatch)
    first = spark.sql("""select id, if(id = 2, null, concat('k', id)) as s,
        timestamp'2024-03-01 10:00:00.123456' + make_interval(0, 0, 0, id, 0, 0, 0) as ts,
        cast(id / 4 as decimal(10, 2)) as amount, named_struct('n', id) as nested
        from range(5)""")
    more = first.selectExpr("id + 5 as id", "s", "ts", "amount", "nested")
    tables, results, stats, files = [], [], [], []
    for threshold in ("10MB", "-1"):
        with broadcast_threshold(spark, threshold):
            path = tmp_path / "wh" / f"t{len(tables)}"
            written = [engine.write(first, path, "overwrite"),
                       engine.write(more, path, "append")]
        assert len(staged) == (2 if threshold == "-1" else 0)
        tables.append(rows(engine, path))
        results.append([(w.version, w.rows, w.non_null) for w in written])
        files.append([w.files_added for w in written])
        actions = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True)).to_pydict()
        stats.append((sum(actions["num_records"]), sum(actions["null_count.s"]),
                      min(actions["min.id"]), max(actions["max.id"])))
    assert tables[0] == tables[1] and len(tables[0]) == 10
    assert tables[0][2][1] is None and tables[0][3][3] == D("0.75")
    assert tables[0][9][4] == {"n": 4} or tuple(tables[0][9][4]) == (4,)
    assert results[0] == results[1] and [r[:2] for r in results[0]] == [(0, 5), (1, 5)]
    assert results[0][0][2] == {"id": 5, "s": 4, "ts": 5, "amount": 5}  # nested: not counted
    assert files[0] == [1, 1]  # delta-rs writes a small result as one file
    assert stats[0] == stats[1] == (10, 2, 0, 9)


@pytest.mark.local_spark  # the embedded engine: Spark in this process
def test_embedded_collects_a_join_of_small_inputs_up_to_a_row_cap(spark, tmp_path, monkeypatch):
    """Embedded only. Spark estimates a join as the product of its inputs' sizes, so a table of
    orders priced from a catalogue never looks small; when the inputs the query reads are
    within a tenth of the broadcast threshold, its rows are collected, at most COLLECT_ROWS of
    them: a result with more (a join that multiplies rows) is staged instead, whole."""
    from medallion_cli.engines.embedded import collected

    engine, staged = embedded_with_staging_seen(tmp_path, monkeypatch)
    spark.range(40).selectExpr("id", "id % 4 as product").write.parquet(str(tmp_path / "o"))
    spark.range(4).selectExpr("id as product", "id * 10 as price").write.parquet(
        str(tmp_path / "p"))
    orders, products = (spark.read.parquet(str(tmp_path / n)) for n in ("o", "p"))
    assert sum(f.stat().st_size for f in tmp_path.glob("[op]/*.parquet")) < 6400
    priced = orders.join(products, "product").selectExpr("id", "price")
    with broadcast_threshold(spark, "64KB"):  # over both, 10x the inputs
        assert not collected.estimated_small(priced)  # Spark's own estimate: the product
        written = engine.write(priced, tmp_path / "wh/priced", "overwrite")
        assert (written.rows, staged) == (40, [])
        monkeypatch.setattr(collected, "COLLECT_ROWS", 39)
        again = engine.write(priced, tmp_path / "wh/staged", "overwrite")
    assert again.rows == 40 and len(staged) == 1
    assert rows(engine, tmp_path / "wh/priced") == rows(engine, tmp_path / "wh/staged") == [
        (i, i % 4 * 10) for i in range(40)]


@pytest.mark.local_spark  # the embedded engine: Spark in this process
def test_embedded_tables_keep_to_protocol_versions_every_delta_reader_supports(spark, tmp_path):
    from deltalake import DeltaTable

    engine = make_engine(Target("t", "embedded", str(tmp_path / "wh"), "local[2]", {}, 1))
    df = spark.sql("select 1L as id, 'x' as s, current_timestamp() as ts, date'2024-01-01' as d, "
                   "cast(1.5 as decimal(10,2)) as amount, array(1, 2) as xs")
    engine.write(df, tmp_path / "wh/t", "overwrite", partition_by=("d",))
    protocol = DeltaTable(str(tmp_path / "wh/t")).protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 2)


@pytest.mark.unit
def test_native_merge_sql_parses_with_sqlglot_spark():
    sql = merge_sql("/lake/silver/orders", "src", ["id", "v", "seq", "_medallion_delete"],
                    MergeSpec(("id", "region"), ("seq",), "_medallion_delete"))
    merge = sqlglot.parse_one(sql, read="spark")
    assert isinstance(merge, exp.Merge)
    assert merge.this.name == "/lake/silver/orders" and merge.this.db == "delta"
    whens = merge.find_all(exp.When)
    kinds = [(w.args.get("matched"), type(w.args["then"]).__name__) for w in whens]
    assert kinds == [(True, "Var"), (True, "Update"), (False, "Insert")]  # DELETE parses as Var
    condition = merge.args["on"].sql("spark")
    assert "t.`id` = s.`id`" in condition and "t.`region` = s.`region`" in condition
    assert "_medallion_delete" not in merge.find(exp.Insert).sql("spark").split("VALUES")[0]
    plain = sqlglot.parse_one(merge_sql("/p", "src", ["id", "v"], MergeSpec(("id",))),
                              read="spark")
    assert len(list(plain.find_all(exp.When))) == 2
    adding = sqlglot.parse_one(merge_sql("/p", "src", ["id", "n", "v"], MergeSpec(
        ("id",), added=("n", "v"), added_rows="n")), read="spark")
    assert [w.sql("spark") for w in adding.find_all(exp.When)] == [
        "WHEN MATCHED AND t.`n` + s.`n` <= 0 THEN DELETE",
        "WHEN MATCHED THEN UPDATE SET `id` = s.`id`, "
        "`n` = COALESCE(COALESCE(t.`n`, 0) + s.`n`, t.`n`), "
        "`v` = COALESCE(COALESCE(t.`v`, 0) + s.`v`, t.`v`)",
        "WHEN NOT MATCHED AND s.`n` > 0 THEN INSERT (`id`, `n`, `v`) "
        "VALUES (s.`id`, s.`n`, s.`v`)"]
    keeping = sqlglot.parse_one(merge_sql("/p", "src", ["id", "v"], MergeSpec(
        ("id",), ignore_nulls=True)), read="spark")  # ignore_null_updates
    assert [e.sql("spark") for e in keeping.find(exp.Update).expressions] == [
        "`id` = s.`id`", "`v` = COALESCE(s.`v`, t.`v`)"]


@pytest.mark.unit
@pytest.mark.parametrize("as_of,clause", [(None, None), (3, "VERSION AS OF 3"),
                                          ("2024-05-01T00:00:00Z", "TIMESTAMP AS OF")])
def test_native_time_travel_sql_parses_with_sqlglot_spark(as_of, clause):
    query = sqlglot.parse_one(snapshot_sql("/lake/gold/revenue", as_of), read="spark")
    table = query.find(exp.Table)
    assert table.name == "/lake/gold/revenue" and table.db == "delta"
    if clause:
        assert clause in query.sql("spark")



@ON_BOTH_STORES
def test_table_columns(engine, spark, lake):
    path = f"{lake}/wh/t"
    assert engine.table_columns(path) is None
    engine.write(frame(spark, [(1, "a", 1)]), path, "overwrite")
    # both engines name types as Spark does (what the static checks compare)
    assert engine.table_columns(path) == {"id": "bigint", "v": "string", "seq": "int"}


def test_checkpoint_files(engine, tmp_path):
    checkpoint = tmp_path / "wh/_checkpoints/models/m"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets/0").write_text("v1")
    (checkpoint / "metadata").write_text('{"id":"q1"}')
    assert read_text(engine, str(checkpoint / "metadata")) == '{"id":"q1"}'
    remove(engine, str(checkpoint))
    assert not checkpoint.exists()
    remove(engine, str(checkpoint))  # nothing there: fine
