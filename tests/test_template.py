"""The cookiecutter template: generated projects build and test green, as generated."""

import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import read_delta
from cookiecutter.main import cookiecutter

from medallion_cli import commands
from medallion_cli.cli.group import main

ROOT = Path(__file__).resolve().parent.parent


def assert_portable(project: Path):
    """The runner pinned so a teammate's machine installs the same with only the package
    registries: a remote git repository at a commit, or the package's version, from the wheel
    in the project's wheels/ when there is one (pip finds it there with no index at all); never
    a path on the machine that generated the project."""
    text = (project / "requirements.txt").read_text()
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    pinned = f"medallion-cli[dev]=={metadata.version('medallion-cli')}"
    assert lines == [pinned] or lines == ["--find-links ./wheels", pinned] or (
        len(lines) == 1 and re.fullmatch(
            r"medallion-cli\[dev\] @ git\+(https|ssh)://\S+@[0-9a-f]{40}", lines[0])), text
    assert "file:" not in text and str(ROOT) not in text and str(project) not in text
    if "--find-links ./wheels" in lines:
        fetched = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                                  "--no-index", "-d", str(project.parent / "fetched"), "-r",
                                  "requirements.txt"], cwd=project, capture_output=True,
                                 text=True)
        assert fetched.returncode == 0, fetched.stderr
        assert [p.name for p in (project.parent / "fetched").iterdir()] == [
            p.name for p in (project / "wheels").glob("medallion_cli-*.whl")]


def build_and_test(project: Path, target: str | None = None):
    inv = commands.Invocation(project_dir=str(project), target=target)
    built = {r.name: r.status for r in commands.build(inv, "build")}
    tested = {r.name: r.status for r in commands.test(inv)}
    return built, tested


@pytest.mark.slow("the default tier builds a generated project (test_init_with_custom_values); "
                  "this adds its delta-spark build")
def test_no_input_project_builds_and_tests_green(tmp_path, spark, monkeypatch):
    monkeypatch.delenv("MEDALLION_WAREHOUSE", raising=False)
    project = Path(cookiecutter(str(ROOT), no_input=True, output_dir=str(tmp_path)))
    delta_built, delta_tested = build_and_test(project, "local-delta")  # the delta-spark engine
    assert set(delta_built.values()) == {"success"} and set(delta_tested.values()) == {"success"}
    assert len(read_delta(project / "warehouse-delta/gold/gold_daily_revenue")) == 4
    assert project.name == "my_lakehouse"
    assert_portable(project)  # the package, not a copy
    assert not (project / "medallion_cli").exists()
    assert "name: my_lakehouse" in (project / "medallion_project.yml").read_text()
    built, tested = build_and_test(project)
    assert set(built.values()) == {"success"} and set(tested.values()) == {"success"}
    revenue = read_delta(project / "warehouse/gold/gold_daily_revenue")
    assert sum(r["orders"] for r in revenue) == 6
    funnel = read_delta(project / "warehouse/gold/gold_funnel_conversion")
    assert [r["purchased"] for r in funnel] == [2, 2]
    # (The project's own pytest, with medallion's fixtures, runs in .ci/run, where the project
    # is made from an installed wheel and set up by its README's command, as a user's is.)


def test_init_with_custom_values(tmp_path, spark):
    warehouse = tmp_path / "lake"
    result = CliRunner().invoke(main, ["init", "Acme Sales", "--output-dir", str(tmp_path),
                                       "--no-input"])
    assert result.exit_code == 0, result.output
    project = tmp_path / "acme_sales"
    assert "acme_sales:" in (project / "profiles/profiles.yml").read_text()
    # custom answers, given the way cookiecutter takes them from the API
    custom = Path(cookiecutter(str(ROOT), no_input=True, output_dir=str(tmp_path / "custom"),
                               extra_context={"project_name": "Ops Lake",
                                              "warehouse_path": str(warehouse),
                                              "spark_master": "local[2]",
                                              "trigger_interval": "5 seconds"}))
    text = (custom / "profiles/profiles.yml").read_text()
    assert f"'{warehouse}'" in text and "'local[2]'" in text
    assert 'trigger: "5 seconds"' in (custom / "medallion_project.yml").read_text()
    built, tested = build_and_test(custom)
    assert set(built.values()) == {"success"} and set(tested.values()) == {"success"}
    assert len(read_delta(warehouse / "gold/gold_customer_value")) == 5


@pytest.mark.unit
def test_project_without_examples_is_empty_but_valid(tmp_path):
    project = Path(cookiecutter(str(ROOT), no_input=True, output_dir=str(tmp_path),
                                extra_context={"include_examples": "no"}))
    assert not list((project / "models").glob("**/*.sql"))
    assert commands.list_nodes(commands.Invocation(project_dir=str(project))) == []
    assert (project / "README.md").read_text().startswith("# My Lakehouse")


@pytest.mark.unit
def test_init_leaves_nothing_in_the_temporary_folder(tmp_path, monkeypatch):
    import tempfile

    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    result = CliRunner().invoke(main, ["init", "Acme", "--output-dir", str(tmp_path / "out"),
                                       "--no-input"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out/acme/models/silver/silver_orders.sql").is_file()
    assert list(temporary.iterdir()) == []  # (cookiecutter leaves a copy of each hook)
    assert tempfile.tempdir == str(temporary)


@pytest.mark.unit
def test_init_with_no_terminal_takes_the_defaults_and_asks_nothing(tmp_path):
    """The README's `medallion init "My Lakehouse" --output-dir DIR` from a script or CI (no
    terminal): the project is made with the template's defaults, not `Aborted!`."""
    result = CliRunner().invoke(main, ["init", "My Lakehouse", "--output-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "Aborted" not in result.output and "[My Lakehouse]" not in result.output
    assert "my_lakehouse:" in (tmp_path / "my_lakehouse/profiles/profiles.yml").read_text()
    readme = (tmp_path / "my_lakehouse/README.md").read_text()
    assert ".venv/bin/python -m pytest" in readme and "tests/test_sample_models.py" in readme


@pytest.mark.unit
def test_projects_made_from_an_unchanged_clone_share_one_wheel_built_once(tmp_path,
                                                                         monkeypatch):
    """From a clone (this checkout, installed editable), the project's wheel is built once and
    kept in the user's cache by a hash of the clone's files; the next project takes it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for name in ("First", "Second"):
        result = CliRunner().invoke(main, ["init", name, "--output-dir", str(tmp_path)])
        assert result.exit_code == 0, result.output
    [kept] = (tmp_path / "cache/medallion/wheels").iterdir()
    [wheel] = kept.glob("medallion_cli-*.whl")
    built_at = wheel.stat().st_mtime_ns
    for project in ("first", "second"):
        assert (tmp_path / project / "wheels" / wheel.name).read_bytes() == wheel.read_bytes()
    assert wheel.stat().st_mtime_ns == built_at


@pytest.mark.unit
def test_init_asks_the_templates_other_questions_and_not_the_name_it_was_given(tmp_path):
    asked = []

    def ask(key, question, default, choices):
        asked.append(key)
        return {"spark_master": "local[2]", "include_examples": "no"}.get(key, default)

    made = commands.init("Ops Lake", output_dir=str(tmp_path), ask=ask)
    assert made == tmp_path / "ops_lake"
    assert asked == ["description", "author", "warehouse_path", "trigger_interval",
                     "spark_master", "cluster_master", "connect_url",
                     "hive_metastore", "include_examples"]  # the template's order, no name
    assert "'local[2]'" in (made / "profiles/profiles.yml").read_text()
    assert not list((made / "models").glob("**/*.sql"))
    readme = (made / "README.md").read_text()
    assert readme.startswith("# Ops Lake") and "test_sample_models" not in readme  # no examples


@pytest.mark.unit
def test_a_new_project_has_a_target_for_each_place_it_runs(tmp_path, monkeypatch):
    """local, local-delta, s3, s3-embedded, cluster, connect and hive: each loads as the
    answers given at init made it (the MEDALLION_* variables unset)."""
    from medallion_cli.load.project import load_project

    for variable in [v for v in os.environ if v.startswith("MEDALLION_")]:
        monkeypatch.delenv(variable)
    made = commands.init("Ops Lake", output_dir=str(tmp_path), no_input=True, extra={
        "object_store_warehouse": "s3://ops-bucket/lake", "cluster_master": "spark://m:7077",
        "connect_url": "sc://spark.internal:15002", "hive_metastore": "thrift://hms:9083"})
    targets = {name: load_project(made, target=name).target for name in (
        "local", "local-delta", "s3", "s3-embedded", "cluster", "connect", "hive")}
    assert {n: t.engine for n, t in targets.items()} == {
        "local": "embedded", "local-delta": "delta-spark", "s3": "delta-spark",
        "s3-embedded": "embedded", "cluster": "delta-spark", "connect": "delta-spark",
        "hive": "embedded"}
    assert {targets[n].warehouse for n in ("s3", "s3-embedded", "cluster")} == {
        "s3://ops-bucket/lake"}
    assert targets["cluster"].spark_master == "spark://m:7077"
    assert targets["connect"].spark_remote == "sc://spark.internal:15002"
    assert targets["hive"].metastore == "thrift://hms:9083"
    assert targets["hive"].warehouse == targets["local"].warehouse == str(made / "warehouse")


@pytest.mark.unit
def test_init_outside_a_template_says_how_to_fix(tmp_path):
    result = CliRunner().invoke(main, ["init", "x", "--template", str(tmp_path / "nowhere"),
                                       "--output-dir", str(tmp_path), "--no-input"])
    assert result.exit_code == 2 and "cannot create the project" in result.output


def test_cookiecutter_cli_with_a_relative_template_path(tmp_path):
    """`cookiecutter .` from the repository: the hook finds the examples and this package."""
    out = subprocess.run([str(Path(sys.executable).parent / "cookiecutter"), "--no-input",
                          "--output-dir", str(tmp_path), "."], cwd=ROOT, capture_output=True,
                         text=True, env={**os.environ, "PWD": str(ROOT)})
    assert out.returncode == 0, out.stderr
    project = tmp_path / "my_lakehouse"
    assert (project / "models/silver/silver_orders.sql").is_file()
    assert_portable(project)


def test_init_from_an_installed_wheel_ships_the_template_and_the_wheel(tmp_path):
    """`medallion init` from a wheel (no repository beside it): the template and the examples
    come from inside the package; the project names the package by version and carries the
    wheel it was installed from, not a path."""
    source = tmp_path / "source"
    tracked = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    for rel in tracked:
        if (ROOT / rel).is_file():
            (source / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, source / rel)
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "-w", str(wheels), str(source)], check=True, capture_output=True)
    installed = tmp_path / "site"
    wheel = next(wheels.glob("medallion_cli-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(installed), str(wheel)], check=True, capture_output=True)
    assert (installed / "medallion_cli/template/models/silver/silver_orders.sql").is_file()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(installed), "PWD": str(elsewhere)}
    run = subprocess.run([sys.executable, "-c", "import medallion_cli.cli as c; print(c.__file__); "
                          "c.main()", "init", "Team Lake", "--no-input"],
                         cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith(str(installed))  # the wheel's package, not this checkout's
    project = elsewhere / "team_lake"
    # pip recorded the wheel file it installed from: the project gets that wheel
    assert (project / "wheels" / wheel.name).read_bytes() == wheel.read_bytes()
    assert_portable(project)
    for rel in ("models/silver/silver_orders.sql", "seeds/products.csv", "README.md",
                "tests/test_sample_models.py", "profiles/profiles.yml", ".gitignore"):
        assert (project / rel).is_file(), rel
    assert commands.list_nodes(commands.Invocation(project_dir=str(project)))
    # a wheel since deleted, as from an index: the version alone, for the index to serve
    wheel.unlink()
    again = subprocess.run([sys.executable, "-c", "import medallion_cli.cli as c; c.main()",
                            "init", "Other Lake", "--no-input"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert (elsewhere / "other_lake/requirements.txt").read_text() == "medallion-cli[dev]==" + (
        metadata.version("medallion-cli") + "\n")
    assert not (elsewhere / "other_lake/wheels").exists()


@pytest.mark.unit
@pytest.mark.parametrize("made", ["sample", "generated"])
def test_streaming_tables_are_compacted_past_50_files_as_delta_auto_compacts(tmp_path, made):
    """A watch lands a file or more per batch into each streaming table, and every scan of it
    opens each (a test pass over a 20k-row table: 470 ms with 1 file, 930 ms with 401): the
    sample and a new project compact them after a batch past Delta's own threshold."""
    root = ROOT if made == "sample" else Path(cookiecutter(
        str(ROOT), no_input=True, output_dir=str(tmp_path)))
    graph = commands.invocation.load(commands.Invocation(project_dir=str(root))).graph
    limits = {name: (node.config.materialized, node.config.optimize_after_files)
              for name, node in graph.nodes.items() if node.file.kind == "model"}
    assert limits["silver_orders"] == ("streaming", 50)
    assert {limit for kind, limit in limits.values() if kind == "streaming"} == {50}
    assert {limit for kind, limit in limits.values() if kind != "streaming"} == {None}
