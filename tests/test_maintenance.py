"""optimize, vacuum, show, history, restore: their effect on real Delta tables."""

import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import DELTA_SPARK_IN_SLOW_TIER, read_delta
from deltalake import DeltaTable
from helpers import BATCH_1, BATCH_2, BATCH_3, MODELS, expected_state, land, silver

from medallion_cli.cli.group import main
from medallion_cli.commands import maintain as maintenance
from medallion_cli.commands.invocation import Invocation
from medallion_cli.core.errors import MedallionError

# (history, restore, optimize, vacuum: test_engine_contract.py)
pytestmark = DELTA_SPARK_IN_SLOW_TIER


def files_on_disk(path):
    return sorted(p for p in path.glob("*.parquet"))


@pytest.fixture
def streamed(project, build):
    """Three builds, one landing file each: three versions of bronze and silver."""
    root = project(MODELS)
    for n, batch in enumerate((BATCH_1, BATCH_2, BATCH_3)):
        land(root, f"00{n}.json", batch)
        build(root)
    return root


def test_optimize_compacts_and_vacuum_removes_unreferenced_files(streamed, build):
    bronze = streamed / "warehouse/bronze/bronze_orders"
    assert len(DeltaTable(str(bronze)).file_uris()) == 3
    rows_before = read_delta(bronze)
    inv = Invocation(project_dir=str(streamed), select=("bronze_orders",))
    assert maintenance.optimize(inv) == [("bronze_orders", {"files_removed": 3, "files_added": 1})]
    assert len(DeltaTable(str(bronze)).file_uris()) == 1
    assert read_delta(bronze) == rows_before
    assert len(files_on_disk(bronze)) == 4  # old files stay until vacuum
    with pytest.raises(MedallionError, match="shorter than 168h"):
        maintenance.vacuum(inv, "0h")
    assert maintenance.vacuum(inv, "0h", allow_short_retention=True) == [("bronze_orders", 3)]
    assert len(files_on_disk(bronze)) == 1 and read_delta(bronze) == rows_before
    # the streaming silver model does not take the compaction for new rows
    land(streamed, "004.json", [{"order_id": 9, "status": "placed", "op": "I", "seq": 1}])
    build(streamed)
    assert silver(streamed) == expected_state(
        BATCH_1 + BATCH_2 + BATCH_3 + [{"order_id": 9, "status": "placed", "op": "I", "seq": 1}])


def test_show_history_and_restore(streamed):
    inv = Invocation(project_dir=str(streamed))
    versions = maintenance.history(inv, "silver_orders")
    assert [v.version for v in versions] == [2, 1, 0]
    assert [v.operation for v in versions[:2]] == ["MERGE", "MERGE"]
    # the table's first batch creates it: delta-rs commits Spark's staged files as a CREATE
    # TABLE with them in it, Delta Lake for Spark as a WRITE
    assert versions[2].operation in ("WRITE", "CREATE TABLE")
    first = maintenance.show(inv, "silver_orders", limit=100, as_of="0").to_pylist()
    assert sorted(r["order_id"] for r in first) == [1, 2, 3, 4, 5]
    assert len(maintenance.show(inv, "silver_orders", limit=2).to_pylist()) == 2
    new_version = maintenance.restore(inv, "silver_orders", 0)
    assert new_version == 3
    assert sorted(r["order_id"] for r in read_delta(
        streamed / "warehouse/silver/silver_orders")) == [1, 2, 3, 4, 5]
    assert maintenance.history(inv, "silver_orders", 1)[0].operation == "RESTORE"


def test_time_travel_errors(streamed, project):
    inv = Invocation(project_dir=str(streamed))
    with pytest.raises(MedallionError, match="no version 9"):
        maintenance.restore(inv, "silver_orders", 9)
    with pytest.raises(MedallionError, match="did you mean 'silver_orders'"):
        maintenance.history(inv, "silver_order")
    with pytest.raises(MedallionError, match="cannot read 'silver_orders' as of 77"):
        maintenance.show(inv, "silver_orders", as_of="77")
    root = project({"models/v.sql": "{{ config(materialized='view') }}select 1 as a",
                    "models/t.sql": "select 1 as a"})
    with pytest.raises(MedallionError, match="is a view: it has no versions"):
        maintenance.show(Invocation(project_dir=str(root)), "v", as_of="0")
    with pytest.raises(MedallionError, match="has no table yet"):
        maintenance.show(Invocation(project_dir=str(root)), "t")
    with pytest.raises(MedallionError, match="cannot run the --inline query: .*nope"):
        maintenance.show_inline(Invocation(project_dir=str(root)), "select nope from range(1)")


@pytest.mark.one_engine("a view's and --inline SQL is rendered and run by Spark, any engine")
def test_show_a_view_and_inline_sql(streamed, project):
    """dbt's `show`: a view's rows are its SQL run now; --inline runs SQL with ref() and
    macros over the built tables."""
    (streamed / "models/silver/big_orders.sql").write_text(
        "{{ config(materialized='view') }}"
        "select order_id from {{ ref('silver_orders') }} where order_id >= 4")
    (streamed / "macros").mkdir(exist_ok=True)
    (streamed / "macros/at_least.sql").write_text(
        "{% macro at_least(column, n) %}{{ column }} >= {{ n }}{% endmacro %}")
    inv = Invocation(project_dir=str(streamed))
    view = maintenance.show(inv, "big_orders", limit=100).to_pylist()
    assert sorted(r["order_id"] for r in view) == [4, 5, 6, 7]
    inline = maintenance.show_inline(
        inv, "select count(*) as n from {{ ref('big_orders') }} "
             "where {{ at_least('order_id', 5) }}").to_pylist()
    assert inline == [{"n": 3}]
    out = CliRunner().invoke(main, ["show", "--project-dir", str(streamed), "--inline",
                                    "select order_id from {{ ref('silver_orders') }} "
                                    "order by order_id", "--limit", "2"])
    assert out.exit_code == 0 and "order_id" in out.output, out.output
    assert CliRunner().invoke(main, ["show", "--project-dir", str(streamed)]).exit_code == 2
    # one CTE of a model, computed over its inputs: those before it too, not those after
    (streamed / "models/silver/by_status.sql").write_text(
        "with big as (select * from {{ ref('silver_orders') }} where order_id >= 4),\n"
        "counted as (select status, count(*) as n from big group by status),\n"
        "broken as (select nope from counted)\nselect * from counted")
    ctes = CliRunner().invoke(main, ["show", "by_status", "--cte", "counted", "--project-dir",
                                     str(streamed), "--limit", "10"])
    assert ctes.exit_code == 0 and "status" in ctes.output, ctes.output
    big = maintenance.show_cte(inv, "by_status", "big", limit=2).to_pylist()
    assert len(big) == 2 and {r["order_id"] >= 4 for r in big} == {True}
    with pytest.raises(MedallionError, match="the model 'by_status' has no CTE 'countd'; did "
                                             "you mean 'counted'?"):
        maintenance.show_cte(inv, "by_status", "countd")


# The embedded engine only: it keeps the Delta log with delta-rs, so these need no JVM; the
# delta-spark engine runs them through Spark (tested above through the same functions).
@pytest.mark.parametrize("engine_name", ["embedded"])
def test_cli_maintenance_commands_start_no_jvm(streamed, engine_name):
    code = ("import sys; from medallion_cli.cli import main\n"
            "for args in (['history', 'silver_orders'], ['show', 'silver_orders', '--as-of', '1'],"
            " ['optimize'], ['vacuum'], ['restore', 'bronze_orders', '--to', '0']):\n"
            "    try: main(args + ['--project-dir', sys.argv[1]])\n"
            "    except SystemExit as e: assert not e.code, (args, e.code)\n"
            "print('PYSPARK LOADED' if 'pyspark' in sys.modules else 'NO PYSPARK')\n")
    out = subprocess.run([sys.executable, "-c", code, str(streamed)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("NO PYSPARK")
    assert "bronze_orders restored to version 0 as version 4" in out.stdout  # 3 = optimize
    assert "v2     " in out.stdout and "MERGE" in out.stdout


@pytest.mark.one_engine("the retention is refused before an engine is asked to vacuum")
def test_cli_vacuum_refuses_short_retention(streamed):
    result = CliRunner().invoke(main, ["vacuum", "--retain", "1h", "--project-dir", str(streamed)])
    assert result.exit_code == 2 and "--allow-short-retention" in result.output


def test_streaming_auto_compaction_after_a_file_threshold(project, build):
    files = dict(MODELS)
    files["models/bronze/bronze_orders.sql"] = files["models/bronze/bronze_orders.sql"].replace(
        "materialized='streaming'", "materialized='streaming', optimize_after_files=2")
    root = project(files)
    for n, batch in enumerate((BATCH_1, BATCH_2, BATCH_3)):
        land(root, f"00{n}.json", batch)
    build(root)  # three bronze batches (maxFilesPerTrigger: 1), compacted once past two files
    bronze = DeltaTable(str(root / "warehouse/bronze/bronze_orders"))
    assert len(bronze.file_uris()) <= 2
    assert "OPTIMIZE" in {c["operation"] for c in bronze.history()}
    assert len(read_delta(root / "warehouse/bronze/bronze_orders")) == 12
    assert silver(root) == expected_state(BATCH_1 + BATCH_2 + BATCH_3)


@pytest.mark.one_engine("the policy decides when to call the engine's optimize and file_layout, "
                        "which test_engine_contract.py tests on both engines and stores")
def test_a_compaction_policy_compacts_past_its_threshold_rate_limited_and_status_shows_files(
        project, build):
    def with_policy(interval):
        files = dict(MODELS)
        files["models/bronze/bronze_orders.sql"] = files["models/bronze/bronze_orders.sql"].replace(
            "materialized='streaming'", "materialized='streaming', compaction={"
            f"'min_small_files': 3, 'min_interval': '{interval}'}}")
        return files

    root = project(with_policy("1 hour"))
    bronze = root / "warehouse/bronze/bronze_orders"
    for n, batch in enumerate((BATCH_1, BATCH_2, BATCH_3)):
        land(root, f"00{n}.json", batch)
    build(root)  # three micro-batches, three small files: compacted at the third
    assert len(DeltaTable(str(bronze)).file_uris()) == 1
    for n, batch in enumerate((BATCH_1, BATCH_2, BATCH_3)):
        land(root, f"01{n}.json", [{**row, "order_id": row["order_id"] + 100} for row in batch])
    results = build(root)  # past the threshold again, but within the hour since the last
    assert len(DeltaTable(str(bronze)).file_uris()) == 4
    assert "compacted" not in results["bronze_orders"].message
    operations = [c["operation"] for c in DeltaTable(str(bronze)).history()]
    assert operations.count("OPTIMIZE") == 1
    status = CliRunner().invoke(main, ["status", "-s", "bronze_orders", "--output", "json",
                                       "--project-dir", str(root)])
    shown = __import__("json").loads(status.output)[0]
    assert shown["files"] == 4 and shown["mean_file_bytes"] == shown["bytes"] / 4
    text = CliRunner().invoke(main, ["status", "-s", "bronze_orders", "--project-dir", str(root)])
    assert "4 data file(s)" in text.output and "a full read opens 4" in text.output
    # with no wait between compactions, the build that finds nothing new compacts the table
    for name, text in with_policy("0 seconds").items():
        (root / name).write_text(text)
    results = build(root)
    assert results["bronze_orders"].message.endswith(
        "compacted 4 files into 1 (4 small files (at least 3))")
    assert len(DeltaTable(str(bronze)).file_uris()) == 1
    assert len(read_delta(bronze)) == 24
    assert silver(root) == expected_state(
        BATCH_1 + BATCH_2 + BATCH_3
        + [{**row, "order_id": row["order_id"] + 100} for row in BATCH_1 + BATCH_2 + BATCH_3])


OPERATIONS = """\
{% macro count_orders(model, at_least=0) %}
  {% set rows = run_query("select count(*) as n from " ~ ref(model) ~ " where order_id >= "
                          ~ at_least) %}
  {% do log(model ~ " has " ~ rows[0]['n'] ~ " orders from " ~ at_least) %}
  {{ rows[0].n }}
{% endmacro %}
{% macro broken_query() %}{% do run_query("select nope from range(1)") %}{% endmacro %}
"""


@pytest.mark.one_engine("macros, run_query and their errors are rendering's, not an engine's")
def test_run_operation_calls_a_macro_with_run_query_and_log(streamed):
    """dbt's run-operation: a macro with --args, run_query() over the built tables, log()."""
    (streamed / "macros").mkdir(exist_ok=True)
    (streamed / "macros/operations.sql").write_text(OPERATIONS)
    run = CliRunner().invoke(main, ["run-operation", "count_orders", "--project-dir",
                                    str(streamed), "--args", "{model: silver_orders, at_least: 5}"])
    assert run.exit_code == 0, run.output
    assert run.output.splitlines() == ["silver_orders has 3 orders from 5", "3"]
    unknown = CliRunner().invoke(main, ["run-operation", "count_order", "--project-dir",
                                        str(streamed)])
    assert unknown.exit_code != 0
    assert "no macro named 'count_order'. did you mean 'count_orders'?" in unknown.output
    broken = CliRunner().invoke(main, ["run-operation", "broken_query", "--project-dir",
                                       str(streamed)])
    assert broken.exit_code != 0
    assert "run_query in macro 'broken_query' failed" in broken.output and "nope" in broken.output
    bad_args = CliRunner().invoke(main, ["run-operation", "count_orders", "--project-dir",
                                         str(streamed), "--args", "[1, 2]"])
    assert "--args must be a mapping" in bad_args.output


def test_optimize_zorders_a_table_by_its_models_zorder_by(streamed):
    """OPTIMIZE ZORDER BY, on both engines: the rows rewritten clustered on the columns."""
    bronze = streamed / "warehouse/bronze/bronze_orders"
    rows_before = read_delta(bronze)
    (streamed / "models/zorder.yml").write_text(
        "models:\n  - name: bronze_orders\n    config: {zorder_by: [status, order_id]}\n")
    inv = Invocation(project_dir=str(streamed), select=("bronze_orders",))
    assert maintenance.optimize(inv) == [("bronze_orders", {"files_removed": 3, "files_added": 1})]
    last = DeltaTable(str(bronze)).history(1)[0]
    assert last["operation"] == "OPTIMIZE"
    # Delta Lake for Spark records the columns; delta-rs records that it planned a Z-order
    assert ("status" in str(last["operationParameters"].get("zOrderBy"))
            or last["operationMetrics"].get("plannerStrategy") == "zOrder"), last
    assert read_delta(bronze) == rows_before
    (streamed / "models/zorder.yml").write_text(
        "models:\n  - name: bronze_orders\n    config: {zorder_by: [region]}\n")
    with pytest.raises(MedallionError, match="zorder_by names region, which table "
                                             "'bronze_orders' does not have") as raised:
        maintenance.optimize(inv)
    assert "models/bronze/bronze_orders.sql" in str(raised.value)
