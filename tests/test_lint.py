"""`medallion lint` and `medallion format` (commands/lint.py): sqlfluff on the models as
written, Jinja rendered with dbt's builtins and the project's macros, each finding at the
file's own line; the project's .sqlfluff wins. No JVM: the unit tier."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from medallion_cli.cli import main
from medallion_cli.commands import Invocation, format_models, lint_models

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parent.parent

MODEL = """\
{{ config(materialized='incremental') }}
select order_id,amount
from {{ ref('orders') }}
{% if is_incremental() %}
where amount > {{ at_least() }}
{% endif %}
"""
FILES = {
    "macros/limits.sql": "{% macro at_least() %}10{% endmacro %}",
    "models/orders.sql": "select 1 as order_id, 2.5 as amount",
    "models/big.sql": MODEL,
    "models/changes.sql": "select order_id, _change_type\n"
                          "from {{ ref('orders', changes=true) }}\n",
}


def test_findings_are_at_the_lines_of_the_file_as_written(project):
    root = project(FILES)
    found, fixed = lint_models(Invocation(project_dir=str(root)))
    assert fixed == []
    said = {(f.path, f.line, f.code) for f in found}
    assert ("models/big.sql", 2, "LT01") in said  # `order_id,amount`: no space after the comma
    assert not {f.code for f in found} & {"TMP", "PRS"}, found  # Medallion's Jinja renders
    result = CliRunner().invoke(main, ["lint", "--project-dir", str(root)])
    assert result.exit_code == 1
    assert "models/big.sql:2:17: LT01 Expected single whitespace between comma ',' and " \
           "naked identifier." in result.output
    # the project's own .sqlfluff wins over Medallion's defaults
    (root / ".sqlfluff").write_text("[sqlfluff]\nexclude_rules = LT01\n")
    again, _ = lint_models(Invocation(project_dir=str(root)))
    assert "LT01" not in {f.code for f in again}


def test_format_lays_out_the_sql_and_keeps_the_jinja(project):
    root = project(FILES)
    inv = Invocation(project_dir=str(root), select=("big",))
    check = CliRunner().invoke(main, ["format", "--check", "--project-dir", str(root),
                                      "-s", "big"])
    assert check.exit_code == 1 and "would reformat models/big.sql" in check.output
    assert (root / "models/big.sql").read_text() == MODEL  # --check changes nothing
    assert format_models(inv) == ["models/big.sql"]
    laid_out = (root / "models/big.sql").read_text()
    assert "select\n    order_id,\n    amount\n" in laid_out and "{{ ref('orders') }}" in laid_out
    assert "{% if is_incremental() %}" in laid_out and "{{ at_least() }}" in laid_out
    assert format_models(inv, check=True) == []


def test_the_sample_lints_with_every_model_rendered_and_parsed():
    found, _ = lint_models(Invocation(project_dir=str(ROOT)))
    assert not [f for f in found if f.code in ("TMP", "PRS")], found


def test_without_sqlfluff_the_error_says_what_to_install(project, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "sqlfluff.core", None)  # as if not installed
    result = CliRunner().invoke(main, ["lint", "--project-dir", str(project(FILES))])
    assert result.exit_code == 2
    assert "medallion lint and format need sqlfluff" in result.output
    assert "pip install 'medallion-cli[lint]'" in result.output
