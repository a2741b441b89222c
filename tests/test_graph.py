"""The DAG: order, cycles, and selection syntax."""

import pytest

from medallion_cli.core.errors import ProjectError, SelectionError
from medallion_cli.dag.graph import build_graph
from medallion_cli.dag.selection import select, select_tests
from medallion_cli.load.datatests import DataTest
from medallion_cli.load.project import load_project
from medallion_cli.load.rendering import render_project
from medallion_cli.load.sqlcheck import check_model_sql

MODELS = {
    "seeds/countries.csv": "code\nNL\n",
    "models/bronze/b1.sql": "select 1 as id",
    "models/bronze/b2.sql": "{{ config(tags=['nightly']) }}select 2 as id",
    "models/silver/s1.sql": "select * from {{ ref('b1') }} join {{ ref('countries') }} on true",
    "models/silver/s2.sql": "select * from {{ ref('b2') }}",
    "models/gold/g1.sql": "{{ config(materialized='view') }}"
                          "select * from {{ ref('s1') }} union all select * from {{ ref('s2') }}",
}
EVERY = {"countries", "b1", "b2", "s1", "s2", "g1"}


def graph_of(root):
    return build_graph(render_project(load_project(root)))


@pytest.mark.unit
def test_order_respects_dependencies(project):
    graph = graph_of(project(MODELS))
    order = list(graph.order)
    assert order.index("b1") < order.index("s1") < order.index("g1")
    assert order.index("countries") < order.index("s1")
    assert order.index("b2") < order.index("s2") < order.index("g1")
    assert graph.children["s1"] == ("g1",)


@pytest.mark.unit
@pytest.mark.parametrize("selectors,excludes,expected", [
    ((), (), {"countries", "b1", "b2", "s1", "s2", "g1"}),
    (("s1",), (), {"s1"}),
    (("+s1",), (), {"s1", "b1", "countries"}),
    (("s1+",), (), {"s1", "g1"}),
    (("+s1+",), (), {"s1", "b1", "countries", "g1"}),
    (("tag:nightly",), (), {"b2"}),
    (("tag:nightly+",), (), {"b2", "s2", "g1"}),
    (("layer:silver",), (), {"s1", "s2"}),
    (("path:models/bronze",), (), {"b1", "b2"}),
    (("path:models/silver/s2.sql",), (), {"s2"}),
    (("layer:silver g1",), (), {"s1", "s2", "g1"}),
    (("+g1",), ("layer:bronze",), {"countries", "s1", "s2", "g1"}),
    (("resource_type:seed",), (), {"countries"}),
    ((), ("resource_type:model",), {"countries"}),
    (("resource_type:test",), (), set()),
    # dbt's syntax: `,` intersects, N+ and +N limit depth, @, wildcards, config.KEY:VALUE
    (("tag:nightly+,layer:silver",), (), {"s2"}),
    (("s1 s2",), (), {"s1", "s2"}),
    (("1+g1",), (), {"g1", "s1", "s2"}),
    (("b1+1",), (), {"b1", "s1"}),
    (("2+g1",), ("1+s1",), {"g1", "s2", "b2"}),
    (("@s1",), (), EVERY),  # s1, g1, and all g1 needs (b2, s2 too)
    (("s*",), (), {"s1", "s2"}),
    (("?1",), ("g*",), {"b1", "s1"}),
    (("config.materialized:view",), (), {"g1"}),
    (("config.tags:nightly+",), (), {"b2", "s2", "g1"}),
    (("nothing_*",), (), set()),
])
def test_selection(project, selectors, excludes, expected):
    graph = graph_of(project(MODELS))
    chosen = select(graph, selectors, excludes)
    assert set(chosen) == expected
    assert chosen == [n for n in graph.order if n in expected]  # DAG order kept


@pytest.mark.unit
def test_unknown_selector_offers_closest(project):
    graph = graph_of(project(MODELS))
    with pytest.raises(SelectionError, match="did you mean 's1'"):
        select(graph, ("s11",))
    with pytest.raises(SelectionError, match="unknown selector method 'colour'"):
        select(graph, ("colour:red",))
    with pytest.raises(SelectionError, match="unknown resource type 'snapshot'"):
        select(graph, ("resource_type:snapshot",))
    with pytest.raises(SelectionError, match="no config key 'materialised'. did you mean "
                                             "'materialized'"):
        select(graph, ("config.materialised:view",))
    with pytest.raises(SelectionError, match="cannot read it as a selector"):
        select(graph, ("@+s1",))


@pytest.mark.unit
def test_resource_type_selects_and_excludes_data_tests(project):
    """As in dbt: `build --exclude resource_type:test` builds seeds and models only."""
    graph = graph_of(project(MODELS))
    tests = {"unique_s1_id": DataTest("unique_s1_id", "select 1", ("s1",), (), "m.yml", "k"),
             "g1_rows": DataTest("g1_rows", "select 1", ("g1",), (), "tests/g1_rows.sql", "k")}
    assert select_tests(graph, tests, (), ("resource_type:test",)) == []
    assert select_tests(graph, tests, ("resource_type:test",)) == ["unique_s1_id", "g1_rows"]
    assert select_tests(graph, tests, ("layer:silver",)) == ["unique_s1_id"]
    assert select(graph, ("resource_type:test",), (), tests) == []
    assert select_tests(graph, tests, ("unique_*",)) == ["unique_s1_id"]
    assert select_tests(graph, tests, ("s*",)) == ["unique_s1_id"]  # tests on s1 and s2
    assert select_tests(graph, tests, ("layer:gold,resource_type:test",)) == ["g1_rows"]
    assert select_tests(graph, tests, ("g1_rows",)) == ["g1_rows"]
    assert select(graph, ("g1_rows",), (), tests) == []


@pytest.mark.unit
def test_cycle_is_printed_in_flow_order(project):
    root = project({
        "models/a.sql": "select * from {{ ref('c') }}",
        "models/b.sql": "select * from {{ ref('a') }}",
        "models/c.sql": "select * from {{ ref('b') }}",
        "models/d.sql": "select * from {{ ref('a') }}",
    })
    with pytest.raises(ProjectError) as err:
        graph_of(root)
    assert "dependency cycle: a -> b -> c -> a" in str(err.value)


@pytest.mark.unit
def test_two_node_cycle(project):
    root = project({"models/a.sql": "select * from {{ ref('b') }}",
                    "models/b.sql": "select * from {{ ref('a') }}"})
    with pytest.raises(ProjectError, match=r"cycle: a -> b -> a"):
        graph_of(root)


@pytest.mark.unit
def test_disabled_model_is_left_out_and_refs_to_it_fail(project):
    root = project({"models/a.sql": "{{ config(enabled=false) }}select 1",
                    "models/b.sql": "select 1"})
    assert set(graph_of(root).nodes) == {"b"}
    root = project({"models/a.sql": "{{ config(enabled=false) }}select 1",
                    "models/b.sql": "select * from {{ ref('a') }}"})
    with pytest.raises(ProjectError, match="disabled"):
        graph_of(root)


def _check(root, name):
    graph = graph_of(root)
    check_model_sql(graph.nodes[name], graph.nodes)


@pytest.mark.unit
def test_bad_sql_names_file_and_line(project):
    root = project({"models/m.sql": "select a,\n  b\nfrom t where (\n"})
    with pytest.raises(ProjectError) as err:
        _check(root, "m")
    assert err.value.path == "models/m.sql" and err.value.line == 3
    assert "SQL does not parse" in str(err.value)


@pytest.mark.unit
def test_hard_coded_model_name_is_reported(project):
    root = project({"models/orders.sql": "select 1 as id",
                    "models/m.sql": "select *\nfrom orders"})
    with pytest.raises(ProjectError) as err:
        _check(root, "m")
    assert err.value.line == 2 and "ref('orders')" in str(err.value)


@pytest.mark.unit
def test_ctes_and_refs_pass_the_check(project):
    root = project({"models/orders.sql": "select 1 as id",
                    "models/m.sql": "with orders as (select * from {{ ref('orders') }}) "
                                    "select * from orders"})
    _check(root, "m")


@pytest.mark.unit
def test_more_than_one_statement_is_rejected(project):
    root = project({"models/m.sql": "select 1; drop table x"})
    with pytest.raises(ProjectError, match="exactly one SELECT"):
        _check(root, "m")
