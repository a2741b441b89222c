"""`cdc: snapshot`: a source that sends whole snapshots (a nightly dump) kept as SCD1 or SCD2,
as AUTO CDC FROM SNAPSHOT: rows that appear are inserts, rows that change updates, rows that
vanish deletes, each snapshot in its order, whether the snapshots come one per build or
several in one batch. Both engines: the snapshots' deletes go through each engine's MERGE."""

import json
import os
import signal
import time

import pytest
from conftest import at, read_delta
from helpers import medallion

from medallion_cli import commands
from medallion_cli.core.errors import MedallionError

SOURCES = """\
sources:
  - name: landing
    path: landing
    tables:
      - name: customers
        format: json
        schema: "id bigint, name string, day int"
"""


def model(scd: int = 1, extra: str = "") -> str:
    return f"""\
{{{{ config(materialized='streaming', cdc='snapshot', unique_key='id', sequence_by='day',
          scd_type={scd}{extra}) }}}}
select id, name, day from {{{{ source('landing', 'customers') }}}} where _corrupt_record is null
"""


SNAPSHOTS = [
    [(1, "a"), (2, "b"), (3, "c")],
    [(1, "a"), (3, "c2")],  # 2 vanished, 3 changed, 1 the same
    [(1, "a"), (2, "b2"), (4, "d")],  # 3 vanished, 2 back, 4 new
]


def land(root, day, rows):
    folder = root / "landing/customers"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{day:03d}.json").write_text("".join(
        json.dumps({"id": i, "name": n, "day": day}) + "\n" for i, n in rows))


def in_turns_and_at_once(project, build, scd):
    roots = []
    for split in (True, False):
        root = project({"models/sources.yml": SOURCES, "models/silver/customers.sql": model(scd)})
        for day, rows in enumerate(SNAPSHOTS, 1):
            land(root, day, rows)
            if split:
                result = build(root)["customers"]
                assert result.status == "success", result.message
        if not split:  # three snapshots in one micro-batch
            result = build(root)["customers"]
            assert result.status == "success", result.message
        roots.append(root)
    return roots


def test_snapshots_kept_as_scd1(project, build, engine_name):
    in_turns, at_once = in_turns_and_at_once(project, build, scd=1)
    for root in (in_turns, at_once):
        rows = sorted((r["id"], r["name"], r["day"]) for r in read_delta(at(root, "silver/customers")))
        assert rows == [(1, "a", 3), (2, "b2", 3), (4, "d", 3)]
        assert "_snapshot_vanished" not in read_delta(at(root, "silver/customers"))[0]


def test_snapshots_kept_as_scd2_history(project, build, engine_name):
    in_turns, at_once = in_turns_and_at_once(project, build, scd=2)
    for root in (in_turns, at_once):
        history = sorted((r["id"], r["name"], r["valid_from"], r["valid_to"], r["is_current"])
                         for r in read_delta(at(root, "silver/customers")))
        assert history == [
            (1, "a", 1, None, True),  # the same in every snapshot: one version
            (2, "b", 1, 2, False), (2, "b2", 3, None, True),  # vanished, then back
            (3, "c", 1, 2, False), (3, "c2", 2, 3, False),  # changed, then vanished
            (4, "d", 3, None, True)]


@pytest.mark.unit
@pytest.mark.parametrize("extra, said", [
    (", delete_when=\"name = 'x'\"", "cdc 'snapshot' deletes the keys a snapshot lacks"),
    (", sequence_by=None", "needs materialized 'incremental' or 'streaming' and sequence_by"),
])
def test_a_snapshot_model_without_what_it_needs_is_refused(project, extra, said):
    text = model(extra=extra).replace("sequence_by='day',\n          scd_type=1, sequence_by=None",
                                      "scd_type=1")
    root = project({"models/sources.yml": SOURCES, "models/silver/customers.sql": text})
    with pytest.raises(MedallionError) as caught:
        commands.invocation.load(commands.Invocation(project_dir=str(root)))
    assert str(caught.value).startswith("models/silver/customers.sql") and said in str(
        caught.value), str(caught.value)


@pytest.mark.slow_case("the embedded case kills the same batch; delta-spark's commit path is "
                       "the engine contract's kill tests'", engine_name="delta-spark")
def test_a_build_killed_after_a_snapshots_commit_applies_each_snapshot_once(project, build,
                                                                           engine_name):
    one_per_batch = SOURCES + "        options: {maxFilesPerTrigger: 1}\n"
    root = project({"models/sources.yml": one_per_batch,
                    "models/silver/customers.sql": model(scd=2)})
    for day, rows in enumerate(SNAPSHOTS, 1):
        land(root, day, rows)
        os.utime(root / f"landing/customers/{day:03d}.json", (time.time() + day,) * 2)
    # the second snapshot's batch commits its rows, and the process dies before its checkpoint
    killed = medallion(root, "build", crash_at="customers:committed:1")
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    rebuilt = build(root)["customers"]
    assert rebuilt.status == "success", rebuilt.message
    assert "1 replayed batch(es) already committed" in rebuilt.message
    history = sorted((r["id"], r["name"], r["valid_from"], r["valid_to"], r["is_current"])
                     for r in read_delta(at(root, "silver/customers")))
    assert history == [(1, "a", 1, None, True), (2, "b", 1, 2, False), (2, "b2", 3, None, True),
                       (3, "c", 1, 2, False), (3, "c2", 2, 3, False), (4, "d", 3, None, True)]
