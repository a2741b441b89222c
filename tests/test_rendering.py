"""Rendering: the Jinja context (ref, source, config, var, env_var, this, is_incremental, macros)."""

import jinja2
import pytest
from conftest import PROFILE

from medallion_cli.core.errors import ProjectError
from medallion_cli.load.project import load_project
from medallion_cli.load.rendering import Renderer, render_project

SOURCES = """\
sources:
  - name: landing
    path: landing
    tables:
      - name: events
        format: json
"""


def compiled(root, **kw):
    return render_project(load_project(root, cli_vars=kw.pop("cli_vars", None)), **kw)


@pytest.mark.unit
def test_ref_source_var_env_var_and_macros(project, monkeypatch):
    monkeypatch.setenv("REGION", "eu")
    root = project({
        "models/sources.yml": SOURCES,
        "macros/a.sql": "{% macro cents(col) %}{{ col }} / 100{% endmacro %}",
        # a macro in one file calling a macro from another file
        "macros/b.sql": "{% macro euros(col) %}round({{ cents(col) }}, 2){% endmacro %}",
        "models/bronze/raw.sql": "select * from {{ source('landing', 'events') }}",
        "models/silver/clean.sql": """\
            select {{ euros('amount') }} as amount, '{{ var("country") }}' as country,
                   '{{ env_var("REGION") }}' as region, '{{ env_var("NOPE", "dflt") }}' as d
            from {{ ref('raw') }}
        """,
    }, project_yml="name: p\nprofile: test\nvars: {country: NL}\n")
    nodes = compiled(root)
    assert nodes["raw"].sql.strip() == "select * from `landing__events`"
    assert nodes["raw"].sources == (("landing", "events"),)
    clean = nodes["clean"]
    assert clean.refs == ("raw",)
    assert "round(amount / 100, 2) as amount" in clean.sql
    assert "'NL' as country" in clean.sql and "'eu' as region" in clean.sql
    assert "'dflt' as d" in clean.sql
    assert "from `raw`" in clean.sql
    assert clean.file.layer == "silver"


@pytest.mark.unit
def test_cli_vars_override_project_vars(project):
    root = project({"models/m.sql": "select '{{ var(\"country\") }}' as c"},
                   project_yml="name: p\nprofile: test\nvars: {country: NL}\n")
    assert "'DE' as c" in compiled(root, cli_vars={"country": "DE"})["m"].sql


@pytest.mark.unit
def test_config_layers_file_wins_over_yaml_wins_over_folder(project):
    root = project({
        "models/silver/a.sql": "{{ config(unique_key='id') }}select 1 as id",
        "models/silver/b.sql": "select 1 as id",
        "models/props.yml": "models:\n  - name: b\n    config: {materialized: view, tags: [x]}\n",
    }, project_yml="name: p\nprofile: test\nmodels:\n  tags: [all]\n  silver:\n"
                   "    materialized: incremental\n    strategy: merge\n    unique_key: key\n")
    nodes = compiled(root)
    assert nodes["a"].config.materialized == "incremental"
    assert nodes["a"].config.unique_key == ("id",)
    assert nodes["b"].config.materialized == "view"
    assert nodes["b"].config.tags == ("all", "x")


@pytest.mark.unit
def test_this_and_is_incremental_follow_table_and_full_refresh(project):
    root = project({"models/m.sql": """\
        {{ config(materialized='incremental') }}
        select 1 as id {% if is_incremental() %}from {{ this }}{% endif %}
    """})
    assert compiled(root)["m"].is_incremental is False
    (root / "warehouse/models/m/_delta_log").mkdir(parents=True)
    (root / "warehouse/models/m/_delta_log/00000000000000000000.json").write_text("{}")
    node = compiled(root)["m"]
    assert node.is_incremental is True and "from `m`" in node.sql
    assert compiled(root, full_refresh=True)["m"].is_incremental is False
    # early commits cleaned up: the checkpoint still makes it a table
    (root / "warehouse/models/m/_delta_log/00000000000000000000.json").unlink()
    (root / "warehouse/models/m/_delta_log/00000000000000000003.checkpoint.parquet").touch()
    assert compiled(root)["m"].is_incremental is True


@pytest.mark.unit
def test_is_incremental_on_a_remote_warehouse_asks_the_engine_or_is_false(project):
    root = project({"models/m.sql": """\
        {{ config(materialized='incremental') }}
        select 1 as id {% if is_incremental() %}from {{ this }}{% endif %}
    """}, profile=PROFILE.replace("warehouse: warehouse", "warehouse: s3a://b/lake"))
    proj = load_project(root)
    assert Renderer(proj).render(proj.nodes["m"]).is_incremental is False  # nothing is read
    asked = []
    building = Renderer(proj, table_exists=lambda location: asked.append(location) or True)
    assert building.render(proj.nodes["m"]).is_incremental is True
    assert asked[0] == "s3a://b/lake/models/m"


@pytest.mark.unit
def test_unknown_ref_names_file_line_and_closest(project):
    root = project({"models/orders.sql": "select 1 as id",
                    "models/m.sql": "select *\nfrom {{ ref('order') }}"})
    with pytest.raises(ProjectError) as err:
        compiled(root)
    assert err.value.path == "models/m.sql" and err.value.line == 2
    assert "ref('order')" in str(err.value) and "did you mean 'orders'" in str(err.value)


@pytest.mark.unit
def test_unknown_source_is_an_error(project):
    root = project({"models/sources.yml": SOURCES,
                    "models/m.sql": "select * from {{ source('landing', 'event') }}"})
    with pytest.raises(ProjectError, match="landing.events"):
        compiled(root)


@pytest.mark.unit
def test_unknown_config_key_lists_valid_keys(project):
    root = project({"models/m.sql": "{{ config(materialised='table') }}select 1"})
    with pytest.raises(ProjectError) as err:
        compiled(root)
    assert err.value.path == "models/m.sql"
    assert "materialised" in str(err.value) and "did you mean 'materialized'" in str(err.value)
    assert "valid keys: materialized, strategy" in str(err.value)


@pytest.mark.unit
def test_bad_config_value_and_merge_without_key(project):
    root = project({"models/m.sql": "{{ config(materialized='tabel') }}select 1"})
    with pytest.raises(ProjectError, match="'view', 'table', 'incremental'"):
        compiled(root)
    root = project({"models/m.sql":
                    "{{ config(materialized='incremental', strategy='merge') }}select 1"})
    with pytest.raises(ProjectError, match="needs a unique_key"):
        compiled(root)


@pytest.mark.unit
def test_jinja_syntax_error_names_file_and_line(project):
    root = project({"models/m.sql": "select 1\n{% if %}\n"})
    with pytest.raises(ProjectError) as err:
        compiled(root)
    assert err.value.path == "models/m.sql" and err.value.line == 2


@pytest.mark.unit
def test_macro_syntax_error_names_the_macro_file(project):
    root = project({"macros/bad.sql": "{% macro x( %}", "models/m.sql": "select 1"})
    with pytest.raises(ProjectError) as err:
        compiled(root)
    assert err.value.path == "macros/bad.sql"


@pytest.mark.unit
def test_missing_var_says_how_to_set_it(project):
    root = project({"models/m.sql": "select {{ var('missing') }}"})
    with pytest.raises(ProjectError, match="--vars"):
        compiled(root)


@pytest.mark.unit
def test_templates_compile_once_a_process_and_again_when_edited(project, monkeypatch):
    """Every command, and each --watch refresh, renders the project again: unchanged files
    are not compiled again, an edited one is, whatever its modification time says."""
    compiles = []
    compile_source = jinja2.Environment.compile
    monkeypatch.setattr(jinja2.Environment, "compile",
                        lambda env, source, *a, **kw: compiles.append(source)
                        or compile_source(env, source, *a, **kw))
    root = project({"macros/a.sql": "{% macro cents(col) %}{{ col }} / 100{% endmacro %}",
                    "models/m.sql": "select {{ cents('amount') }} as amount"})
    assert "amount / 100 as amount" in compiled(root)["m"].sql
    assert any("macro cents" in s for s in compiles)
    compiles.clear()
    assert "amount / 100 as amount" in compiled(root)["m"].sql
    assert compiles == []
    (root / "models/m.sql").write_text("select {{ cents('price') }} as price")
    assert "price / 100 as price" in compiled(root)["m"].sql
    assert compiles == ["select {{ cents('price') }} as price"]
