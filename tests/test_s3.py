"""The lakehouse on S3 (moto's server on loopback): the sample built with only the standard AWS
variables and MEDALLION_WAREHOUSE / MEDALLION_LANDING set, as a user runs it, gives the tables
a local build gives, and other engines (Polars, DuckDB) read what medallion wrote."""

import os
import shutil
import signal
import socket
import subprocess
import sysconfig
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner
from deltalake import DeltaTable
from helpers import medallion, s3_tables, sample_copy

from medallion_cli import commands
from medallion_cli.cli.group import main
from medallion_cli.storage.object_store import (
    DELTARS_PATIENCE,
    aws_settings,
    deltars_options,
    s3a_conf,
)

# Per engine: the sample's target with its warehouse on S3 (delta-spark: Delta Lake for Spark's
# log through S3A; embedded: Spark's files through S3A, delta-rs's log by conditional puts).
ON_S3 = {"delta-spark": "s3", "embedded": "s3-embedded"}


def sample_on_s3(s3, folder: Path, name: str, engine_name: str) -> tuple[Path, str, dict]:
    """A copy of the sample, a bucket of its own holding its landing files, and the
    environment a user sets for it: the AWS variables, the engine's S3 target,
    MEDALLION_LANDING, and MEDALLION_WAREHOUSE (s3://<bucket>/lake)."""
    sample = sample_copy(folder / name)
    bucket = s3.create_bucket(f"{name}-{uuid.uuid4().hex[:8]}")
    s3.upload_folder(sample / "landing", f"s3://{bucket}/landing")
    env = {**os.environ, **s3.aws_env(), "MEDALLION_TARGET": ON_S3[engine_name],
           "MEDALLION_LANDING": f"s3://{bucket}/landing",
           "MEDALLION_WAREHOUSE": f"s3://{bucket}/lake"}
    return sample, bucket, env


# The fault tests build the sample's orders path, landing to its first gold table (7 of its
# 25 nodes: a seed, three models and silver's tests; the tests that also read a table off the
# path are left out, as silver_customers and gold_daily_revenue are not built), each build a
# JVM start and a few nodes, where the whole sample's is a JVM start and 25. (To
# gold_daily_revenue and its tests, 11 nodes, a build took 55 s on delta-spark, of which
# those four took 11 s.)
ORDERS_PATH = ["-s", "+gold_order_lines", "--exclude", "relationships_silver_orders_customer_id",
               "assert_revenue_matches_order_lines"]
ORDERS_TABLES = {"bronze/bronze_orders", "silver/silver_orders",
                 "silver/silver_orders_quarantine", "silver/silver_orders_tombstones",
                 "seeds/products", "gold/gold_order_lines"}


# The S3 fault cases (a kill, a store cut, a store throttling), each several builds of a sample
# copy in processes of their own: the slow tier's. The default tier writes, merges and streams
# on S3 on both engines (test_engine_contract.py, test_streaming.py), starts a build on S3 here
# (two builds at once) and kills builds on a local folder (test_streaming.py).
FAULT_CASE = pytest.mark.slow("S3 fault cases: several processes and JVM starts each")


def build_in(sample: Path, env: dict, timeout: int = 900, only: Sequence[str] = (),
             **more: str):
    """`medallion build` of a copy of the sample in a process of its own, as a user runs it,
    of the `only` nodes (selection arguments; none: all), with `more` variables set for this
    run only (e.g. MEDALLION_WAREHOUSE)."""
    return medallion(None, "build", *only, cwd=sample, env={**env, **more}, timeout=timeout)


def orders_path_started(s3, sample: Path, env: dict, table: str) -> subprocess.Popen:
    """A build of the orders path started in a process of its own, once it has committed to
    `table` (a path in the bucket of MEDALLION_WAREHOUSE): for a fault to meet it there."""
    build = medallion(None, "build", *ORDERS_PATH, cwd=sample, env=env, wait=False,
                      merged=False)
    bucket = env["MEDALLION_WAREHOUSE"].split("/")[2]
    deadline = time.monotonic() + 600
    while "Contents" not in s3.client().list_objects_v2(Bucket=bucket,
                                                        Prefix=f"{table}/_delta_log/"):
        assert build.poll() is None and time.monotonic() < deadline, build.communicate()
        time.sleep(0.1)
    return build


@contextmanager
def variables_of(env: dict):
    """The test's process with the run's AWS and medallion variables set, as its shell would."""
    with pytest.MonkeyPatch.context() as here:
        for key, value in env.items():
            if key.startswith(("AWS_", "MEDALLION_")):
                here.setenv(key, value)
        yield


def orders_path_here(sample: Path, env: dict) -> dict:
    """A build of the orders path in the test's process, with the suite's Spark, where no
    process needs to start or die (a build after a fault, to finish what it left): {name:
    NodeResult}. (A process of its own costs a JVM's start and its code compiled cold: 20 s of
    a delta-spark build on S3's 25.)"""
    with variables_of(env):
        results = commands.build(commands.Invocation(
            project_dir=str(sample), select=(ORDERS_PATH[1],), exclude=tuple(ORDERS_PATH[3:])),
            "build")
    return {result.name: result for result in results}


def orders_path_said(sample: Path, env: dict):
    """`medallion build` of the orders path through the CLI in the test's process: its exit
    code and what it printed (stdout, stderr), where a failure is the case and no process need
    die."""
    with variables_of(env):
        return CliRunner().invoke(main, ["build", *ORDERS_PATH, "--project-dir", str(sample)])


def finished(results: dict) -> bool:
    return not [result.message for result in results.values() if result.failed]


def uninterrupted(local_sample, engine_name: str) -> dict:
    """The orders path's tables as an uninterrupted build leaves them: the sample's, built in
    a local folder once a run (the first test shows a build on S3 leaves the same tables)."""
    built = local_sample.tables(engine_name)
    assert ORDERS_TABLES <= set(built), sorted(built)
    return {table: rows for table, rows in built.items() if table in ORDERS_TABLES}


@pytest.mark.slow("the whole sample on S3 in a process of its own; the default tier writes, "
                  "merges and streams on S3 on both engines (test_engine_contract.py, "
                  "test_streaming.py) and starts a build on S3 here (two builds at once)")
def test_the_sample_builds_from_s3_as_from_a_local_folder(s3, tmp_path, engine_name,
                                                         local_sample):
    on_s3_copy, bucket, env = sample_on_s3(s3, tmp_path, "lake", engine_name)
    shutil.rmtree(on_s3_copy / "landing")  # only the bucket has the files
    before = s3.requests()
    out = build_in(on_s3_copy, env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "25 success" in out.stdout, out.stdout
    assert s3.requests() - before  # the build reached the store
    assert "Contents" not in s3.client().list_objects_v2(  # its lease is given back
        Bucket=bucket, Prefix="lake/_medallion/lock")
    assert not any(p.name.startswith("warehouse") for p in on_s3_copy.iterdir())

    local = local_sample.tables(engine_name)
    local_warehouse = local_sample.warehouse(engine_name)
    built = s3_tables(s3, f"s3://{bucket}/lake")
    assert sorted(built) == sorted(local)
    for table, rows in local.items():
        assert built[table] == rows, table
    secret = s3.aws_env()["AWS_SECRET_ACCESS_KEY"]
    assert secret not in out.stdout + out.stderr
    assert not any(secret in p.read_text(errors="replace")
                   for p in (on_s3_copy / "target").rglob("*") if p.is_file())
    events = DeltaTable(f"s3://{bucket}/lake/_medallion/events",
                        storage_options=deltars_options(aws_settings(s3.aws_env())))
    logged = events.to_pyarrow_table().to_pylist()
    assert logged and secret not in str(logged)  # nor in the event log beside the tables

    # Other engines read what medallion wrote, on S3 and in a local folder: Polars, and DuckDB
    # with its Delta and S3 (httpfs) extensions from PyPI (nothing downloaded at run time)
    import polars as pl

    revenue = "gold/gold_daily_revenue"
    frame = pl.read_delta(f"s3://{bucket}/lake/{revenue}", storage_options={
        key: value for key, value in deltars_options(aws_settings(s3.aws_env())).items()
        if key.startswith("AWS_")})  # Polars' own reader takes the AWS settings alone
    assert frame.height == len(local[revenue])
    rows = sorted(tuple(row[c] for c in ("order_date", "category", "orders", "revenue",
                                         "currency"))
                  for row in DeltaTable(str(local_warehouse / revenue))
                  .to_pyarrow_table().to_pylist())
    assert duckdb_rows(str(local_warehouse / revenue)) == rows
    assert duckdb_rows(f"s3://{bucket}/lake/{revenue}", s3) == rows


def duckdb_rows(table: str, s3=None) -> list[tuple]:
    """A gold table's rows read by DuckDB's delta_scan, from a folder or from the S3 server, as
    docs/engines-and-clusters.md shows (its extensions from their wheels, none downloaded)."""
    import duckdb

    con = duckdb.connect(config={
        "extension_directory": f"{sysconfig.get_paths()['purelib']}/duckdb_ext/extensions",
        "autoinstall_known_extensions": False})
    con.execute("LOAD delta")
    if s3 is not None:
        env = s3.aws_env()
        con.execute("LOAD httpfs")
        con.execute(f"CREATE SECRET store (TYPE s3, KEY_ID '{env['AWS_ACCESS_KEY_ID']}', "
                    f"SECRET '{env['AWS_SECRET_ACCESS_KEY']}', REGION '{env['AWS_REGION']}', "
                    f"ENDPOINT '{s3.endpoint.removeprefix('http://')}', URL_STYLE 'path', "
                    "USE_SSL false)")
    return sorted(con.execute("select order_date, category, orders, revenue, currency "
                              f"from delta_scan('{table}')").fetchall())


@pytest.mark.unit
def test_the_aws_variables_reach_s3a_and_delta_rs_from_one_place():
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ACCESS_KEY_ID": "AKIA",
           "AWS_SECRET_ACCESS_KEY": "shh", "AWS_SESSION_TOKEN": "tok",
           "AWS_DEFAULT_REGION": "eu-west-1"}
    aws = aws_settings(env)
    conf = s3a_conf(aws)
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert conf["spark.hadoop.fs.s3a.secret.key"] == "shh"
    assert conf["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith(
        "TemporaryAWSCredentialsProvider")
    assert conf["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert deltars_options(aws) == {
        **DELTARS_PATIENCE,
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "shh",
        "AWS_SESSION_TOKEN": "tok"}
    # nothing set: each client finds credentials itself (profiles, instance roles); both give
    # up on a store that stopped answering within about a minute
    assert deltars_options(aws_settings({})) == DELTARS_PATIENCE
    assert not [key for key in s3a_conf(aws_settings({}))
                if "key" in key or "token" in key or "endpoint" in key]
    assert s3a_conf(aws_settings({}))["spark.hadoop.fs.s3a.retry.limit"] == "2"


@pytest.mark.unit
def test_a_project_on_s3_needs_the_s3_connector_and_a_local_one_does_not(tmp_path, monkeypatch):
    from medallion_cli.load.project import load_project
    from medallion_cli.spark.jars import bundles_for

    sample = sample_copy(tmp_path / "sample")
    monkeypatch.delenv("MEDALLION_WAREHOUSE", raising=False)
    monkeypatch.delenv("MEDALLION_LANDING", raising=False)
    assert bundles_for(load_project(sample, target="local-delta")) == []
    assert bundles_for(load_project(sample, target="s3")) == ["s3"]
    monkeypatch.setenv("MEDALLION_LANDING", "s3://bucket/landing")
    assert bundles_for(load_project(sample, target="local")) == ["s3"]


def test_a_missing_bucket_is_one_line_naming_the_store_before_any_model_runs(s3, tmp_path,
                                                                            engine_name):
    """Said alike on both engines, though S3A meets it at Spark's start on delta-spark and
    delta-rs before (is_incremental() asking while the project loads) on the embedded one."""
    sample = sample_copy(tmp_path / "sample")
    env = {**os.environ, **s3.aws_env(), "MEDALLION_TARGET": ON_S3[engine_name],
           "MEDALLION_WAREHOUSE": "s3://no-such-bucket/lake"}
    out = build_in(sample, env, timeout=600)
    assert out.returncode == 2  # the project's settings, as for any target that cannot run
    assert out.stderr.splitlines()[0] == (
        f"Error: {sample}/profiles/profiles.yml: target '{ON_S3[engine_name]}': the warehouse "
        f"s3://no-such-bucket/lake cannot be used: its bucket does not exist "
        f"(store: {s3.endpoint})")
    assert "aws s3 mb s3://no-such-bucket" in out.stderr
    assert "Running" not in out.stdout and "Traceback" not in out.stderr


@pytest.mark.local_spark  # the log store is read in this process's JVM
def test_delta_for_spark_commits_on_s3_are_conditional_puts_the_store_refuses_over_another(
        s3, spark):
    """Delta Lake for Spark's commits on S3 go through Medallion's log store: a commit written
    where another already is (as by a build paused past its lease, resumed after the build
    that took over committed) is refused by the store itself, whatever Delta checked before;
    Delta's own S3 store would have overwritten it. (The embedded engine commits through
    delta-rs, whose commits are conditional puts already.)"""
    from medallion_cli.engines.delta_spark.log_store import CLASS

    bucket = s3.create_bucket(f"store-{uuid.uuid4().hex[:8]}")
    table = f"s3://{bucket}/t"
    assert spark.sparkContext.getConf().get("spark.delta.logStore.s3.impl") == CLASS
    conf = spark._jsc.hadoopConfiguration()
    for key, value in s3a_conf(aws_settings(s3.aws_env())).items():  # as a build's start does
        conf.set(key.removeprefix("spark.hadoop."), value)
    spark.range(3).write.format("delta").save(table)
    spark.range(3, 5).write.format("delta").mode("append").save(table)
    commit = "t/_delta_log/00000000000000000001.json"
    before = s3.client().head_object(Bucket=bucket, Key=commit)["ETag"]

    jvm = spark._jvm
    store = jvm.io.medallion.delta.ConditionalPutLogStore(conf)
    actions = jvm.java.util.ArrayList()
    actions.add('{"commitInfo":{"operation":"LATE"}}')
    with pytest.raises(Exception, match="java.nio.file.FileAlreadyExistsException: " + table):
        store.write(jvm.org.apache.hadoop.fs.Path(f"{table}/_delta_log/00000000000000000001.json"),
                    actions.iterator(), False, conf)
    assert s3.client().head_object(Bucket=bucket, Key=commit)["ETag"] == before
    spark.range(5, 6).write.format("delta").mode("append").save(table)  # Delta goes on
    assert sorted(row.id for row in spark.read.format("delta").load(table).collect()) == list(
        range(6))


@FAULT_CASE
def test_a_build_killed_on_s3_is_finished_by_the_next_with_nothing_lost_or_doubled(
        s3, tmp_path, engine_name, local_sample):
    """SIGKILL after silver_orders' first Delta commit, before its checkpoint knew: the next
    build (taking over the dead build's lease at once: same machine) replays that batch as
    already committed, and every table of the orders path equals an uninterrupted build's on
    S3."""
    sample, bucket, env = sample_on_s3(s3, tmp_path, "kill", engine_name)
    env["MEDALLION_WAREHOUSE"] = f"s3://{bucket}/killed"
    killed = build_in(sample, env, only=ORDERS_PATH,
                      MEDALLION_CRASH_AT="silver_orders:committed:0")
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    again = orders_path_here(sample, env)
    assert finished(again), again
    assert "1 replayed batch(es) already committed" in again["silver_orders"].message
    assert s3_tables(s3, f"s3://{bucket}/killed") == uninterrupted(local_sample, engine_name)


@pytest.mark.parametrize("engine_name", ["embedded"])  # the lease is the same on both engines
def test_two_builds_at_once_on_s3_the_second_refused_naming_the_first(s3, tmp_path, engine_name):
    sample, bucket, env = sample_on_s3(s3, tmp_path, "two", engine_name)
    watching = medallion(None, "build", "--watch", cwd=sample, env=env, wait=False, quiet=True)
    try:
        deadline = time.monotonic() + 600
        while "Contents" not in s3.client().list_objects_v2(Bucket=bucket,
                                                            Prefix="lake/_medallion/lock"):
            assert watching.poll() is None and time.monotonic() < deadline
            time.sleep(0.5)
        second = build_in(sample, env, timeout=600)
        assert second.returncode == 2, second.stdout + second.stderr
        assert f"`medallion build --watch` (pid {watching.pid} on " in second.stderr
        assert "is writing this warehouse" in second.stderr and "Running" not in second.stdout
    finally:
        watching.kill()  # as a crash would: its lease stays, its process is gone
        watching.wait(timeout=120)
    assert finished(orders_path_here(sample, env))  # the dead build's lease taken over
    orders = s3_tables(s3, f"s3://{bucket}/lake")["bronze/bronze_orders"]
    assert len(orders) == 13  # the sample's order lines, each once (2 malformed kept raw)


@FAULT_CASE
def test_a_store_gone_mid_build_fails_in_one_line_and_the_next_build_finishes(
        s3, tmp_path, engine_name, local_sample):
    """The store's connection is cut once silver_orders has committed (a relay in front of
    moto, which keeps its data): the build gives up within its retries, each failed node in
    one line naming the store; with the store back, the next build ends with the tables of an
    uninterrupted one."""
    from medallion_cli.testing.s3_server import Cuttable

    relay = Cuttable(s3.endpoint)
    sample, bucket, env = sample_on_s3(s3, tmp_path, "cut", engine_name)
    env["AWS_ENDPOINT_URL"] = relay.endpoint
    env["MEDALLION_WAREHOUSE"] = f"s3://{bucket}/cut"
    cut_build = orders_path_started(s3, sample, env, "cut/silver/silver_orders")
    relay.cut()
    cut_at = time.monotonic()
    out, err = cut_build.communicate(timeout=600)
    gave_up = time.monotonic() - cut_at
    relay.restore()
    assert cut_build.returncode == 1, out + err
    failures = [line.strip() for line in out.splitlines()
                if "the object store did not answer" in line]
    assert failures, out + err
    assert all(line.split(": ", 1)[1].startswith("the object store did not answer (http://127.0.0.1:")
               for line in failures), failures
    assert "Traceback" not in out + err and "at org.apache" not in out + err, (
        err[:3000] + out[-3000:])
    assert gave_up < 300, gave_up  # within the retries' limits, not S3A's defaults (minutes)

    # the store back, reached directly: the relay was the fault, not the store
    assert finished(orders_path_here(sample, {**env, "AWS_ENDPOINT_URL": s3.endpoint}))
    assert s3_tables(s3, f"s3://{bucket}/cut") == uninterrupted(local_sample, engine_name)


def family(pid: int) -> list[int]:
    """A process and all it started (a build's Python and its Spark JVM)."""
    children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                              text=True).stdout.split()
    return [pid, *(grandchild for child in children for grandchild in family(int(child)))]


def delta_commits(s3, bucket: str) -> dict[str, str]:
    """Every Delta commit on the bucket (its _delta_log/N.json) and its ETag. (Not the .crc
    beside one: a checksum its writer may add after committing.)"""
    return {item["Key"]: item["ETag"] for item in s3.client().list_objects_v2(
        Bucket=bucket, Prefix="lake/")["Contents"]
        if "/_delta_log/" in item["Key"] and item["Key"].endswith(".json")}


@FAULT_CASE
def test_a_build_paused_past_its_lease_commits_nothing_after_the_build_that_took_it_over(
        s3, tmp_path, engine_name, local_sample, monkeypatch):
    """A build (its Python and its JVM) is paused once bronze_orders has committed, as a long GC
    pause or a partition would stop a machine; another build takes the lapsed lease over and
    builds the orders path. Resumed, the first stops before its next commit, in one line, exit
    2: it writes no table after the new holder, overwrites none of its commits, and the tables
    are an uninterrupted build's.
    (The lease is 4 s here, 60 s by default.)"""
    from medallion_cli.core.errors import MedallionError
    from medallion_cli.run import lease

    sample, bucket, env = sample_on_s3(s3, tmp_path, "paused", engine_name)
    env["MEDALLION_LEASE_SECONDS"] = "4"
    monkeypatch.setattr(lease, "LEASE_SECONDS", 4.0)  # the next build's, in this process
    monkeypatch.setattr(lease, "RENEW_SECONDS", 1.0)
    first = orders_path_started(s3, sample, env, "lake/bronze/bronze_orders")
    deadline = time.monotonic() + 600
    paused = family(first.pid)
    for pid in paused:
        os.kill(pid, signal.SIGSTOP)
    try:
        while True:  # the lease lapses 4 s after the paused build's last renewal
            try:
                taken_over = orders_path_here(sample, env)
                break
            except MedallionError as refused:
                assert "is writing this warehouse" in str(refused)
                assert time.monotonic() < deadline
                time.sleep(0.5)
        assert finished(taken_over), taken_over
        after_takeover = s3_tables(s3, f"s3://{bucket}/lake")
        commits = delta_commits(s3, bucket)
    finally:
        for pid in paused:
            os.kill(pid, signal.SIGCONT)
    out, err = first.communicate(timeout=600)
    assert first.returncode == 2, out + err
    # (a warning may come first: on delta-spark, an event log commit under way in the JVM
    # when it was paused, refused by Delta as the new holder's came first)
    assert [line for line in err.splitlines() if line.startswith("Error:")] == [
        f"Error: this build lost the warehouse's lease (s3://{bucket}/lake/_medallion/lock): "
        + err.split("/_medallion/lock): ", 1)[1].splitlines()[0]], err
    assert "it stopped before its next commit" in err and "Traceback" not in err
    # No commit of the new holder's is overwritten (a commit under way when the first was
    # paused is refused by the store: conditional puts on both engines), and none is added to
    # a table, only perhaps to the event log: an append to it under way when paused, which
    # Delta may retry after the new holder's without conflict (its record is true).
    now = delta_commits(s3, bucket)
    assert {key: now.get(key) for key in commits} == commits
    assert all(key.startswith("lake/_medallion/events/") for key in now.keys() - commits.keys())
    assert after_takeover == uninterrupted(local_sample, engine_name)


def throttles(s3, bucket: str, prefix: str) -> bool:
    """Whether the store answers a listing under `prefix` with SlowDown (asked once, with no
    client's retries)."""
    try:
        urllib.request.urlopen(f"{s3.endpoint}/{bucket}?list-type=2&prefix={prefix}",
                               timeout=30).close()
    except urllib.error.HTTPError as answer:
        return answer.code == 503
    return False


@FAULT_CASE
def test_a_store_throttling_some_keys_is_retried_then_one_line_per_node_and_nothing_lost(
        s3, tmp_path, engine_name, local_sample):
    """S3 throttles by prefix (503 SlowDown): a store that keeps refusing writes under silver/
    fails those nodes in one line each naming the store, bronze commits, gold is skipped; once
    the store only answers a few requests that way, each 2 s late, they are retried and the next
    build ends with the tables of an uninterrupted one. (One build serves both: the blip's and
    the recovery's; the blip once had a build of its own, 40 s of the suite on delta-spark.)"""
    sample, bucket, env = sample_on_s3(s3, tmp_path, "busy", engine_name)
    env["MEDALLION_WAREHOUSE"] = f"s3://{bucket}/busy"
    expected = uninterrupted(local_sample, engine_name)
    try:
        s3.fault(503, under="busy/silver/")  # refused as the project loads
        refused = orders_path_said(sample, env)  # no process need die: in this one
        s3.fault(503, under="busy/silver/", method="PUT")  # refused mid-build
        busy = orders_path_said(sample, env)
        committed = s3_tables(s3, f"s3://{bucket}/busy")
        s3.fault(503, under="busy/silver/", times=3, delay=2.0)  # slow, then well again
        again = orders_path_here(sample, env)
        blip_left = throttles(s3, bucket, "busy/silver/")  # had the build met all three?
    finally:
        s3.fault()
    assert refused.exit_code != 0 and "Running" not in refused.stdout
    assert refused.stderr.splitlines()[0].startswith(
        f"Error: is_incremental() could not tell whether the table s3://{bucket}/busy/silver/")
    assert f"the object store refused ({s3.endpoint}: 503 SlowDown)" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert busy.exit_code == 1, busy.stdout + busy.stderr
    failed = [line.strip() for line in busy.stdout.splitlines() if "ERROR" in line]
    assert failed and all("silver" in line for line in failed), busy.stdout
    reasons = [line.strip() for line in busy.stdout.splitlines()
               if line.strip().startswith("models/silver/")]
    assert len(reasons) == len(failed), busy.stdout
    assert all(f"the object store refused ({s3.endpoint}: 503 SlowDown)" in line
               for line in reasons), busy.stdout
    assert "Traceback" not in busy.stdout + busy.stderr
    assert "at org.apache" not in busy.stdout + busy.stderr
    assert committed["bronze/bronze_orders"] == expected["bronze/bronze_orders"]
    assert not [table for table in committed if table.startswith("gold/")]
    assert finished(again), again
    assert not blip_left
    assert s3_tables(s3, f"s3://{bucket}/busy") == expected


# What each client said when moto, behind its fault switch, answered 503 or 500 (captured):
# delta-rs (object_store), pyarrow (the embedded engine's staging) and S3A (Spark's files,
# Delta Lake for Spark's log). The lease's boto3 errors are the lease's own (run/locking.py).
STORE_ANSWERS = [
    ("Kernel error -> Generic S3 error\n  ↳ Error performing GET http://127.0.0.1:44497/bkt/t/"
     "_delta_log/_last_checkpoint in 108ms, after 1 retries\n  ↳ Server returned non-2xx status "
     "code\n  ↳ 503 Service Unavailable\n  ↳ <Error><Code>SlowDown</Code><Message>Please reduce "
     "your request rate.</Message></Error>", "http://127.0.0.1:44497: 503 SlowDown"),
    ("When reading information for key 't/x.json' in bucket 'bkt': AWS Error UNKNOWN (HTTP "
     "status 500) during HeadObject operation: No response body.", "http://127.0.0.1:9000: 500"),
    ("py4j.protocol.Py4JJavaError: An error occurred while calling o91.save.\n: org.apache."
     "hadoop.fs.s3a.AWSServiceThrottledException: getFileStatus on s3a://bkt/t: software.amazon"
     ".awssdk.services.s3.model.S3Exception: Please reduce your request rate. (Service: S3, "
     "Status Code: 503, Request ID: 1):SlowDown", "http://127.0.0.1:9000: 503 SlowDown"),
]


@pytest.mark.unit
@pytest.mark.parametrize("text, answer", STORE_ANSWERS)
def test_a_store_answering_5xx_is_one_line_saying_so_whichever_client_met_it(
        text, answer, monkeypatch):
    from medallion_cli.core.error_text import error_message

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    message = error_message(RuntimeError(text))
    assert message.startswith(f"the object store refused ({answer}), after retries"), message
    assert "\n" not in message and "build again" in message


@pytest.mark.unit
def test_a_missing_bucket_met_by_delta_rs_is_said_so_not_as_a_store_gone():
    """The embedded engine meets a missing bucket first through delta-rs (is_incremental(),
    before Spark starts): what it said was 'the object store did not answer ... after retries'."""
    from medallion_cli.core.error_text import error_message

    text = ("Generic S3 error\n  ↳ Error performing list request\n  ↳ Error performing GET "
            "http://127.0.0.1:9123/no-such-bucket?list-type=2&prefix=lake - Server returned "
            "non-2xx status code\n<Error><Code>NoSuchBucket</Code><Message>The specified bucket "
            "does not exist</Message><BucketName>no-such-bucket</BucketName></Error>")
    assert error_message(OSError(text)) == (
        "its bucket does not exist (store: http://127.0.0.1:9123): create the bucket (e.g. aws "
        "s3 mb s3://no-such-bucket), or fix the target's warehouse")


@pytest.mark.unit
def test_a_timeout_is_the_stores_only_where_the_error_names_a_store(monkeypatch):
    from medallion_cli.core.error_text import error_message

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    spark_said = ("java.net.SocketTimeoutException: Timed out while waiting for the Python "
                  "worker to connect back")
    assert error_message(RuntimeError(spark_said)) == spark_said
    s3a_said = ("org.apache.hadoop.fs.s3a.AWSClientIOException: getFileStatus on s3a://bkt/t: "
                "java.net.SocketTimeoutException: Read timed out")
    assert error_message(RuntimeError(s3a_said)).startswith(
        "the object store did not answer (http://127.0.0.1:9000: SocketTimeoutException)")


@pytest.mark.unit
def test_the_test_s3_server_leaves_no_folder_behind_once_stopped():
    """Engine-independent (moto's server only): its request log, megabytes a test run, went
    with it; 142 such folders had piled up in /tmp before."""
    from medallion_cli.testing import s3_server

    server = s3_server.start()
    folder = server.log.parent
    assert folder.is_dir()
    server.stop()
    assert not folder.exists() and server.process.poll() is not None


@pytest.mark.unit
def test_the_relay_closes_each_connection_it_relayed():
    """The relay in front of the test S3 server keeps no socket of a finished connection (it
    kept both of each: 1,400 in one test process, which broke py4j's callback server there)."""
    from medallion_cli.testing.s3_server import Cuttable

    upstream = socket.create_server(("127.0.0.1", 0))
    relay = Cuttable(f"http://127.0.0.1:{upstream.getsockname()[1]}")
    try:
        for _ in range(20):
            with socket.create_connection(("127.0.0.1", relay.port)) as client:
                served, _ = upstream.accept()
                client.sendall(b"ping")
                assert served.recv(4) == b"ping"
                served.close()
        deadline = time.monotonic() + 30
        while relay.open and time.monotonic() < deadline:
            time.sleep(0.05)
        assert relay.open == []
    finally:
        relay.cut()
        upstream.close()


@pytest.mark.unit
def test_the_s3_demo_server_says_how_to_install_moto_where_it_is_missing():
    """The docs' demo after the README's install (no test extra): one line saying what to
    install, not a ModuleNotFoundError."""
    import sys

    without_moto = ("import runpy, sys; sys.modules['moto'] = None; "
                    "runpy.run_module('medallion_cli.testing.s3_server', run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", without_moto, "0"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 1
    assert out.stderr.strip() == ("moto is not installed here: pip install 'moto[server]' (or "
                                  "the package's test extra, pip install -e '.[test]'), then "
                                  "run this again")
