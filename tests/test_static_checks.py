"""Static checks (report/static_checks.py): each model's SELECT against its inputs' columns,
before Spark starts, on `medallion compile`. Unit tests: no JVM, no Delta log read."""

from pathlib import Path

import pytest
from click.testing import CliRunner
from static_check_corpus import MISTAKES, corpus_files

from medallion_cli.cli import main
from medallion_cli.commands.inspect import compile_models
from medallion_cli.commands.invocation import Invocation

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parent.parent

SOURCES = """\
sources:
  - name: landing
    path: landing
    tables:
      - name: orders
        format: json
        schema: "order_id bigint, customer_id bigint, amount double, updated_at timestamp"
      - name: clicks
        format: json
"""
GOOD = {
    "models/sources.yml": SOURCES,
    "seeds/customers.csv": "customer_id,country\n1,NL\n",
    "models/bronze/orders.sql": """\
        {{ config(materialized='streaming') }}
        select order_id, customer_id, amount, updated_at
        from {{ source('landing', 'orders') }}""",
    "models/silver/customer_history.sql": """\
        {{ config(strategy='merge', unique_key='customer_id', sequence_by='updated_at',
                  scd_type=2, materialized='incremental') }}
        select customer_id, updated_at from {{ ref('orders') }}""",
    "models/gold/current.sql": """\
        select h.customer_id, c.country
        from {{ ref('customer_history') }} as h
        join {{ ref('customers') }} as c on c.customer_id = h.customer_id
        where h.is_current""",
    "models/bronze/clicks.sql": "select * from {{ source('landing', 'clicks') }}",
}


def findings(project, files):
    compiled = compile_models(Invocation(project_dir=str(project({**GOOD, **files}))))
    assert compiled.checked is not None
    return [str(f) for f in compiled.checked.findings], compiled.checked.unchecked


def test_the_sample_and_a_correct_project_raise_nothing(project):
    said, unchecked = findings(project, {})
    assert said == []
    # a source without declared columns is not guessed at, and said so once
    assert unchecked == {"clicks": "the columns of source('landing', 'clicks') (declare its "
                                   "schema in models/sources.yml) are not known"}
    sample = CliRunner().invoke(main, ["compile", "--project-dir", str(ROOT)])
    assert sample.exit_code == 0 and "Error" not in sample.output


@pytest.mark.parametrize("sql, said", [
    ("select order_id,\n  amont\nfrom {{ ref('orders') }}",
     "models/gold/typo.sql:2:3: unknown column 'amont'; did you mean 'amount'?\n    amont"),
    ("select country2 from {{ ref('customers') }}",  # a seed's header, not built yet
     "models/gold/typo.sql:1:8: unknown column 'country2'; did you mean 'country'?"),
    ("select customer_id from {{ ref('orders') }} as o\n"
     "join {{ ref('customers') }} as c on c.customer_id = o.customer_id",
     "models/gold/typo.sql:1:8: column 'customer_id' is ambiguous: c and o both "
     "have it; qualify it, e.g. c.customer_id"),
    ("select x.order_id from {{ ref('orders') }} as o",
     "models/gold/typo.sql:1:10: no relation 'x' with a column 'order_id' in scope"),
    ("{{ config(materialized='table') }}\nselect valid_fro from {{ ref('customer_history') }}",
     "models/gold/typo.sql:2:8: unknown column 'valid_fro'; did you mean 'valid_from'?"),
])
def test_a_mistake_is_one_line_at_its_place_with_the_names_in_scope(project, sql, said):
    found, _ = findings(project, {"models/gold/typo.sql": sql})
    assert len(found) == 1 and found[0].startswith(said), found


def test_compile_exits_1_on_a_finding_and_static_checks_false_silences_it(project):
    root = project({**GOOD, "models/gold/typo.sql": "select amont from {{ ref('orders') }}"})
    result = CliRunner().invoke(main, ["compile", "--project-dir", str(root)])
    assert result.exit_code == 1
    assert "Error: models/gold/typo.sql:1:8: unknown column 'amont'; did you mean 'amount'?" \
        in result.output
    (root / "models/gold/typo.sql").write_text(
        "{{ config(static_checks=false) }}\nselect amont from {{ ref('orders') }}")
    assert CliRunner().invoke(main, ["compile", "--project-dir", str(root)]).exit_code == 0


def test_every_mistake_of_the_corpus_is_found_at_its_place_and_no_base_model_raises_one(
        project):
    # test_static_check_corpus.py builds the same models with Spark, which refuses each
    compiled = compile_models(Invocation(project_dir=str(project(corpus_files()))))
    assert compiled.checked is not None and compiled.checked.unchecked == {}
    said: dict[str, list[str]] = {}
    for finding in compiled.checked.findings:
        said.setdefault(finding.path, []).append(str(finding))
    assert sorted(said) == sorted(f"models/gold/{m.name}.sql" for m in MISTAKES)
    for mistake in MISTAKES:
        first = said[f"models/gold/{mistake.name}.sql"][0]
        where = f"models/gold/{mistake.name}.sql:"
        assert (first.startswith(where + mistake.said) if mistake.said[0].isdigit()
                else first.startswith(where) and mistake.said in first), (mistake.name, first)


def test_a_build_refuses_a_model_with_a_finding_before_spark_starts_and_skips_its_readers(
        project):
    # Every selected model refused: no JVM starts (the unit tier runs with no Java at all)
    root = project({**GOOD, "models/gold/typo.sql": "select amont from {{ ref('orders') }}",
                    "models/gold/reader.sql": "select * from {{ ref('typo') }}"})
    result = CliRunner().invoke(main, ["build", "-s", "typo+", "--project-dir", str(root)])
    assert result.exit_code == 1, result.output
    assert ("models/gold/typo.sql:1:8: unknown column 'amont'; did you mean 'amount'? (a "
            "static check: static_checks: false in its config if it is wrong)") in result.output
    assert "starting Spark" not in result.output and "Traceback" not in result.output
    assert not (root / "warehouse/gold/typo").exists()
    plan = CliRunner().invoke(main, ["plan", "--project-dir", str(root)])
    assert plan.exit_code == 1 and "ERROR: models/gold/typo.sql:1:8: unknown column" in \
        plan.output and "1 model(s) a build would refuse: typo" in plan.output
    listed = CliRunner().invoke(main, ["ls", "--project-dir", str(root)])
    assert listed.exit_code == 0 and "models/gold/typo.sql:1:8: unknown column 'amont'" in \
        listed.output
