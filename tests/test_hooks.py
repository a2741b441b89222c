"""Hooks, as dbt's: pre_hook / post_hook SQL around a model, on-run-start / on-run-end around
a build; rendered like the model (ref, this, var), run by Spark; a failure says which hook and
what had been written."""

import pytest
from conftest import read_delta

from medallion_cli import commands
from medallion_cli.core.errors import MedallionError, ProjectError

PROJECT = """\
name: hooks
profile: test
on-run-start:
  - "select assert_true({{ var('open', true) }}, 'builds are paused')"
on-run-end:
  - "select assert_true(count(*) = 2, 'orders lost') from {{ ref('orders') }}"
"""
FILES = {
    "seeds/raw.csv": "id,amount\n1,10\n2,-5\n",
    "models/silver/orders.sql": """\
        {{ config(pre_hook="select assert_true(count(*) > 0, 'no input') from {{ ref('raw') }}",
                  post_hook=["select assert_true(count(*) = 2, 'rows lost') from {{ this }}",
                             "select assert_true(min(amount) > 0, 'a negative amount') "
                             "from {{ this }}"]) }}
        select * from {{ ref('raw') }}
    """,
    "models/gold/total.sql": "select sum(amount) as total from {{ ref('orders') }}",
}


@pytest.mark.one_engine("hooks are rendered and run as Spark SQL the same way on both; the "
                        "outcomes are the runner's")
def test_hooks_run_around_models_and_the_build_and_say_what_failed(project, build):
    root = project(FILES, project_yml=PROJECT)
    results = build(root)
    assert [(r.name, r.kind, r.status) for r in results.values() if r.kind == "hook"] == [
        ("on-run-start 1", "hook", "success"), ("on-run-end 1", "hook", "success")]
    orders = results["orders"]
    # the post hook checks the table as written: it fails, the table stays, downstream waits
    assert orders.status == "error"
    assert ("models/silver/orders.sql: post_hook 2 failed after the table was written "
            "(version 0): ") in orders.message
    assert "a negative amount" in orders.message and "\tat " not in orders.message
    assert len(read_delta(root / "warehouse/silver/orders")) == 2
    assert results["total"].status == "skipped"

    # a failing on-run-start builds nothing (its nodes skipped, for `retry`); on-run-end runs
    again = build(root, vars={"open": False})
    assert [(r.name, r.status) for r in again.values()] == [
        ("on-run-start 1", "error"), ("raw", "skipped"), ("orders", "skipped"),
        ("total", "skipped"), ("on-run-end 1", "success")]
    assert "builds are paused" in again["on-run-start 1"].message
    assert again["raw"].message == "on-run-start 1 failed"
    assert not (root / "warehouse/gold/total").exists()


@pytest.mark.one_engine("the pre_hook fails before anything is written; YAML read at load")
def test_a_failing_pre_hook_writes_nothing_and_yaml_takes_dbts_spelling(project, build):
    root = project({**FILES, "models/gold/total.sql": "select 1 as one",
                    "models/props.yml": """\
                        models:
                          - name: total
                            config:
                              pre-hook: "select assert_true(false, 'gold is frozen')"
                    """})
    results = build(root)
    assert results["total"].status == "error"
    assert "pre_hook 1 failed (nothing was written): " in results["total"].message
    assert "gold is frozen" in results["total"].message
    assert not (root / "warehouse/gold/total").exists()


@pytest.mark.parametrize("engine_name", ["embedded"])  # refused when the project is read
def test_hooks_that_are_not_sql_are_refused(project, build, engine_name):
    root = project({"models/one.sql": "{{ config(post_hook=3) }} select 1 as x"})
    with pytest.raises(MedallionError, match="config 'post_hook' must be SQL statements"):
        build(root)


@pytest.mark.unit
def test_the_project_file_keeps_jinja_for_hooks_only(project):
    root = project({"models/one.sql": "select 1 as x"},
                   project_yml="name: p\nprofile: test\nvars:\n  day: \"{{ ref('one') }}\"\n")
    with pytest.raises(ProjectError, match=r"cannot render vars.day: \{\{ ref\('one'\) \}\}: "
                                           "only env_var\\(\\) is known in this file"):
        commands.list_nodes(commands.Invocation(project_dir=str(root)))
