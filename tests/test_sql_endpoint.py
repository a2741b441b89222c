"""`medallion serve --sql` (issue 90): Spark's Thrift server in the served JVM, so that SQL
clients (PyHive, beeline over JDBC, dbt-spark's thrift method, BI tools) query the built tables
by their catalog names and each query reads the latest build. It is delta-spark's (the embedded
engine's Spark has no Delta catalog), needs a metastore for the names, and beyond loopback a
password (MEDALLION_SQL_PASSWORD); the tests bind loopback only."""

import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import venv
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import profile_for
from helpers import medallion
from test_catalog import with_metastore, with_reader

from medallion_cli.cli import main
from medallion_cli.spark.sql_endpoint import PASSWORD_ENV, jdbc_url
from medallion_cli.testing.loopback import LOOPBACK, free_port

FILES = {
    "seeds/orders.csv": "id,amount\n1,10\n2,20\n3,30\n",
    "models/silver/clean_orders.sql": """\
        {{ config(schema='sales', alias='orders') }}
        select id, amount * 2 as amount from {{ ref('orders') }}
    """,
    "models/gold/big_orders.sql": """\
        {{ config(materialized='view') }}
        select id, amount from {{ ref('clean_orders') }} where amount > 25
    """,
}


def listening(port: int, server: subprocess.Popen, seconds: float = 240) -> None:
    """Wait until the endpoint answers; the server's output if it ended first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"medallion serve ended ({server.returncode}): {server.stdout.read()}")
        try:
            socket.create_connection((LOOPBACK, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"nothing listened on {LOOPBACK}:{port} in {seconds} s")


# dbt and its Spark adapter, pinned; in a venv of their own, as their protobuf and thrift pins
# are older than pyspark's Connect client's and pymetastore's
DBT = ("dbt-core==1.10.23", "dbt-spark[PyHive]==1.10.3")


@pytest.fixture(scope="session")
def dbt() -> Path:
    """The dbt command, from a venv made once from the package index (as Medallion's JARs
    come from Maven) and kept in ~/.cache/medallion/tools."""
    pins = hashlib.sha256(" ".join(DBT).encode()).hexdigest()[:10]
    folder = Path.home() / ".cache/medallion/tools" / f"dbt-{pins}"
    made = folder / "made"
    if not made.exists():
        shutil.rmtree(folder, ignore_errors=True)  # an install that did not finish
        venv.create(folder, with_pip=True)
        subprocess.run([str(folder / "bin/python"), "-m", "pip", "install", "-q", *DBT],
                       check=True, timeout=900)
        made.touch()
    return folder / "bin/dbt"


def dbt_project(folder: Path, port: int) -> Path:
    """A dbt project whose model reads Medallion's gold view through the endpoint, with
    dbt-spark's thrift method and the endpoint's password, from the environment."""
    files = {
        "dbt_project.yml": "name: reports\nversion: '1.0'\nprofile: endpoint\n",
        "profiles.yml": f"""\
            endpoint:
              target: dev
              outputs:
                dev: {{type: spark, method: thrift, host: {LOOPBACK}, port: {port},
                       schema: reports, auth: CUSTOM, user: analyst,
                       password: "{{{{ env_var('{PASSWORD_ENV}') }}}}"}}
        """,
        "models/big_spenders.sql": """\
            {{ config(materialized='table', file_format='delta') }}
            select id, amount from gold.big_orders where amount > 50
        """,
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(textwrap.dedent(text))
    return folder


def rows(cursor, sql: str) -> list[tuple]:
    cursor.execute(sql)
    return cursor.fetchall()


PASSWORD = "correct-horse-battery-staple"  # no spaces: beeline splits a password at them


@pytest.mark.slow("a served JVM of its own per case, a beeline JVM and dbt; the default tier "
                  "serves builds (test_serve.py) and registers tables by name (test_catalog.py)")
@pytest.mark.parametrize("password, engine_name, store", [
    (None, "embedded", "s3"),  # served by a delta-spark target on the same metastore
    (PASSWORD, "delta-spark", "local"),  # the served Spark builds too (Derby: one JVM)
], ids=["no-password-embedded-s3-hms", "password-delta-spark-local-derby"])
def test_sql_clients_read_the_built_tables_by_name_and_each_new_build(
        project, engine_name, store, password, dbt, tmp_path, monkeypatch, request):
    """Without MEDALLION_SQL_PASSWORD, on loopback, any client is let in; with it, only those
    that give it (PyHive, beeline and dbt-spark with a user name and the password). The first
    case's tables are the embedded engine's, on S3, registered in the Hive Metastore service
    (on PostgreSQL) that the endpoint's delta-spark target reads them through."""
    from pyhive import hive
    from thrift.transport.TTransport import TTransportException

    if password:
        monkeypatch.setenv(PASSWORD_ENV, password)  # serve's, as its user would set it
    else:
        monkeypatch.delenv(PASSWORD_ENV, raising=False)
    login = ({"auth": "CUSTOM", "username": "analyst", "password": password} if password
             else {"auth": "NOSASL"})
    if engine_name == "embedded":
        metastore = request.getfixturevalue("hive_metastore").uri
        root = project(FILES)
        profile = root / "profiles/profiles.yml"
        profile.write_text(with_reader(re.sub(r"(\n +warehouse: .*\n)",
                                              rf"\1      metastore: {metastore}\n",
                                              profile.read_text(), count=1)))
        served = ("-t", "reader")  # builds run apart, on the embedded engine
    else:
        root = project(FILES, profile=with_metastore(engine_name))
        served = ()  # builds run on the server: its JVM holds the Derby metastore
    port = free_port()
    server = medallion(root, "serve", "--sql", "--sql-port", str(port), *served, wait=False)
    try:
        listening(port, server)
        built = medallion(root, "build")
        assert built.returncode == 0, built.stdout + built.stderr
        with closing(hive.connect(LOOPBACK, port=port, **login)) as connection:
            cursor = connection.cursor()
            assert rows(cursor, "select sum(amount), count(*) from sales.orders") == [(120, 3)]
            assert rows(cursor, "select id from gold.big_orders order by id") == [(2,), (3,)]
            (root / "seeds/orders.csv").write_text("id,amount\n1,10\n2,20\n3,30\n4,40\n")
            rebuilt = medallion(root, "build")
            assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
            # the same session, after the build's commit: the new version
            assert rows(cursor, "select sum(amount), count(*) from sales.orders") == [(200, 4)]
        if password:
            with pytest.raises(TTransportException, match="Error validating the login"):
                hive.connect(LOOPBACK, port=port, auth="CUSTOM", username="analyst",
                             password="not it")
        beeline = Path(sys.executable).parent.parent / "lib"
        beeline = next(beeline.glob("python3*/site-packages/pyspark/bin/beeline"))
        secret = tmp_path / "password"  # beeline's -w: not on its command line, which ps shows
        secret.write_text(password or "")
        jdbc = subprocess.run(
            [str(beeline), "-u", jdbc_url(port), "-n", "analyst",
             *(["-w", str(secret)] * bool(password)), "--silent=true", "--outputformat=csv2",
             "-e", "select id, amount from gold.big_orders order by id"],
            capture_output=True, text=True, timeout=180)
        assert jdbc.returncode == 0, jdbc.stdout + jdbc.stderr
        lines = [line for line in jdbc.stdout.splitlines() if line.strip()]
        assert lines[0].endswith("> id,amount") and lines[1:] == ["2,40", "3,60", "4,80"]
        if not password:
            return

        # dbt on the endpoint: a dbt model over Medallion's gold view, written by dbt-spark
        reports = dbt_project(tmp_path / "reports", port)
        ran = subprocess.run([str(dbt), "run", "--project-dir", str(reports), "--profiles-dir",
                              str(reports)], capture_output=True, text=True, timeout=600,
                             env={**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"})
        assert ran.returncode == 0, ran.stdout + ran.stderr
        with closing(hive.connect(LOOPBACK, port=port, **login)) as connection:
            assert rows(connection.cursor(), "select * from reports.big_spenders order by id"
                        ) == [(3, 60), (4, 80)]
    finally:
        stopped = medallion(root, "serve", "--stop", *served)
        assert server.wait(timeout=120) == 0, stopped.stdout + server.stdout.read()
        said = server.stdout.read()
        asks = f"the password in {PASSWORD_ENV}" if password else "no password"
        assert f"SQL endpoint: {jdbc_url(port)} (any user name, {asks})" in said, said
        assert password is None or password not in said + (root / "target/spark.log").read_text()


@pytest.mark.unit
@pytest.mark.parametrize("engine_name, metastore, problem", [
    ("embedded", "thrift://127.0.0.1:9083",
     "serve --sql answers in the target's Spark, and the embedded engine's Spark has no Delta "
     "catalog"),
    ("delta-spark", None, "target 'local' has no metastore: SQL clients would find no table"),
])
def test_serve_sql_without_names_to_serve_says_so_before_spark_starts(
        project, engine_name, metastore, problem):
    profile = with_metastore(engine_name, metastore) if metastore else profile_for(engine_name)
    root = project({"seeds/orders.csv": "id\n1\n"}, profile=profile)
    result = CliRunner().invoke(main, ["serve", "--sql", "--project-dir", str(root)])
    assert result.exit_code == 2, result.output
    assert problem in result.stderr and "profiles.yml" in result.stderr
    assert not (root / "target/serve.json").exists()


@pytest.mark.unit
def test_serve_sql_on_a_port_in_use_says_so_before_spark_starts(project):
    root = project({"seeds/orders.csv": "id\n1\n"}, profile=with_metastore("delta-spark"))
    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(main, ["serve", "--sql", "--sql-port", str(port),
                                           "--project-dir", str(root)])
    assert result.exit_code == 2, result.output
    assert f"--sql-port {port}: {LOOPBACK}:{port} is in use" in result.stderr
    assert "hint: give another port with --sql-port" in result.stderr


@pytest.mark.unit
def test_a_driver_serving_sql_has_its_jars_on_the_jvms_class_path_too(monkeypatch):
    from medallion_cli.spark.sql_endpoint import endpoint_conf, serving_driver_conf

    monkeypatch.delenv(PASSWORD_ENV, raising=False)

    plain = {"spark.jars": "/j/delta.jar,/j/storage.jar"}
    assert serving_driver_conf(plain) == plain  # no endpoint: Spark's own loader suffices
    serving = {**plain, **endpoint_conf(10001), "spark.jars": "/j/delta.jar,s3a://b/x.jar",
               "spark.driver.extraClassPath": "/own"}
    assert serving_driver_conf(serving)["spark.driver.extraClassPath"] == "/j/delta.jar:/own"


@pytest.mark.unit
@pytest.mark.parametrize("host, password, problem", [
    ("0.0.0.0", None, f"--sql-host 0.0.0.0 lets other machines query every table, and "
                      f"{PASSWORD_ENV} is not set for the endpoint to ask them for"),
    ("192.0.2.1", "set", "--sql-host 192.0.2.1: cannot listen there"),  # not this machine's
])
def test_serve_sql_beyond_loopback_needs_a_password_and_an_address_of_this_machine(
        project, monkeypatch, host, password, problem):
    if password:
        monkeypatch.setenv(PASSWORD_ENV, password)
    else:
        monkeypatch.delenv(PASSWORD_ENV, raising=False)
    root = project({"seeds/orders.csv": "id\n1\n"}, profile=with_metastore("delta-spark"))
    result = CliRunner().invoke(main, ["serve", "--sql", "--sql-host", host,
                                       "--project-dir", str(root)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"Error: {problem}"), result.stderr
    assert len(result.stderr.splitlines()) == 2  # the error and its hint
    assert not (root / "target/serve.json").exists()


def test_with_a_password_the_endpoint_checks_it_with_a_class_compiled_once(monkeypatch,
                                                                           tmp_path):
    """Not the unit tier: javac compiles the check (once per source and Spark)."""
    import zipfile

    from medallion_cli.spark.sql_endpoint import (
        CHECK_CLASS,
        endpoint_conf,
        serving_driver_conf,
    )

    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    monkeypatch.setenv("MEDALLION_JARS_DIR", str(tmp_path / "jars"))
    conf = endpoint_conf(10001, "127.0.0.1", "/own")
    assert conf["spark.hadoop.hive.server2.authentication"] == "CUSTOM"
    assert conf["spark.hadoop.hive.server2.custom.authentication.class"] == CHECK_CLASS
    check, own = conf["spark.driver.extraClassPath"].split(os.pathsep)
    assert own == "/own" and Path(check).parent.parent == tmp_path / "jars"
    assert zipfile.ZipFile(check).namelist() == ["io/medallion/sql/PasswordAuthentication.class"]
    compiled_at = Path(check).stat().st_mtime_ns
    assert endpoint_conf(10001)["spark.driver.extraClassPath"] == check  # not compiled again
    assert Path(check).stat().st_mtime_ns == compiled_at
    served = serving_driver_conf({**conf, "spark.jars": "/j/delta.jar",
                                  "spark.driver.extraJavaOptions": "-Xss4m"})
    assert served["spark.driver.extraClassPath"] == os.pathsep.join(["/j/delta.jar", check,
                                                                     "/own"])
    # Hive's CUSTOM provider reads a HiveConf of its own: system properties, not Spark's conf
    assert served["spark.driver.extraJavaOptions"] == (
        f"-Xss4m -Dhive.server2.custom.authentication.class={CHECK_CLASS}")
    assert PASSWORD not in str(conf)  # the JVM reads it from its environment
