"""Data tests, expectations with quarantine, and model unit tests: passing and failing cases."""

import json

import pytest
from click.testing import CliRunner
from conftest import DELTA_SPARK_IN_SLOW_TIER, read_delta
from deltalake import DeltaTable

from medallion_cli import commands
from medallion_cli.cli.group import main
from medallion_cli.core.errors import MedallionError

pytestmark = DELTA_SPARK_IN_SLOW_TIER

PEOPLE = {
    "seeds/countries.csv": "code,name\nNL,Netherlands\nGB,United Kingdom\n",
    "models/people.sql": """\
        select * from values
          (1, 'ann', 'NL', 30), (2, 'bob', 'GB', 41), (2, 'bob', 'XX', -1), (3, null, 'DE', 25)
          as t(id, name, country, age)
    """,
}


def props(tests_yaml: str) -> dict:
    return {**PEOPLE, "models/props.yml": tests_yaml}


def data_test_results(root, **options):
    inv = commands.Invocation(project_dir=str(root), **options)
    return {r.name: r for r in commands.test(inv)}


GENERIC = """\
models:
  - name: people
    tests:
      - expression: "age >= 0"
    columns:
      - name: id
        tests: [not_null, unique]
      - name: name
        tests:
          - not_null:
              config: {severity: warn}
      - name: country
        tests:
          - accepted_values: {values: [NL, GB, DE]}
          - relationships: {to: "ref('countries')", field: code, name: country_known}
"""


@pytest.mark.one_engine("data test verdicts are Spark SQL over the tables, whatever the engine")
def test_generic_tests_count_and_show_failing_rows(project, build):
    root = project(props(GENERIC))
    build(root)
    results = data_test_results(root)
    summary = {n: (r.status, r.rows) for n, r in results.items()}
    assert summary == {
        "expression_people": ("error", 1),
        "not_null_people_id": ("success", 0),
        "unique_people_id": ("error", 1),
        "not_null_people_name": ("warn", 1),
        "accepted_values_people_country": ("error", 1),
        "country_known": ("error", 2),  # XX and DE are not in the countries seed
    }
    assert "XX" in results["accepted_values_people_country"].message
    assert "models/props.yml" in results["unique_people_id"].message


@pytest.mark.one_engine("thresholds and test selection are resolved before any engine runs")
def test_thresholds_and_selection(project, build):
    root = project(props("""\
models:
  - name: people
    columns:
      - name: country
        tests:
          - relationships:
              to: "ref('countries')"
              field: code
              config: {error_if: ">2", warn_if: ">1", tags: [refs]}
      - name: id
        tests: [unique]
"""))
    build(root)
    results = data_test_results(root, select=("tag:refs",))
    assert list(results) == ["relationships_people_country"]
    assert results["relationships_people_country"].status == "warn"  # 2 rows: warn, not error
    assert set(data_test_results(root, select=("unique_people_id",))) == {"unique_people_id"}
    assert set(data_test_results(root, exclude=("people",))) == set()


@pytest.mark.one_engine("custom and singular tests are rendered and counted as on any engine")
def test_custom_generic_and_singular_tests(project, build):
    root = project({**props("""\
models:
  - name: people
    columns:
      - name: age
        tests: [is_positive]
"""), "tests/generic/is_positive.sql": """\
        {% test is_positive(model, column_name) %}
        select * from {{ model }} where {{ column_name }} <= 0
        {% endtest %}
    """, "tests/no_duplicate_names.sql": """\
        {{ config(severity='warn') }}
        select name, count(*) as n from {{ ref('people') }} group by name having count(*) > 1
    """})
    build(root)
    results = data_test_results(root)
    assert (results["is_positive_people_age"].status, results["is_positive_people_age"].rows) == (
        "error", 1)
    assert (results["no_duplicate_names"].status, results["no_duplicate_names"].rows) == ("warn", 1)


def test_build_runs_tests_after_models_and_skips_descendants_on_failure(project, build):
    root = project({**props("""\
models:
  - name: people
    columns:
      - name: id
        tests: [unique]
      - name: name
        tests:
          - not_null: {config: {severity: warn}}
"""), "models/adults.sql": "select * from {{ ref('people') }} where age >= 18",
        "models/countries_used.sql": "select distinct code from {{ ref('countries') }}"})
    results = build(root)
    assert results["people"].status == "success"
    assert results["unique_people_id"].status == "error"
    assert results["not_null_people_name"].status == "warn"
    assert results["adults"].status == "skipped"
    assert "upstream 'unique_people_id' error" in results["adults"].message
    assert results["countries_used"].status == "success"
    assert not (root / "warehouse/models/adults").exists()


SOURCE_TESTS = """\
sources:
  - name: landing
    path: landing
    tables:
      - name: signups
        format: json
        schema: "id int, email string"
        tests:
          - expression: "id > 0"
        columns:
          - name: id
            tests: [not_null, unique]
          - name: email
            tests: [{not_null: {severity: warn}}]
"""


def test_tests_on_sources_run_first_and_gate_the_models_that_read_them(project, build):
    """As dbt's source tests: declared on a source table and its columns, run before the models
    that read it, which an error-severity failure skips."""
    root = project({"models/sources.yml": SOURCE_TESTS,
                    "models/signups.sql": "select * from {{ source('landing', 'signups') }}",
                    "models/other.sql": "select 1 as id"})
    (root / "landing/signups").mkdir(parents=True)
    (root / "landing/signups/1.json").write_text(
        '{"id": 1, "email": "a@x"}\n{"id": 2}\n{"id": 2, "email": "b@x"}\n')
    results = build(root)
    assert results["source_not_null_landing_signups_email"].status == "warn"
    assert results["source_not_null_landing_signups_id"].status == "success"
    assert results["source_expression_landing_signups"].status == "success"
    assert results["source_unique_landing_signups_id"].status == "error"
    assert results["source_unique_landing_signups_id"].rows == 1
    assert results["signups"].status == "skipped"
    assert "upstream 'source_unique_landing_signups_id' error" in results["signups"].message
    assert results["other"].status == "success"
    picked = data_test_results(root, select=("source:landing.signups",))
    assert sorted(picked) == ["source_expression_landing_signups",
                              "source_not_null_landing_signups_email",
                              "source_not_null_landing_signups_id",
                              "source_unique_landing_signups_id"]
    assert set(data_test_results(root, select=("other",))) == set()
    (root / "landing/signups/1.json").write_text('{"id": 1, "email": "a@x"}\n')
    again = build(root, select=("source:landing+",))
    assert set(again) == {"signups", *picked}  # the source's tests and its readers
    assert again["signups"].status == "success"


def test_store_failures_keeps_the_failing_rows_of_the_last_run_in_a_delta_table(project, build):
    root = project(props("""\
models:
  - name: people
    columns:
      - name: id
        tests: [{unique: {config: {store_failures: true}}}]
      - name: name
        tests: [{not_null: {store_failures: true, severity: warn}}]
"""))
    results = build(root)
    kept = root / "warehouse/_medallion/test_failures"
    assert results["unique_people_id"].status == "error"
    assert f"kept in {kept / 'unique_people_id'}" in results["unique_people_id"].message
    assert read_delta(kept / "unique_people_id") == [{"id": 2, "n_records": 2}]
    assert [r["id"] for r in read_delta(kept / "not_null_people_name")] == [3]
    (root / "models/people.sql").write_text("select 1 as id, 'ann' as name")
    assert build(root)["unique_people_id"].status == "success"
    assert read_delta(kept / "unique_people_id") == []  # this run's failures: none


@pytest.mark.one_engine("a verdict is kept by table versions (both engines' in test_build.py)")
def test_build_skips_tests_that_passed_on_unchanged_inputs(project, build):
    """A data test is a query over tables: on the same SQL and table versions it gives the same
    verdict, so a build reports a pass as up to date, and a warning again as it was, instead of
    running it again. Failures run every time; `medallion test` and --rerun-tests always run."""
    root = project({
        "seeds/countries.csv": "code\nNL\nGB\n",
        "models/people.sql": "select * from values (1, 'ann', 'NL'), (2, null, 'GB') "
                             "as t(id, name, country)",
        "models/props.yml": """\
models:
  - name: people
    columns:
      - name: id
        tests: [not_null]
      - name: name
        tests:
          - not_null: {config: {severity: warn}}
      - name: country
        tests:
          - relationships: {to: "ref('countries')", field: code, name: country_known}
"""})
    statuses = lambda results: {n: r.status for n, r in results.items()  # noqa: E731
                                if r.kind == "test"}
    first = statuses(build(root))
    assert first == {"not_null_people_id": "success", "not_null_people_name": "warn",
                     "country_known": "success"}

    again = build(root)
    assert statuses(again) == {"not_null_people_id": "up_to_date",
                               "not_null_people_name": "warn", "country_known": "up_to_date"}
    assert "passed at" in again["country_known"].message
    assert "--rerun-tests" in again["country_known"].message
    warned = again["not_null_people_name"]  # not run: its recorded verdict, failing rows and all
    assert warned.message.startswith("warned at ") and "--rerun-tests" in warned.message
    assert warned.rows == 1 and "warned: 1 failing row(s)" in warned.message
    assert "query" not in warned.phases

    # A new version of one input runs the tests that read it, and only those.
    (root / "seeds/countries.csv").write_text("code\nNL\nGB\nDE\n")
    assert statuses(build(root)) == {"not_null_people_id": "up_to_date",
                                     "not_null_people_name": "warn", "country_known": "success"}
    # An edited test (its query or thresholds) runs again.
    (root / "models/props.yml").write_text(
        (root / "models/props.yml").read_text().replace("field: code,",
                                                        "field: code, config: {warn_if: '>5'},"))
    assert statuses(build(root))["country_known"] == "success"

    assert set(statuses(build(root, rerun_tests=True)).values()) == {"success", "warn"}
    assert set(r.status for r in data_test_results(root).values()) == {"success", "warn"}


@pytest.mark.parametrize("yaml_text,message", [
    ("models:\n  - name: people\n    columns:\n      - name: idd\n        tests: [not_null]\n",
     "models[people].columns[idd].tests[0]"),
    ("models:\n  - name: people\n    columns:\n      - name: id\n        tests: [is_odd]\n",
     "no generic test named 'is_odd'"),
    ("models:\n  - name: people\n    columns:\n      - name: id\n        tests:\n"
     "          - relationships: {to: \"ref('nope')\", field: id}\n", "ref('nope') names no model"),
    ("models:\n  - name: people\n    columns:\n      - name: id\n        tests:\n"
     "          - unique: {config: {severity: fatal}}\n", "severity must be 'error' or 'warn'"),
])
@pytest.mark.one_engine("raised loading or running the test, before any engine write")
def test_test_errors_name_the_yaml_file_and_key(project, build, yaml_text, message):
    root = project(props(yaml_text))
    if "idd" in yaml_text:  # a wrong column is found when the test runs
        build(root, select=("people",))
        result = data_test_results(root)["not_null_people_idd"]
        assert result.status == "error"
        assert "models/props.yml" in result.message and message in result.message
        return
    with pytest.raises(MedallionError) as err:
        data_test_results(root)
    assert "models/props.yml" in str(err.value) and message in str(err.value)


@pytest.mark.one_engine("a test's SQL error is Spark's analysis error, whatever the engine")
def test_broken_singular_test_says_which_test(project, build):
    root = project({**PEOPLE, "tests/broken.sql": "select nope from {{ ref('people') }}"})
    build(root, select=("people",))
    result = data_test_results(root)["broken"]
    assert result.status == "error"
    assert "tests/broken.sql" in result.message and "test 'broken'" in result.message


EXPECTING = """\
models:
  - name: orders
    config:
      expectations:
        has_id: {expect: "id is not null", on_violation: drop}
        positive: {expect: "qty > 0", on_violation: drop}
        small: "qty < 100"
"""


def test_expectations_warn_drop_and_quarantine(project, build):
    root = project({"models/props.yml": EXPECTING, "models/orders.sql": """\
        select * from values (1, 5), (2, -1), (null, 3), (4, 500), (5, null) as t(id, qty)
    """})
    result = build(root)["orders"]
    assert result.expectations == {"has_id": 1, "positive": 2, "small": 2}  # null breaks it too
    assert sorted(r["id"] for r in read_delta(root / "warehouse/models/orders")) == [1, 4]
    quarantine = sorted(read_delta(root / "warehouse/models/orders_quarantine"),
                        key=lambda r: str(r["id"]))
    assert [(r["id"], r["qty"], r["_failed_rules"]) for r in quarantine] == [
        (2, -1, ["positive"]), (5, None, ["positive", "small"]), (None, 3, ["has_id"])]
    results = json.loads((root / "target/run_results.json").read_text())["results"]
    assert results[0]["expectations"] == {"has_id": 1, "positive": 2, "small": 2}
    assert result.on_violation == {"has_id": "drop", "positive": "drop", "small": "warn"}
    assert result.quarantine == str(root / "warehouse/models/orders_quarantine")


def test_fail_expectation_leaves_the_table_unchanged(project, build):
    root = project({"models/orders.sql": """\
        {{ config(expectations={'positive': {'expect': 'qty > 0', 'on_violation': 'fail'}}) }}
        select * from values (1, 5) as t(id, qty)
    """})
    build(root)
    table = root / "warehouse/models/orders"
    (root / "models/orders.sql").write_text((root / "models/orders.sql").read_text().replace(
        "(1, 5)", "(1, 5), (2, -3)"))
    result = build(root)["orders"]
    assert result.status == "error"
    assert "expectation 'positive' failed on 1 row(s); nothing was written" in result.message
    assert DeltaTable(str(table)).version() == 0 and read_delta(table) == [{"id": 1, "qty": 5}]


def test_streaming_expectations_quarantine_each_batch(project, build):
    from helpers import SOURCES, land

    root = project({"models/sources.yml": SOURCES, "models/silver/orders.sql": """\
        {{ config(materialized='streaming', strategy='merge', unique_key='order_id',
                  expectations={'known': {'expect': "status in ('placed', 'paid')",
                                          'on_violation': 'drop'}}) }}
        select order_id, status from {{ source('landing', 'orders') }}
    """})
    land(root, "1.json", [{"order_id": 1, "status": "placed", "op": "I", "seq": 1},
                          {"order_id": 2, "status": "lost", "op": "I", "seq": 1}])
    assert build(root)["orders"].expectations == {"known": 1}
    land(root, "2.json", [{"order_id": 3, "status": "???", "op": "I", "seq": 1}])
    assert build(root)["orders"].expectations == {"known": 1}
    assert [r["order_id"] for r in read_delta(root / "warehouse/silver/orders")] == [1]
    assert sorted(r["order_id"] for r in read_delta(
        root / "warehouse/silver/orders_quarantine")) == [2, 3]


def test_expectations_of_a_merge_with_deletes_are_counted_before_anything_is_written(
        project, build):
    # A MERGE with deletes computes its rows once for two writes (tombstones, then the table):
    # the expectations are counted while they are computed, and still before either write.
    from helpers import SOURCES, land

    root = project({"models/sources.yml": SOURCES, "models/silver/orders.sql": """\
        {{ config(materialized='streaming', strategy='merge', unique_key='order_id',
                  sequence_by='seq', delete_when="op = 'D'",
                  expectations={'has_status': {'expect': 'status is not null',
                                               'on_violation': 'drop'},
                                'known': "status in ('placed', 'paid')",
                                'sane_seq': {'expect': 'seq < 1000', 'on_violation': 'fail'}}) }}
        select order_id, status, op, seq from {{ source('landing', 'orders') }}
    """})
    land(root, "1.json", [{"order_id": 1, "status": "placed", "op": "I", "seq": 1},
                          {"order_id": 2, "status": None, "op": "I", "seq": 1},
                          {"order_id": 3, "status": "odd", "op": "I", "seq": 1},
                          {"order_id": 4, "status": "paid", "op": "I", "seq": 1},
                          {"order_id": 4, "status": "paid", "op": "D", "seq": 2}])
    first = build(root)["orders"]
    assert (first.status, first.expectations, first.rows_checked) == (
        "success", {"has_status": 1, "known": 2, "sane_seq": 0}, 5)
    assert "expectations" not in first.phases  # no counting pass of their own
    table = root / "warehouse/silver/orders"
    assert sorted(r["order_id"] for r in read_delta(table)) == [1, 3]
    assert [r["order_id"] for r in read_delta(f"{table}_quarantine")] == [2]
    assert [r["order_id"] for r in read_delta(f"{table}_tombstones")] == [4]
    versions = {t: DeltaTable(f"{table}{t}").version()
                for t in ("", "_quarantine", "_tombstones")}
    land(root, "2.json", [{"order_id": 1, "status": "paid", "op": "D", "seq": 2},
                          {"order_id": 5, "status": None, "op": "I", "seq": 1},
                          {"order_id": 6, "status": "paid", "op": "I", "seq": 5000}])
    failed = build(root)["orders"]
    assert failed.status == "error"
    assert "expectation 'sane_seq' failed on 1 row(s); nothing was written" in failed.message
    assert versions == {t: DeltaTable(f"{table}{t}").version()
                        for t in ("", "_quarantine", "_tombstones")}
    assert sorted(r["order_id"] for r in read_delta(table)) == [1, 3]


def test_a_batch_whose_every_row_is_rejected_is_quarantined_and_the_model_goes_on(project,
                                                                                 build):
    """One landed order that breaks a drop rule and nothing beside it: quarantined and
    counted, the model OK, and its next batches go on (it used to fail on every build)."""
    from helpers import SOURCES, land

    root = project({"models/sources.yml": SOURCES, "models/silver/orders.sql": """\
        {{ config(materialized='streaming', strategy='merge', unique_key='order_id',
                  sequence_by='seq', delete_when="op = 'D'",
                  expectations={'has_status': {'expect': "op = 'D' or status is not null",
                                               'on_violation': 'drop'}}) }}
        select order_id, status, op, seq from {{ source('landing', 'orders') }}
    """})
    land(root, "1.json", [{"order_id": 1, "status": "placed", "op": "I", "seq": 1}])
    build(root)
    land(root, "2.json", [{"order_id": 2, "status": None, "op": "I", "seq": 1}])
    rejected = build(root)["orders"]
    assert (rejected.status, rejected.expectations, rejected.rows_checked) == (
        "success", {"has_status": 1}, 1), rejected.message
    table = root / "warehouse/silver/orders"
    assert [r["order_id"] for r in read_delta(f"{table}_quarantine")] == [2]
    land(root, "3.json", [{"order_id": 3, "status": "paid", "op": "I", "seq": 1}])
    assert build(root)["orders"].status == "success"
    assert sorted(r["order_id"] for r in read_delta(table)) == [1, 3]


def test_bad_expectation_config_is_a_project_error(project):
    root = project({"models/m.sql": "{{ config(expectations={'x': {'expect': 'a > 0', "
                                    "'on_violation': 'explode'}}) }}select 1 as a"})
    with pytest.raises(MedallionError, match="on_violation is 'explode'"):
        commands.invocation.load(commands.Invocation(project_dir=str(root)))


UNIT = """\
unit_tests:
  - name: adults_only
    model: adults
    given:
      - input: ref('people')
        schema: "id int, name string, age int"
        rows: [{id: 1, name: ann, age: 30}, {id: 2, name: kid, age: 9}]
    expect:
      rows: [{id: 1, name: ann}]
"""


def unit_results(root):
    return {r.name: r for r in commands.unit_test(commands.Invocation(project_dir=str(root)))}


def test_unit_tests_pass_and_fail_with_a_readable_diff(project, spark):
    root = project({**PEOPLE, "models/adults.sql": "select id, name from {{ ref('people') }} "
                                                   "where age >= 18",
                    "tests/unit/adults.yml": UNIT})
    assert unit_results(root)["adults_only"].status == "success"
    assert not (root / "warehouse").exists()  # no table was read or written
    (root / "tests/unit/adults.yml").write_text(UNIT.replace("name: ann}]\n", "name: anne}]\n"))
    failed = unit_results(root)["adults_only"]
    assert failed.status == "error"
    assert "anne" in failed.message and "ann" in failed.message


def test_unit_test_errors(project, spark):
    root = project({**PEOPLE, "models/adults.sql": "select * from {{ ref('people') }}",
                    "tests/unit/adults.yml": UNIT.replace("model: adults", "model: adult")})
    with pytest.raises(MedallionError, match="model 'adult' does not exist. did you mean"):
        unit_results(root)
    root = project({**PEOPLE, "models/adults.sql": "select * from {{ ref('people') }}",
                    "tests/unit/adults.yml": UNIT.replace("ref('people')", "ref('peple')")})
    with pytest.raises(MedallionError) as err:  # an input is resolved like a ref in a model
        unit_results(root)
    assert "tests/unit/adults.yml" in str(err.value) and "did you mean 'people'" in str(err.value)
    root = project({**PEOPLE, "models/adults.sql": "select * from {{ ref('people') }} "
                                                   "join {{ ref('countries') }} on true",
                    "tests/unit/adults.yml": UNIT})
    result = unit_results(root)["adults_only"]
    assert result.status == "error" and "gives no rows for: countries" in result.message
    root = project({**PEOPLE, "tests/unit/adults.yml": UNIT.replace("model: adults",
                                                                    "model: countries")})
    with pytest.raises(MedallionError, match="model 'countries' is a seed: a unit test checks "
                                             "a model's SQL"):
        unit_results(root)


@pytest.mark.one_engine("exit codes and CLI output of data tests do not depend on the engine")
def test_cli_test_exit_codes(project, build):
    root = project(props("models:\n  - name: people\n    columns:\n      - name: name\n"
                         "        tests:\n          - not_null: {config: {severity: warn}}\n"))
    build(root)
    warned = CliRunner().invoke(main, ["test", "--project-dir", str(root)])
    assert warned.exit_code == 0 and "WARN" in warned.output
    (root / "models/props.yml").write_text(GENERIC)
    failed = CliRunner().invoke(main, ["test", "--project-dir", str(root)])
    assert failed.exit_code == 1 and "FAIL" in failed.output and "bob" in failed.output


@pytest.mark.unit
@pytest.mark.parametrize("sql, answer", [
    ("select * from people where id is null", ("count_if(id IS NULL)", True)),
    ("select * from people\nwhere country is not null and country not in ('NL', 'GB')",
     ("count_if(NOT country IS NULL AND NOT country IN ('NL', 'GB'))", True)),
    ("select * from people where not coalesce((age >= 0), false)",
     ("count_if(NOT COALESCE((age >= 0), FALSE))", True)),
    # unique: no duplicates, or run alone for how many
    ("select id, count(*) as n_records from people where id is not null group by id "
     "having count(*) > 1", ("count(id) - count(distinct id)", False)),
    # not one table's rows filtered, nor a uniqueness test: each runs alone
    ("select id, count(*) as n from people group by id having count(*) > 2", None),
    ("select c.* from people as c left anti join countries as p on c.country = p.code", None),
    ("select * from people where id in (select id from other)", None),
    ("select * from people where id is null limit 5", None),
    ("select id from people where id is null", None),
])
def test_which_tests_are_answered_in_one_pass_over_their_table(sql, answer):
    from medallion_cli.run.table_test_passes import measure

    found = measure(sql)
    assert (found and (found.table, found.sql, found.exact)) == (answer and ("people", *answer))


def test_a_tables_tests_are_answered_in_one_spark_job(spark):
    from medallion_cli.load.datatests import DataTest
    from medallion_cli.run.table_test_passes import TestPasses

    spark.sql("select * from values (1, 'NL', 30, 'a'), (2, 'XX', -1, 'a'), (null, 'GB', -5, 'b')"
              " as t(id, country, age, kind)").createOrReplaceTempView("people_once")
    tests = {name: DataTest(name, f"select * from people_once where {condition}", ("p",), (),
                            "models/p.yml", name)
             for name, condition in [("not_null", "id is null"),
                                     ("accepted", "country not in ('NL', 'GB')"),
                                     ("positive", "not coalesce(age >= 0, false)")]}
    unique = ("select {c}, count(*) from people_once where {c} is not null group by {c} "
              "having count(*) > 1")
    for column in ("country", "kind"):
        tests[f"unique_{column}"] = DataTest(f"unique_{column}", unique.format(c=column), ("p",),
                                             (), "models/p.yml", "unique")
    tracker = spark.sparkContext.statusTracker()

    def jobs(group, work):
        spark.sparkContext.setJobGroup(group, group)
        try:
            return work(), len(tracker.getJobIdsForGroup(group))
        finally:
            for key in ("spark.jobGroup.id", "spark.job.description"):
                spark.sparkContext.setLocalProperty(key, None)

    passes = TestPasses(tests)
    counts, together = jobs("passes", lambda: {n: passes.failures(spark, t)
                                               for n, t in tests.items()})
    # kind has duplicates: how many values, and which, its test says when it runs alone
    assert counts == {"not_null": 1, "accepted": 1, "positive": 2, "unique_country": 0,
                      "unique_kind": None}
    alone, one = jobs("alone", lambda: spark.sql(tests["unique_kind"].sql).count())
    assert alone == 1 and together == one  # five tests, the jobs of one


def test_rows_on_their_way_to_the_table_are_checked_by_compiled_expressions(spark, capsys):
    """Each rule is a flag column Spark compiles with the rest of a row's work; the list of a
    row's failed rules (a higher-order function, which Spark only interprets, row by row) is
    made for quarantined rows alone. The checks come before any engine's write, so their plan
    is the same on both engines: one is enough."""
    from types import SimpleNamespace

    from medallion_cli.materialize.checks import checked_rows

    config = SimpleNamespace(scd_type=1, contract=False, zorder_by=(), cluster_by=(), expectations={
        "has_id": {"expect": "id is not null", "on_violation": "drop"},
        "small": {"expect": "qty < 100", "on_violation": "warn"}})
    node = SimpleNamespace(name="orders", config=config,
                           file=SimpleNamespace(rel_path="models/orders.sql"))
    ctx = SimpleNamespace(project=SimpleNamespace(quarantine_path=lambda file: "unused"),
                          engine=SimpleNamespace(capabilities=SimpleNamespace(observes_rows=True)))
    # (not a VALUES list: Spark would fold the checks into its rows before any plan shows them)
    df = spark.range(3).selectExpr("if(id = 2, null, id) as id", "id * 250 as qty")
    with checked_rows(ctx, node, df, replace=True, settled=False) as checked:
        assert sorted(tuple(r) for r in checked.rows.collect()) == [(0, 0), (1, 250)]
        checked.rows.explain()
    plan = capsys.readouterr().out
    assert "id" in plan and "lambdafunction" not in plan.lower()
