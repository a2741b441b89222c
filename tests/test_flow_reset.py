"""build --reset-flow: a streaming model's query started again from a version, a time or its
inputs' earliest, its table kept; each input row lands once across the reset, even when the
build doing it is killed."""

import datetime as dt
import signal
from collections import Counter

import pytest
from click.testing import CliRunner
from conftest import at, delta_table, read_delta
from helpers import (
    BATCH_1,
    BATCH_2,
    BATCH_3,
    MODELS,
    expected_state,
    land,
    medallion,
    silver,
)

from medallion_cli.cli import main
from medallion_cli.core.errors import MedallionError
from medallion_cli.materialize.context import FlowReset
from medallion_cli.materialize.streaming.flow_reset import RESET_SUFFIX

EVENTS = """\
{{ config(materialized='streaming') }}
select order_id, %s as status, seq from {{ ref('bronze_orders') }}
where _corrupt_record is null
"""
FILES = {**MODELS, "models/silver/order_events.sql": EVENTS % "status"}


def events(root):
    return Counter((r["order_id"], r["status"], r["seq"])
                   for r in read_delta(at(root, "silver/order_events")))


def as_events(batch, upper=False):
    return Counter((e["order_id"], e["status"].upper() if upper and e["status"] else e["status"],
                    e["seq"]) for e in batch)


def bronze_version(root):
    return delta_table(at(root, "bronze/bronze_orders")).version()


def edited_and_landed(root, build):
    """Built on BATCH_1; then the append model edited (statuses upper-cased from now on) and
    BATCH_2 landed and built into bronze alone: (bronze's version holding BATCH_2, the
    append model's table versions so far)."""
    land(root, "001.json", BATCH_1)
    assert {r.status for r in build(root).values()} == {"success"}
    (root / "models/silver/order_events.sql").write_text(EVENTS % "upper(status)")
    land(root, "002.json", BATCH_2)
    assert build(root, select=("bronze_orders",))["bronze_orders"].status == "success"
    return bronze_version(root), delta_table(at(root, "silver/order_events")).version()


def test_a_flow_reset_from_a_version_keeps_its_table_and_reads_from_there_once(project, build):
    root = project(FILES)
    version, kept = edited_and_landed(root, build)
    reset = build(root, select=("order_events",), flow_reset=FlowReset(version=version))
    said = reset["order_events"]
    assert said.status == "warn", said.message  # its SQL changed: the earlier rows are as they were
    assert f"its query started again from version {version}, its table kept as it was" in \
        said.message
    # the rows before the reset stay as the old SQL wrote them; BATCH_2 is read once, by the new
    assert events(root) == as_events(BATCH_1) + as_events(BATCH_2, upper=True)
    assert delta_table(at(root, "silver/order_events")).version() == kept + 1  # one append
    checkpoint = root / "warehouse/_checkpoints/silver/order_events"
    assert not (checkpoint.parent / (checkpoint.name + RESET_SUFFIX)).exists()
    # from then on it goes on from its new checkpoint, and the other models as before
    land(root, "003.json", BATCH_3)
    build(root)
    assert events(root) == as_events(BATCH_1) + as_events(BATCH_2 + BATCH_3, upper=True)
    assert silver(root) == expected_state(BATCH_1 + BATCH_2 + BATCH_3)


@pytest.mark.slow_case("the time is turned into a version before either engine reads (the "
                       "version case runs on both)", engine_name="delta-spark")
def test_a_flow_reset_from_a_time_starts_at_the_first_commit_at_or_after_it(project, build):
    root = project(FILES)
    version, _ = edited_and_landed(root, build)
    committed = delta_table(at(root, "bronze/bronze_orders")).history(1)[0]["timestamp"]
    when = dt.datetime.fromtimestamp(committed / 1000 - 0.001, dt.timezone.utc)
    stamp = when.strftime("%Y-%m-%d %H:%M:%S.%f")
    said = build(root, select=("order_events",), flow_reset=FlowReset(timestamp=stamp))
    assert f"started again from the first commit at or after {stamp}" in \
        said["order_events"].message
    assert events(root) == as_events(BATCH_1) + as_events(BATCH_2, upper=True)
    # a time after every commit: only commits to come
    later = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1)).isoformat()
    build(root, select=("order_events",), flow_reset=FlowReset(timestamp=later))
    land(root, "003.json", BATCH_3)
    build(root)
    assert events(root) == as_events(BATCH_1) + as_events(BATCH_2 + BATCH_3, upper=True)


@pytest.mark.slow_case("a merge model takes its inputs again from the engine contract's reads "
                       "and merges (the version case runs on both)", engine_name="delta-spark")
def test_a_merge_flow_reset_from_the_earliest_holds_each_key_once(project, build):
    root = project(FILES)
    land(root, "001.json", BATCH_1)
    land(root, "002.json", BATCH_2)
    build(root)
    said = build(root, select=("silver_orders",), flow_reset=FlowReset())["silver_orders"]
    assert said.status == "success" and "started again from its inputs' earliest" in said.message
    assert said.rows_read == len(BATCH_1 + BATCH_2)  # every event again
    # order 3's insert, read again, stays deleted: the delete is remembered (tombstones kept)
    assert silver(root) == expected_state(BATCH_1 + BATCH_2)


@pytest.mark.one_engine("refused before Spark starts, from the config alone; the version past "
                        "the table's is read from its log by delta-rs on both engines")
def test_a_point_a_flow_cannot_start_from_is_refused_in_one_line_and_writes_nothing(
        project, build, engine_name):
    two = ("{{ config(materialized='streaming', strategy='merge', unique_key='order_id', "
           "sequence_by='seq') }}\nselect order_id, seq from {{ ref('bronze_orders') }}\n"
           "union all select order_id, seq from {{ ref('order_events') }}")
    counts = "select count(*) as n from {{ ref('silver_orders') }}"
    root = project({**FILES, "models/gold/both.sql": two, "models/gold/counts.sql": counts})
    refusals = [
        ("bronze_orders", FlowReset(version=1), "models/bronze/bronze_orders.sql: "
         "--from-version names a point in the Delta tables a flow streams, but bronze_orders "
         "reads landing.orders (json)"),
        ("both", FlowReset(version=1), "models/gold/both.sql: --from-version is a version of "
         "one table, and both streams 2 (bronze_orders, order_events)"),
        ("order_events", FlowReset(), "models/silver/order_events.sql: --from-earliest reads "
         "order_events's inputs again from their start, which an append model adds to its "
         "table a second time"),
    ]
    for select, reset, said in refusals:
        with pytest.raises(MedallionError) as caught:
            build(root, select=(select,), flow_reset=reset)
        assert str(caught.value).startswith(said), str(caught.value)
    with pytest.raises(MedallionError, match="--reset-flow starts streaming models again, and "
                                             "the selection has none"):
        build(root, select=("counts",), flow_reset=FlowReset(version=0))
    with pytest.raises(MedallionError, match="it goes with neither --watch, --full-refresh"):
        build(root, select=("order_events",), flow_reset=FlowReset(version=0), full_refresh=True)
    land(root, "001.json", BATCH_1)
    build(root, select=("bronze_orders", "order_events"))
    kept = read_delta(at(root, "silver/order_events"))
    past = build(root, select=("order_events",), flow_reset=FlowReset(version=9))
    assert past["order_events"].status == "error" and (
        "--from-version 9: bronze_orders, which order_events streams, has versions up to 0"
        in past["order_events"].message), past["order_events"].message
    assert read_delta(at(root, "silver/order_events")) == kept
    # nothing was reset: the next build goes on from the checkpoint, with nothing new
    assert build(root, select=("order_events",))["order_events"].status == "up_to_date"


@pytest.mark.unit
@pytest.mark.parametrize("args, said", [
    (["--from-version", "3"], "--from-version says where --reset-flow starts: add --reset-flow"),
    (["--reset-flow"], "--reset-flow needs one point to start from"),
    (["--reset-flow", "--from-version", "3", "--from-earliest"],
     "--reset-flow needs one point to start from"),
    (["--reset-flow", "--from-timestamp", "soon"], "'soon' is not a date or timestamp"),
])
def test_a_reset_without_one_point_is_a_usage_error(args, said):
    result = CliRunner().invoke(main, ["build", *args])
    assert result.exit_code == 2 and said in result.output, result.output


@pytest.mark.slow_case("the embedded case kills the same points; delta-spark's commit path is "
                       "the engine contract's kill tests'", engine_name="delta-spark")
@pytest.mark.parametrize("crash_at", ["order_events:reset:0", "order_events:batch_start:0",
                                      "order_events:committed:0"])
def test_a_reset_killed_before_or_after_its_first_commit_reads_each_row_once(
        project, build, crash_at):
    """Killed once the old checkpoint was gone, the next build finishes the reset from the
    point recorded beside it; killed at its first batch, the next build runs that batch again
    from the same point (kept in the new checkpoint), not from its inputs' start; killed after
    its first commit, before Spark's checkpoint knew, the batch is a replay."""
    root = project(FILES)
    version, _ = edited_and_landed(root, build)
    killed = medallion(root, "build", "-s", "order_events", "--reset-flow", "--from-version",
                       str(version), crash_at=crash_at)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    again = build(root)["order_events"]
    assert again.status != "error", again.message
    if crash_at.endswith("committed:0"):
        assert "1 replayed batch(es) already committed" in again.message
    assert events(root) == as_events(BATCH_1) + as_events(BATCH_2, upper=True)
    land(root, "003.json", BATCH_3)
    build(root)
    assert events(root) == as_events(BATCH_1) + as_events(BATCH_2 + BATCH_3, upper=True)


@pytest.mark.slow_case("Spark's refusal reads alike on both engines; the reset after it is "
                       "the version case's, run on both", engine_name="delta-spark")
def test_an_edit_that_adds_an_input_says_to_reset_and_the_reset_reads_both_from_then(
        project, build):
    copy = ("{{ config(materialized='streaming') }}\n"
            "select * from {{ source('landing', 'orders') }}\n")
    root = project({**FILES, "models/bronze/bronze_copy.sql": copy})
    land(root, "001.json", BATCH_1)
    build(root)
    union = (EVENTS % "status") + ("union all select order_id, status, seq from "
                                   "{{ ref('bronze_copy') }}\n")
    (root / "models/silver/order_events.sql").write_text(union)
    land(root, "002.json", BATCH_2)
    refused = build(root)["order_events"]
    assert refused.status == "error" and refused.message == (
        "models/silver/order_events.sql: its stream cannot go on from its checkpoint, which "
        "read 1 input(s), while the edited model reads 2; nothing was written\n  hint: start "
        "its query again, its table kept: medallion build -s order_events --reset-flow "
        "--from-timestamp T (T: its table's last commit, in medallion history order_events; "
        "or --from-version N of its one input, or --from-earliest for a merge model); or "
        "recompute it: medallion build --full-refresh -s order_events+"), refused.message
    assert events(root) == as_events(BATCH_1)
    last = delta_table(at(root, "silver/order_events")).history(1)[0]["timestamp"]
    stamp = dt.datetime.fromtimestamp(last / 1000, dt.timezone.utc).isoformat()
    reset = build(root, select=("order_events",), flow_reset=FlowReset(timestamp=stamp))
    assert reset["order_events"].status in ("success", "warn"), reset["order_events"].message
    # BATCH_2 once from each input; BATCH_1, read before the edit, not again
    assert events(root) == as_events(BATCH_1) + as_events(BATCH_2) + as_events(BATCH_2)
