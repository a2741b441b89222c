"""The command line: commands, exit codes, error output, and no JVM for compile and ls."""

import json
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import PROJECT as PROJECT_YML

from medallion_cli import commands
from medallion_cli.cli.group import main


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.unit
def test_help_lists_every_command():
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("build", "run", "compile", "ls", "seed", "test"):
        assert command in result.output
    build_help = invoke("build", "--help").output
    for option in ("--project-dir", "--profiles-dir", "--target", "--select", "--exclude",
                   "--full-refresh", "--vars", "--threads"):
        assert option in build_help


@pytest.mark.unit
def test_ls_and_compile(project):
    root = project({"models/bronze/a.sql": "select 1 as id",
                    "models/gold/b.sql": "{{ config(materialized='view') }}"
                                         "select id from {{ ref('a') }}"})
    listing = invoke("ls", "--project-dir", root)
    assert listing.exit_code == 0
    lines = listing.output.splitlines()
    assert lines[0].split()[:4] == ["a", "model", "bronze", "table"]
    assert lines[1].split() == ["b", "model", "gold", "view", "<-", "a"]
    (root / "models/bronze/s.sql").write_text("{{ config(materialized='streaming') }}"
                                              "select * from {{ ref('a') }}")
    lines = invoke("ls", "--project-dir", root).output.splitlines()
    assert lines[lines.index(next(l for l in lines if l.startswith("s "))) + 1].split() == [
        "checkpoint:", str(root / "warehouse/_checkpoints/bronze/s")]
    # Compiled SQL names the real table, so it runs in spark-sql as it is.
    compiled = invoke("compile", "--project-dir", root, "-s", "b")
    real = f"select id from delta.`{root / 'warehouse/bronze/a'}`"
    assert compiled.exit_code == 0 and real in compiled.output
    assert (root / "target/compiled/models/gold/b.sql").read_text() == real


@pytest.mark.unit
def test_several_values_after_one_select_flag(project):
    """dbt's `-s a b c`: every value up to the next option is a selector."""
    root = project({f"models/{name}.sql": "select 1 as id" for name in ("a", "b", "c", "d")})

    def listed(*args):
        result = invoke("ls", *args, "--project-dir", root)
        assert result.exit_code == 0, result.output
        return [line.split()[0] for line in result.output.splitlines()]

    assert listed("-s", "a", "b", "c", "--exclude", "b", "d") == ["a", "c"]
    assert listed("--select=a", "d") == ["a", "d"]
    assert listed("-s", "a", "-s", "b") == ["a", "b"]
    assert listed("-s", "a,b") == []  # `,` intersects: no node is both a and b


@pytest.mark.unit
def test_state_modified_selects_what_changed_since_an_earlier_manifest(project):
    root = project({"models/a.sql": "select 1 as id",
                    "models/b.sql": "select id from {{ ref('a') }}",
                    "models/c.sql": "select id from {{ ref('b') }}",
                    "models/d.sql": "select {{ four() }} as id",
                    "macros/m.sql": "{% macro four() %}4{% endmacro %}"})
    assert invoke("ls", "--project-dir", root).exit_code == 0
    shutil.copytree(root / "target", root / "prod")  # the deployed run's artifacts
    (root / "models/b.sql").write_text("select id + 1 as id from {{ ref('a') }}")
    (root / "macros/m.sql").write_text("{% macro four() %}4.0{% endmacro %}")  # d's SQL changes
    (root / "models/e.sql").write_text("select 5 as id")

    def listed(*selectors):
        result = invoke("ls", "--project-dir", root, "--state", root / "prod", "-s", *selectors)
        assert result.exit_code == 0, result.output
        return [line.split()[0] for line in result.output.splitlines()]

    assert listed("state:modified") == ["d", "e", "b"]  # in DAG order: macro, new, edited
    assert listed("state:new") == ["e"]
    assert listed("state:modified+", "--exclude", "d") == ["e", "b", "c"]
    unchanged = invoke("ls", "--project-dir", root, "-s", "state:modified")
    assert unchanged.exit_code == 2 and "pass --state" in unchanged.output
    missing = invoke("ls", "--project-dir", root, "--state", root / "nowhere", "-s", "a")
    assert missing.exit_code == 2 and "no manifest.json there" in missing.output


def test_debug_checks_the_machine_profile_and_project_without_building(project, spark,
                                                                         engine_name):
    root = project({"models/a.sql": "select 1 as id"})
    result = invoke("debug", "--project-dir", root)
    assert result.exit_code == 0, result.output
    checks = {line.split()[1]: line for line in result.output.splitlines()}
    assert list(checks) == ["python", "java", "project", "profile", "jars", "warehouse", "spark"]
    assert all(line.startswith("OK") for line in checks.values())
    assert f"{engine_name} engine" in checks["spark"]
    assert ("delta-spark" in checks["jars"]) == (engine_name == "delta-spark")
    assert not (root / "warehouse").exists()  # nothing built


def test_debug_names_what_is_wrong(project, tmp_path):
    root = project({"models/a.sql": "select 1 as id"})
    (root / "profiles/profiles.yml").write_text(
        "test:\n  target: cluster\n  outputs:\n    cluster:\n      engine: delta-spark\n"
        f"      warehouse: warehouse\n      delta_jars: {tmp_path}\n")
    result = invoke("debug", "--project-dir", root)
    assert result.exit_code == 1
    failed = [line for line in result.output.splitlines() if line.startswith("FAIL")]
    assert failed[0].split()[1] == "jars" and "has no .jar files" in failed[0]
    (root / "medallion_project.yml").write_text("name: x\nprofile: nope\n")
    broken = invoke("debug", "--project-dir", root)
    assert broken.exit_code == 1 and "FAIL project" in broken.output
    assert "profile 'nope'" in broken.output and "OK   spark" not in broken.output


@pytest.mark.unit
def test_clean_removes_clean_targets_and_keeps_the_warehouse(project):
    root = project({"models/a.sql": "select 1 as id"})
    invoke("compile", "--project-dir", root)
    (root / "warehouse/models/a").mkdir(parents=True)
    result = invoke("clean", "--project-dir", root)
    assert result.exit_code == 0 and result.output == f"Removed {root.resolve() / 'target'}\n"
    assert not (root / "target").exists() and (root / "warehouse/models/a").is_dir()
    (root / "medallion_project.yml").write_text(PROJECT_YML + "clean-targets: [target, ..]\n")
    refused = invoke("clean", "--project-dir", root)
    assert refused.exit_code == 2 and "which is not inside the project" in refused.output


@pytest.mark.unit
def test_compile_ls_and_docs_start_no_jvm(project):
    root = project({"models/a.sql": "select 1 as id"})
    code = ("import sys; from medallion_cli.cli import main\n"
            "for cmd in ('ls', 'compile', 'docs'):\n"
            "    try: main([cmd, '--project-dir', sys.argv[1]])\n"
            "    except SystemExit as e: assert not e.code, e.code\n"
            "print('PYSPARK LOADED' if 'pyspark' in sys.modules else 'NO PYSPARK')\n")
    out = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("NO PYSPARK")


@pytest.mark.unit
def test_the_command_ends_without_pythons_teardown(project):
    """The `medallion` script ends once its exit handlers ran and its output is out, with its
    exit code, without freeing every module's objects (0.15 s of each command's end)."""
    root = project({"models/a.sql": "select * from {{ ref('nope') }}"})
    code = ("import atexit, concurrent.futures, sys; from medallion_cli.cli import run\n"
            "class Teardown:\n"
            "    def __del__(self): print('torn down', flush=True)\n"
            "probe = Teardown()  # freed by Python's teardown alone\n"
            "atexit.register(print, 'exit handlers ran')\n"
            "# a pool left open (as Spark Connect's client leaves one): told to stop at exit\n"
            "pool = concurrent.futures.ThreadPoolExecutor(1)\n"
            "pool.submit(int).result()\n"
            "sys.argv = ['medallion', *sys.argv[1:]]\n"
            "run()\n")
    done = subprocess.run([sys.executable, "-c", code, "--version"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "exit handlers ran"
    assert "medallion, version" in done.stdout and "torn down" not in done.stdout
    failed = subprocess.run([sys.executable, "-c", code, "ls", "--project-dir", str(root)],
                            capture_output=True, text=True, timeout=60)
    assert failed.returncode == 2 and "names no model or seed" in failed.stderr
    assert failed.stdout == "exit handlers ran\n"


@pytest.mark.unit
def test_project_errors_exit_2_without_traceback(project):
    root = project({"models/a.sql": "select * from {{ ref('nope') }}"})
    result = invoke("ls", "--project-dir", root)
    assert result.exit_code == 2
    assert "models/a.sql, line 1: ref('nope') names no model or seed" in result.output
    assert "Traceback" not in result.output
    debug = invoke("ls", "--project-dir", root, "--debug")
    assert debug.exit_code != 0 and debug.exception is not None  # --debug lets it through


@pytest.mark.unit
def test_bad_vars_and_bad_selector_are_usage_errors(project):
    root = project({"models/a.sql": "select 1 as id"})
    assert invoke("ls", "--project-dir", root, "--vars", "[1, 2]").exit_code == 2
    result = invoke("ls", "--project-dir", root, "-s", "aa")
    assert result.exit_code == 2 and "did you mean 'a'" in result.output
    assert invoke("build", "--no-such-flag").exit_code == 2


@pytest.mark.one_engine("exit codes and run_results.json follow the nodes' statuses")
def test_build_exit_codes_and_run_results(project, spark, engine_name):
    root = project({"models/a.sql": "select 1 as id", "seeds/s.csv": "x\n1\n"})
    ok = invoke("build", "--project-dir", root)
    assert ok.exit_code == 0, ok.output
    assert "OK" in ok.output and "Done. 2 success" in ok.output
    results = json.loads((root / "target/run_results.json").read_text())
    assert results["command"] == "build"
    assert {r["name"]: r["status"] for r in results["results"]} == {"a": "success", "s": "success"}
    run_only = invoke("run", "--project-dir", root)
    assert run_only.exit_code == 0 and "seed s" not in run_only.output
    (root / "models/a.sql").write_text("select cast('x' as int) as id")
    failed = invoke("build", "--project-dir", root)
    assert failed.exit_code == 1 and "ERROR" in failed.output


@pytest.mark.unit
def test_an_unforeseen_failure_is_one_line_and_debug_shows_its_traceback(project, monkeypatch):
    root = project({"models/a.sql": "select 1 as id"})

    def broken(*args, **kwargs):
        raise AssertionError("an internal check failed")

    monkeypatch.setattr(commands, "list_nodes", broken)
    result = invoke("ls", "--project-dir", root)
    assert result.exit_code == 1
    assert result.output == ("Error: an internal check failed\n"
                             "  hint: --debug shows the traceback\n")
    debug = invoke("ls", "--project-dir", root, "--debug")
    assert isinstance(debug.exception, AssertionError)


@pytest.mark.unit
def test_ls_and_compile_warn_of_a_landing_folder_that_does_not_exist(project):
    root = project({"models/sources.yml": """\
        sources:
          - name: landing
            path: landing
            tables:
              - {name: orders, format: json, schema: "id int"}
              - {name: customers, format: json, schema: "id int"}
        """, "models/bronze_orders.sql": "select * from {{ source('landing', 'orders') }}",
        "models/bronze_customers.sql": "select * from {{ source('landing', 'customers') }}"})
    (root / "landing/orders").mkdir(parents=True)
    said = (f"warning: models/sources.yml: source 'landing.customers': no files at "
            f"{root}/landing/customers, which bronze_customers reads: land files there or fix "
            "the source's path\n")
    for command in ("ls", "compile"):
        result = CliRunner().invoke(main, [command, "--project-dir", str(root)])
        assert result.exit_code == 0 and result.stderr == said, result.stderr
