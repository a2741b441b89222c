"""Backfills by range (`build --start/--end`): the rows of a table whose event_time is in the
range are replaced in one commit by the model's rows for it, computed from its inputs' rows in
the range; the rest stays as it was. Both engines: each writes the range its own way (Delta's
replaceWhere on delta-spark, delta-rs's predicate overwrite on the embedded engine)."""

import json

import pytest
from click.testing import CliRunner
from conftest import at, delta_table, read_delta

from medallion_cli import commands
from medallion_cli.cli import main
from medallion_cli.core.errors import MedallionError

SOURCES = """\
sources:
  - name: landing
    path: landing
    tables:
      - name: events
        format: json
        schema: "event_day date, id bigint, amount int"
"""
DAILY = """\
{{ config(materialized='table', event_time='event_day',
          expectations={'positive': {'expect': 'amount >= 0', 'on_violation': 'fail'}}) }}
select event_day, id, amount * {{ var('rate', 1) }} as amount
from {{ source('landing', 'events') }} where _corrupt_record is null
"""
# days_read: how many days of its input the model saw when it wrote the row
TOTALS = """\
{{ config(materialized='table', event_time='event_day') }}
select event_day, sum(amount) as amount, count(*) over () as days_read
from {{ ref('daily') }} group by event_day
"""
DAYS = [f"2026-01-{d:02d}" for d in range(1, 11)]


def project_with_events(project):
    root = project({"models/sources.yml": SOURCES, "models/silver/daily.sql": DAILY,
                    "models/gold/totals.sql": TOTALS})
    folder = root / "landing/events"
    folder.mkdir(parents=True)
    (folder / "events.json").write_text("".join(
        json.dumps({"event_day": day, "id": i, "amount": 10 * n + i}) + "\n"
        for n, day in enumerate(DAYS) for i in range(3)))
    return root


def table(root, name):
    return sorted(tuple(str(v) for v in r.values()) for r in read_delta(at(root, name)))


def test_a_range_is_replaced_from_its_inputs_range_and_the_rest_is_left_as_it_was(
        project, build, engine_name):
    root = project_with_events(project)
    assert all(r.status == "success" for r in build(root).values())
    daily, totals = table(root, "silver/daily"), table(root, "gold/totals")
    versions = delta_table(at(root, "silver/daily")).version()

    days = ("2026-01-03", "2026-01-05")  # the 3rd and 4th
    results = build(root, select=("daily", "totals"), event_range=days, vars={"rate": 2})
    assert {n: r.status for n, r in results.items()} == {"daily": "success",
                                                         "totals": "success"}
    in_range = {"2026-01-03", "2026-01-04"}
    assert table(root, "silver/daily") == sorted(
        (day, id, str(int(amount) * 2) if day in in_range else amount)
        for day, id, amount in daily)
    # totals read only the range of daily: two days, each from the doubled amounts
    assert table(root, "gold/totals") == sorted(
        (day, str(int(amount) * 2), "2") if day in in_range else (day, amount, days_read)
        for day, amount, days_read in totals)
    history = delta_table(at(root, "silver/daily")).history(1)[0]
    assert delta_table(at(root, "silver/daily")).version() == versions + 1  # one commit
    assert "event_day" in json.dumps(history) and "2026-01-05" in json.dumps(history)

    # a failed backfill leaves the table as it was, and `retry` runs it again as a backfill
    failed = build(root, select=("daily",), event_range=days, vars={"rate": -1})["daily"]
    assert failed.status == "error" and "positive" in failed.message
    assert delta_table(at(root, "silver/daily")).version() == versions + 1
    retried = commands.retry(commands.Invocation(project_dir=str(root), vars={"rate": 3}))
    assert [(r.name, r.status) for r in retried] == [("daily", "success")]
    assert table(root, "silver/daily") == sorted(
        (day, id, str(int(amount) * 3) if day in in_range else amount)
        for day, id, amount in daily)


@pytest.mark.one_engine("refused before Spark starts, from the config alone")
def test_a_model_a_range_cannot_be_replaced_in_is_refused_in_one_line(project, build,
                                                                      engine_name):
    streaming = "{{ config(materialized='streaming', event_time='event_day') }}\n" \
                "select * from {{ source('landing', 'events') }}"
    root = project({"models/sources.yml": SOURCES, "models/silver/daily.sql": DAILY,
                    "models/silver/raw.sql": streaming,
                    "models/gold/plain.sql": "select 1 as n"})
    for name, why in (("raw", "it is streaming: its checkpoint says what it has read"),
                      ("plain", "it has no event_time to tell the range's rows by")):
        with pytest.raises(MedallionError) as caught:
            build(root, select=(name,), event_range=("2026-01-01", None))
        assert str(caught.value).startswith(
            f"models/{'silver' if name == 'raw' else 'gold'}/{name}.sql: --start/--end cannot "
            f"backfill {name}: {why}"), str(caught.value)
    result = build(root, select=("daily",), event_range=("2026-01-01", None))["daily"]
    assert result.status == "error" and "has no table with its event_time column" in \
        result.message and "medallion build -s daily" in result.message


@pytest.mark.unit
@pytest.mark.parametrize("args, said", [
    (["--start", "yesterday"], "'yesterday' is not a date or timestamp"),
    (["--start", "2026-02-01", "--end", "2026-01-01"],
     "--start 2026-02-01 is not before --end 2026-01-01"),
])
def test_a_range_that_is_not_one_is_a_usage_error(args, said):
    result = CliRunner().invoke(main, ["build", *args])
    assert result.exit_code == 2 and said in result.output, result.output
