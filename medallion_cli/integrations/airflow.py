"""An Airflow DAG from a Medallion project (`pip install 'medallion-cli[airflow]'`, Airflow 3):
one task per model and seed, or per layer, with the project's dependencies between them. Each
task runs `medallion build -s <its nodes>` (their data tests after them) as a process of its own
on the worker, waiting for another run's lock rather than failing on it, and reads its exit
code: 1 (a model or test failed: the data needs a look, and running it again will not help) fails
the task without retries; 2 or anything else (the run did not start: a lock held past the wait, a
store or cluster away) fails it for Airflow's retries.

    # a file in the DAGs folder
    from medallion_cli.integrations.airflow import medallion_dag

    dag = medallion_dag("/srv/lakehouse", "lakehouse", target="prod", per="layer",
                        schedule="@hourly")
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from .. import commands
from .project_graph import Node, project_graph

DATA_FAILED = 1  # medallion's exit code for a failed model or test (docs/scheduling.md)


def medallion_dag(project_dir: str, dag_id: str, target: str | None = None,
                  profiles_dir: str | None = None, per: str = "model",
                  schedule: Any = None, retries: int = 2, wait_for_lock: int = 900,
                  **dag_args: Any) -> DAG:
    """per: "model" (a task per model and seed) or "layer" (a task per layer, in the order
    their nodes need)."""
    inv = commands.Invocation(project_dir=project_dir, profiles_dir=profiles_dir, target=target)
    nodes, _ = project_graph(inv)
    groups = _groups(nodes, per)
    options = ["--project-dir", project_dir, "--wait-for-lock", str(wait_for_lock),
               *(["-t", target] if target else [])]
    dag_args.setdefault("start_date", datetime(2024, 1, 1))
    dag_args.setdefault("catchup", False)
    with DAG(dag_id, schedule=schedule, default_args={
            "retries": retries, "retry_delay": timedelta(minutes=1)}, **dag_args) as dag:
        tasks = {name: PythonOperator(task_id=name, python_callable=run_build,
                                      op_args=[_medallion(), members, options])
                 for name, (members, _) in groups.items()}
        for name, (_, after) in groups.items():
            for upstream in after:
                tasks[upstream] >> tasks[name]
    return dag


def _groups(nodes: list[Node], per: str) -> dict[str, tuple[list[str], set[str]]]:
    """task id -> (its nodes, the task ids it runs after)."""
    if per not in ("model", "layer"):
        raise ValueError(f"per={per!r}: a task per 'model' or per 'layer'")
    task_of = {n.name: n.name if per == "model" else n.layer for n in nodes}
    groups: dict[str, tuple[list[str], set[str]]] = {}
    for node in nodes:  # in DAG order
        members, after = groups.setdefault(task_of[node.name], ([], set()))
        members.append(node.name)
        after.update(task_of[p] for p in node.parents if task_of[p] != task_of[node.name])
    return groups


def _medallion() -> list[str]:
    """The medallion of the worker's environment: its own Python's module, else on PATH."""
    return [sys.executable, "-m", "medallion_cli.cli"] if sys.executable else [
        shutil.which("medallion") or "medallion"]


def run_build(medallion: Sequence[str], select: Sequence[str], options: Sequence[str]) -> None:
    """One task: `medallion build -s <select> <options>`, its output in the task's log."""
    done = subprocess.run([*medallion, "build", "-s", *select, *options],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(done.stdout)
    if done.returncode == DATA_FAILED:
        raise AirflowFailException(f"medallion build -s {' '.join(select)}: a model or test "
                                   "failed (see the log); fix it, then clear the task")
    if done.returncode != 0:
        raise AirflowException(f"medallion build -s {' '.join(select)} did not run (exit "
                               f"{done.returncode}): retried")
