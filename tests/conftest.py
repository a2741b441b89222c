"""Shared fixtures: one SparkSession per test worker (pytest-xdist runs the files on every core,
each file on one worker), and small projects written to tmp folders. Tests marked `unit` need
no JVM (`pytest -m unit` runs them alone, with no Java on the machine); every other test gets
the session started before it runs.

Every test that builds runs on both engines: it asks for `engine_name` (directly, or through the
`build` fixture), which is parametrized over ENGINES, and `project` then writes a profile whose
target uses that engine. A test that fits one engine only parametrizes `engine_name` itself, with
a comment saying why. Both engines share the one SparkSession: it starts with Delta Lake's JARs
(fetched with Maven by `medallion jars` on first use), which the embedded engine never touches.
"""

from __future__ import annotations

import os
import signal
import textwrap
import uuid
from pathlib import Path

import pytest

from medallion_cli import commands
from medallion_cli.core.project import Target
from medallion_cli.spark import jars

# The tiers, their marks and the workers' order (tiers.py); its mark for files whose
# delta-spark cases are the slow tier's is the test files' to import from here
pytest_plugins = ["tiers"]
from tiers import DELTA_SPARK_IN_SLOW_TIER  # noqa: E402,F401

# A run over Spark Connect (test_connect_builds.py starts one): the tests reach Spark through
# this server, a third way beside a local Spark and the standalone cluster. The delta-spark
# engine only (the embedded one writes its Delta log from this process), and no JVM here.
REMOTE = os.environ.get("MEDALLION_TEST_SPARK_REMOTE")
# Commands the tests run start medallion's daemon only where a test asks for it (a developer's
# MEDALLION_DAEMON=on would leave a JVM behind per project).
os.environ.pop("MEDALLION_DAEMON", None)
ENGINES = ("delta-spark",) if REMOTE else ("embedded", "delta-spark")

PROFILE_TEMPLATE = """\
test:
  target: local
  outputs:
    local:
      engine: {engine}
      warehouse: {warehouse}
      spark:
        {where}
        conf:
          spark.sql.shuffle.partitions: 2
          # The suite is CPU-bound on CI's two cores, with tiny data: compiling each query's
          # code and the JIT's second tier cost more than they save (test_cdc*.py: 255 s with
          # neither, 184 s with both). C1 alone keeps the code cache C2 would have: in 48 MB
          # Java evicts and compiles Delta's code again (test_merge_semantics.py and
          # test_cdc.py: 165 s, 135 s with 240 MB)
          spark.sql.codegen.wholeStage: false
          # and projections interpreted, not generated as Java and compiled: generating their
          # code (its comments stripped by regular expressions) was a fifth of a worker's JVM
          # time (test_datatests.py's delta-spark tests: 121 s, against 139 s)
          spark.sql.codegen.factoryMode: NO_CODEGEN
          # A worker's one session runs hundreds of tests: with Spark's 1 GB its heap held
          # 460-490 MB after each full collection, which came every 90 s and took 0.9-1.3 s
          spark.driver.memory: 2g
          spark.driver.extraJavaOptions: "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"
"""


SERVER_ONLY = ("wholeStage", "factoryMode", "spark.driver.")


def profile_for(engine: str, warehouse: str = "warehouse") -> str:
    profile = PROFILE_TEMPLATE.format(engine=engine, warehouse=warehouse, where=(
        f'remote: "{REMOTE}"' if REMOTE else 'master: "local[2]"'))
    if REMOTE:  # only the session's settings: the server was started with its own
        profile = "\n".join(line for line in profile.splitlines() if not any(
            server_only in line for server_only in SERVER_ONLY)) + "\n"
    return profile


def target_for(name: str, engine: str, warehouse: str) -> Target:
    """A target for an engine made by a test itself (over Spark Connect in a REMOTE run)."""
    return Target(name, engine, warehouse, "local[2]", {}, 1, spark_remote=REMOTE)


def pytest_configure(config):
    """A run started in the background (`nohup pytest &`) has Ctrl-C ignored, as has every
    build a test starts then: the Ctrl-C tests need it as a terminal gives it."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items):
    """A REMOTE run leaves out what it cannot run or ran already: the embedded engine's tests,
    the unit tier, tables on S3, tests that need a JVM in this process (marked local_spark,
    saying why), and tests whose path over Spark Connect another test there takes (marked
    same_path_over_connect, naming it). (tiers.py orders and tiers the tests before this.)"""
    if not REMOTE:
        return
    for item in items:
        params = getattr(item, "callspec", None)
        given = params.params if params is not None else {}
        # (object storage over Spark Connect is the server's to reach: not tested here)
        other = given.get("engine_name") == "embedded" or given.get("store") == "s3"
        same_path = item.get_closest_marker("same_path_over_connect")
        if other or item.get_closest_marker("unit") or item.get_closest_marker("local_spark"):
            item.add_marker(pytest.mark.skip(reason="not over Spark Connect"))
        elif same_path is not None:
            item.add_marker(pytest.mark.skip(
                reason=f"over Spark Connect, the path {same_path.args[0]} takes there"))


PROFILE = profile_for("embedded")  # for tests that do not build

PROJECT = """\
name: test_project
profile: test
"""


def write_project(root: Path, files: dict[str, str], project_yml: str = PROJECT,
                  profile: str = PROFILE) -> Path:
    """Write a project: medallion_project.yml, profiles/profiles.yml, then the given files."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "medallion_project.yml").write_text(project_yml)
    (root / "profiles").mkdir(exist_ok=True)
    (root / "profiles" / "profiles.yml").write_text(profile)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture(scope="session")
def delta_jars() -> Path:
    """The Delta Lake JARs, fetched with Maven on first use, as `medallion jars` does."""
    return commands.fetch_jars(("delta",))[0]


@pytest.fixture(autouse=True)
def _spark_first(request):
    """Every test but a unit one (`pytest -m unit`: no JVM, no Java needed) has the suite's
    SparkSession started before it runs, so no in-process build starts one without Delta's
    (and Kafka's) JARs."""
    if request.node.get_closest_marker("unit") is None:
        request.getfixturevalue("spark")


@pytest.fixture(scope="session")
def spark(request, delta_jars, tmp_path_factory):
    """The one SparkSession of the test run; engines made later pick it up via getOrCreate."""
    from medallion_cli.engines.delta_spark.settings import (
        check_delta_loaded,
        spark_settings,
    )
    from medallion_cli.load.profiles import load_target
    from medallion_cli.spark.start import start_spark

    if REMOTE:
        from pyspark import SparkContext

        from medallion_cli.spark.connect import client_session

        session = client_session(target_for("test", "delta-spark", "/unused"))
        yield session
        session.stop()
        assert SparkContext._gateway is None, "a JVM started in a run over Spark Connect"
        return
    # (in pytest's own temporary folder, which it prunes: a run left one folder a worker)
    root = write_project(tmp_path_factory.mktemp("session"), {}, profile=profile_for(
        "delta-spark"))
    # With Spark's Kafka source and S3 connector too: builds of projects with Kafka sources or
    # warehouses on S3 share this session.
    target = jars.with_bundles(load_target(root, "test", None, None), ["kafka", "s3"])
    session = start_spark(target, spark_settings(target))
    check_delta_loaded(session, target)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def local_sample(spark, tmp_path_factory):
    """The sample built in a local folder on each engine, once a test run for all its workers
    (helpers.LocalSample)."""
    from helpers import LocalSample

    mine = tmp_path_factory.getbasetemp()
    # an xdist worker's folder is inside the run's own (pytest-N/popen-gw0), which all see
    return LocalSample(mine.parent if os.environ.get("PYTEST_XDIST_WORKER") else mine)


@pytest.fixture(params=ENGINES)
def engine_name(request) -> str:
    return request.param


# Where a test's tables live: tests that run on both stores say so with ON_BOTH_STORES; the
# others use a local folder.
STORES = ("local", "s3")
ON_BOTH_STORES = pytest.mark.parametrize("store", STORES)


@pytest.fixture
def store() -> str:
    return "local"


@pytest.fixture
def lake(store, tmp_path, request, monkeypatch):
    """The root under which a test's tables go: its tmp folder, or (store "s3") a bucket of its
    own on the suite's S3 server, with the AWS variables set as a user sets them (a build's
    Spark start gives them to the suite's session, as engines made with with_s3a do)."""
    if store == "local":
        yield str(tmp_path)
        return
    server = request.getfixturevalue("s3")
    for key, value in server.aws_env().items():
        monkeypatch.setenv(key, value)
    bucket = server.create_bucket("t-" + uuid.uuid4().hex[:12])
    yield f"s3://{bucket}"
    # the test's tables did go to the store, not to a local folder of that name
    assert server.client().list_objects_v2(Bucket=bucket)["KeyCount"] > 0, "nothing on S3"


# Each project's warehouse, where it is not the project's own warehouse/ folder.
WAREHOUSES: dict[Path, str] = {}


def at(root: Path, table: str = "") -> str:
    """Where a table of a project written by `project` lives (local or on S3)."""
    base = WAREHOUSES.get(root, str(root / "warehouse"))
    return f"{base}/{table}" if table else base


@pytest.fixture
def project(tmp_path, request, store):
    """A function that writes a project into a fresh folder (one per call) and returns its path.
    Its profile's target uses the test's engine (`engine_name`), or the embedded one when the
    test does not build, and the test's store (`store`) for its warehouse."""
    engine = (request.getfixturevalue("engine_name") if "engine_name" in request.fixturenames
              else "embedded")
    lake = request.getfixturevalue("lake") if store != "local" else None
    count = iter(range(1000))

    def _project(files, **kw):
        root = tmp_path / f"proj{next(count)}"
        warehouse = f"{lake}/{root.name}/warehouse" if lake else "warehouse"
        if lake:
            WAREHOUSES[root] = warehouse
        kw.setdefault("profile", profile_for(engine, warehouse))
        return write_project(root, files, **kw)

    return _project


@pytest.fixture
def build(spark, engine_name):
    """Build a project like `medallion build` does; returns {name: NodeResult}."""

    def _build(root: Path, command: str = "build", kinds=("seed", "model"), **options):
        inv = commands.Invocation(project_dir=str(root), **options)
        return {r.name: r for r in commands.build(inv, command, kinds)}

    return _build


def model_tables(warehouse: Path) -> list[Path]:
    """The model and seed tables of a warehouse (not medallion's own, such as its event log)."""
    return [p for p in sorted(warehouse.glob("*/*"))
            if (p / "_delta_log").is_dir() and not p.parent.name.startswith("_")]


def delta_table(location):
    """A Delta table opened by delta-rs, outside the tool: a local one, or one on S3 with the
    AWS settings of the environment."""
    from deltalake import DeltaTable

    from medallion_cli.storage.object_store import storage_options

    return DeltaTable(str(location), storage_options=storage_options(str(location)))


def read_delta(location):
    """Rows of a Delta table read by delta-rs, outside the tool, sorted for comparison."""
    table = delta_table(location).to_pyarrow_table()
    return sorted(table.to_pylist(), key=lambda r: tuple(str(v) for v in r.values()))


@pytest.fixture(scope="session")
def kafka():
    """One Kafka broker (KRaft) on loopback for the test run, stopped by its pid at the end."""
    from medallion_cli.testing import kafka_broker

    broker = kafka_broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def hive_metastore(s3):
    """One Hive Metastore service on PostgreSQL, on loopback, for the test run (both stopped
    by their pids at the end), reaching the suite's S3 server too (it opens each table's
    folder); tests register under schemas of their own."""
    from medallion_cli.testing import hive_metastore

    metastore = hive_metastore.start(s3_env=s3.aws_env())
    yield metastore
    metastore.stop()


@pytest.fixture(scope="session")
def trino(hive_metastore, s3):
    """One Trino (its Delta Lake connector, the `delta` catalog) over the suite's metastore and
    S3 server, on loopback, for the test run; None where no Java 24+ is (Trino 476 needs it:
    MEDALLION_TRINO_JAVA_HOME, or a JDK in /usr/lib/jvm), and the test says so."""
    from medallion_cli.testing import trino as trino_server

    server = trino_server.start(hive_metastore.uri, s3.aws_env())
    yield server
    if server is not None:
        server.stop()


@pytest.fixture(scope="session")
def s3():
    """One S3 server (moto's) on loopback for the test run, stopped by its pid at the end;
    tests make buckets of their own in it."""
    from medallion_cli.testing import s3_server

    server = s3_server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def spark_connect():
    """One Spark Connect server with Delta Lake on loopback for the test run (a local driver
    with Spark's Connect plugin and Delta's JARs; its Python workers, which run streaming
    micro-batches, on this interpreter), stopped by its pid at the end."""
    pytest.importorskip("grpc", reason="the Spark Connect client: pip install '.[connect]'")
    from medallion_cli.testing import connect_server

    server = connect_server.start()
    yield server
    server.stop()
