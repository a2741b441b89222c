"""The corpus of mistakes (static_check_corpus.py) built by Spark with the static checks off:
Spark refuses every mistake the static checks report (test_static_checks.py shows they report
each one, at its place, with no finding on the base models), and builds every base model."""

import json

import pytest
from static_check_corpus import BASE, MISTAKES, ORDER, corpus_files

CHECKS_OFF = "name: corpus\nprofile: test\nmodels:\n  static_checks: false\n"


@pytest.mark.one_engine("Spark's analyzer refuses the SQL before either engine reads or "
                        "writes, and the contract is checked on the rows before the engine "
                        "writes them")
def test_spark_refuses_every_mistake_in_the_corpus_and_builds_every_base_model(project, build):
    root = project({**corpus_files(), "landing/orders/1.json": json.dumps(ORDER) + "\n"},
                   project_yml=CHECKS_OFF)
    results = build(root)
    refused = {m.name: results[m.name].message for m in MISTAKES
               if results[m.name].status == "error" and m.spark in results[m.name].message}
    assert sorted(refused) == sorted(m.name for m in MISTAKES), {
        m.name: (results[m.name].status, results[m.name].message) for m in MISTAKES
        if m.name not in refused}
    base = [path.rsplit("/", 1)[1][:-4] for path in BASE if path.endswith((".sql", ".csv"))]
    assert {name: results[name].status for name in base} == dict.fromkeys(base, "success"), {
        name: results[name].message[:400] for name in base if results[name].status != "success"}
    # and once more, with is_incremental() true in the incremental base model
    (root / "landing/orders/2.json").write_text(json.dumps({**ORDER, "order_id": 2}) + "\n")
    again = build(root, select=("+wide",))
    assert again["wide"].status == "success", again["wide"].message


def test_the_functions_the_static_checks_know_are_those_of_the_installed_spark(spark):
    # Spark's functions change with its version: refresh the file from this test's `found`
    from medallion_cli.report.query_checks import spark_functions

    found = {row.function for row in spark.sql("show system functions").collect()}
    assert spark_functions() == found, (sorted(found - spark_functions()),
                                        sorted(spark_functions() - found))
