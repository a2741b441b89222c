"""Orchestrators run the project (issue 90) with their real packages: Dagster assets from it,
materialized in Dagster's own process (dagster.materialize), a subset as `medallion build -s`;
an Airflow DAG from it, run by `airflow dags test` on a throwaway Airflow home."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from deltalake import DeltaTable

FILES = {
    "seeds/orders.csv": "id,amount\n1,10\n2,20\n3,30\n",
    "models/silver/clean_orders.sql": "select id, amount * 2 as amount from {{ ref('orders') }}",
    "models/gold/big_orders.sql": "select id, amount from {{ ref('clean_orders') }} "
                                  "where amount > 25",
    "models/properties.yml": """\
        models:
          - name: clean_orders
            description: Orders, cleaned
            columns:
              - name: id
                tests: [not_null, unique]
    """,
}


def materialized(result) -> dict:
    return {event.asset_key: {k: v.value for k, v in
                              event.step_materialization_data.materialization.metadata.items()}
            for event in result.get_asset_materialization_events()}


@pytest.mark.one_engine("Dagster runs the build command, which is the same on either engine")
def test_dagster_materializes_the_project_or_a_subset_as_assets_with_checks(project,
                                                                           engine_name):
    import dagster as dg  # here: the unit tier's collection need not import Dagster

    from medallion_cli.integrations.dagster import medallion_assets

    seed, silver, gold = (dg.AssetKey(["seeds", "orders"]),
                          dg.AssetKey(["silver", "clean_orders"]),
                          dg.AssetKey(["gold", "big_orders"]))
    root = project(FILES)
    assets = medallion_assets(str(root))
    assert set(assets.keys) == {seed, silver, gold}
    assert assets.asset_deps[gold] == {silver} and assets.asset_deps[silver] == {seed}
    assert assets.specs_by_key[silver].description == "Orders, cleaned"
    assert assets.specs_by_key[silver].group_name == "silver"
    assert {key.name for key in assets.check_keys} == {"not_null_clean_orders_id",
                                                       "unique_clean_orders_id"}

    # a subset: the seed and silver, with silver's checks; gold is not built
    subset = dg.materialize([assets], selection=[seed, silver])
    assert subset.success
    built = materialized(subset)
    assert set(built) == {seed, silver}
    assert built[silver]["rows written"] == 3 and built[silver]["Delta version"] == 0
    checks = {c.check_name: c.passed for c in subset.get_asset_check_evaluations()}
    assert checks == {"not_null_clean_orders_id": True, "unique_clean_orders_id": True}
    assert not (root / "warehouse/gold/big_orders").exists()

    # all of it, gold broken: the run fails naming it, after the nodes that built (up to
    # date here) are recorded
    (root / "models/gold/big_orders.sql").write_text("select no_such_column from "
                                                     "{{ ref('clean_orders') }}")
    broken = dg.materialize([medallion_assets(str(root))], raise_on_error=False)
    assert not broken.success
    assert set(materialized(broken)) == {seed, silver}
    assert materialized(broken)[silver]["status"] == "up_to_date"
    failure = next(e for e in broken.all_events if e.is_step_failure)
    assert "big_orders" in failure.step_failure_data.error.message
    assert "no_such_column" in failure.step_failure_data.error.message


@pytest.mark.unit
def test_an_orchestrator_gets_the_nodes_in_the_order_they_build_and_each_test_on_its_node(
        project):
    """Dagster refuses a multi-asset's outputs out of topological order (graph.nodes is by
    name: big_orders came before clean_orders)."""
    from medallion_cli import commands
    from medallion_cli.integrations.project_graph import project_graph

    files = {**FILES, "tests/assert_some_orders.sql":
             "select * from {{ ref('big_orders') }} where 1 = 0",
             "tests/assert_two_tables.sql": "select * from {{ ref('orders') }} join "
                                            "{{ ref('big_orders') }} using (id) where 1 = 0"}
    nodes, checks = project_graph(commands.Invocation(project_dir=str(project(files))))
    assert [(n.name, n.layer, n.parents) for n in nodes] == [
        ("orders", "seeds", ()), ("clean_orders", "silver", ("orders",)),
        ("big_orders", "gold", ("clean_orders",))]
    assert sorted((c.name, c.node) for c in checks) == [
        ("assert_some_orders", "big_orders"), ("not_null_clean_orders_id", "clean_orders"),
        ("unique_clean_orders_id", "clean_orders")]  # (the two-table test: no single node)


def upstream(dag) -> dict[str, set[str]]:
    return {task.task_id: set(task.upstream_task_ids) for task in dag.tasks}


# The Airflow tests need no JVM, but importing Airflow costs about 3 s of CPU: they are the
# default tier's, not the unit tier's (which answers in well under a minute).
def test_an_airflow_dag_has_a_task_per_model_or_per_layer_in_the_projects_order(project):
    from medallion_cli.integrations.airflow import medallion_dag

    root = project(FILES)
    per_model = medallion_dag(str(root), "lake", target="local")
    assert upstream(per_model) == {"orders": set(), "clean_orders": {"orders"},
                                   "big_orders": {"clean_orders"}}
    task = per_model.get_task("clean_orders")
    assert task.op_args[1] == ["clean_orders"] and task.retries == 2
    assert task.op_args[2] == ["--project-dir", str(root), "--wait-for-lock", "900",
                               "-t", "local"]
    per_layer = medallion_dag(str(root), "lake_layers", per="layer", retries=0)
    assert upstream(per_layer) == {"seeds": set(), "silver": {"seeds"}, "gold": {"silver"}}
    assert per_layer.get_task("silver").op_args[1] == ["clean_orders"]
    with pytest.raises(ValueError, match="per='table': a task per 'model' or per 'layer'"):
        medallion_dag(str(root), "lake", per="table")


@pytest.mark.parametrize("exit_code, raised, retried", [
    (1, "AirflowFailException", False),  # a model or test failed: the data needs a look
    (2, "AirflowException", True),  # the run did not start (a lock held past the wait)
])
def test_an_airflow_task_fails_for_retries_only_when_the_run_did_not_start(exit_code, raised,
                                                                            retried):
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    from medallion_cli.integrations.airflow import run_build

    fake = [sys.executable, "-c", f"import sys; print(sys.argv[1:]); sys.exit({exit_code})"]
    with pytest.raises(AirflowException) as caught:
        run_build(fake, ["silver_orders"], ["--project-dir", "/p"])
    assert type(caught.value).__name__ == raised
    assert isinstance(caught.value, AirflowFailException) is not retried
    assert "medallion build -s silver_orders" in str(caught.value)


@pytest.mark.slow("Airflow's own runner and a medallion process per task; the DAG's shape and "
                  "the exit codes' meaning are the default tier's (above)")
# each task runs the build command, the same on either engine: one suffices
@pytest.mark.parametrize("engine_name", ["embedded"])
def test_airflow_dags_test_builds_the_project_and_fails_a_broken_model_without_retries(
        project, engine_name, tmp_path):
    root = project(FILES)
    home = tmp_path / "airflow"
    (home / "dags").mkdir(parents=True)
    (home / "dags/lakehouse.py").write_text(textwrap.dedent(f"""\
        from medallion_cli.integrations.airflow import medallion_dag
        dag = medallion_dag({str(root)!r}, "lakehouse", per="layer")
    """))
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"), "MEDALLION_DAEMON": "off"}
    airflow = Path(sys.executable).parent / "airflow"

    def airflow_run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(airflow), *args], env=env, capture_output=True, text=True,
                              timeout=600)

    migrated = airflow_run("db", "migrate")
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    ran = airflow_run("dags", "test", "lakehouse")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "state=success" in ran.stdout + ran.stderr
    assert DeltaTable(str(root / "warehouse/gold/big_orders")).to_pyarrow_table(
        ).to_pydict() == {"id": [2, 3], "amount": [40, 60]}

    (root / "models/gold/big_orders.sql").write_text("select no_such_column from "
                                                     "{{ ref('clean_orders') }}")
    broken = airflow_run("dags", "test", "lakehouse")
    out = broken.stdout + broken.stderr
    assert broken.returncode != 0, out
    assert "AirflowFailException: medallion build -s big_orders: a model or test failed" in out
    assert "new_state=failed" in out and "up_for_retry" not in out
    assert "ERROR      model big_orders" in out
