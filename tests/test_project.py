"""Project loading: project file, profiles and targets, per-folder config, property files."""

import pytest
from conftest import PROFILE

from medallion_cli.core.errors import ProjectError
from medallion_cli.load.project import load_project


@pytest.mark.unit
def test_profile_target_and_env_var(project, monkeypatch):
    monkeypatch.setenv("WH", "/tmp/somewhere")
    root = project({}, profile=PROFILE + """\
    other:
      engine: embedded
      warehouse: "{{ env_var('WH') }}"
      threads: 4
      spark: {master: "local[1]", conf: {spark.x: 1}}
""")
    default = load_project(root).target
    assert default.name == "local" and default.warehouse == str(root / "warehouse")
    other = load_project(root, target="other").target
    assert str(other.warehouse) == "/tmp/somewhere"
    assert other.threads == 4 and other.spark_master == "local[1]"
    assert other.spark_conf == {"spark.x": "1"}


@pytest.mark.unit
def test_missing_profile_and_target(project, tmp_path):
    root = project({}, project_yml="name: p\nprofile: tst\n")
    with pytest.raises(ProjectError) as err:
        load_project(root)
    assert "profile 'tst' not found" in str(err.value) and "did you mean 'test'" in str(err.value)
    assert err.value.path.endswith("profiles/profiles.yml")
    root = project({})
    with pytest.raises(ProjectError, match=r"target 'prod' not found(.|\n)*targets here: local"):
        load_project(root, target="prod")
    with pytest.raises(ProjectError, match="profiles file not found"):
        load_project(root, profiles_dir=tmp_path / "nowhere")


@pytest.mark.unit
def test_missing_project_file(tmp_path):
    with pytest.raises(ProjectError, match="no medallion_project.yml"):
        load_project(tmp_path)


@pytest.mark.unit
def test_invalid_yaml_names_line(project):
    root = project({"models/props.yml": "models:\n  - name: [unclosed\n"})
    with pytest.raises(ProjectError) as err:
        load_project(root)
    assert err.value.path.endswith("props.yml") and err.value.line is not None


@pytest.mark.unit
def test_folder_config_rejects_unknown_keys(project):
    root = project({"models/silver/m.sql": "select 1"},
                   project_yml="name: p\nprofile: test\nmodels:\n  silver:\n    materalized: view\n")
    with pytest.raises(ProjectError) as err:
        load_project(root)
    assert err.value.path == "medallion_project.yml" and "materalized" in str(err.value)


@pytest.mark.unit
def test_duplicate_names_and_orphan_properties(project):
    root = project({"models/a/x.sql": "select 1", "seeds/x.csv": "a\n1\n"})
    with pytest.raises(ProjectError, match="two files define 'x'"):
        load_project(root)
    root = project({"models/x.sql": "select 1",
                    "models/props.yml": "models:\n  - name: y\n"})
    with pytest.raises(ProjectError, match="properties given for 'y'"):
        load_project(root)


@pytest.mark.unit
def test_table_paths_follow_layer_and_name(project):
    root = project({"models/gold/g.sql": "select 1", "seeds/s.csv": "a\n1\n"})
    proj = load_project(root)
    assert proj.table_path(proj.nodes["g"]) == str(root / "warehouse/gold/g")
    assert proj.table_path(proj.nodes["s"]) == str(root / "warehouse/seeds/s")


@pytest.mark.unit
@pytest.mark.parametrize("project_yml, profile_edit, said, line", [
    ("name: p\nprofile: test\nmodles: {x: 1}\n", None,
     "medallion_project.yml, line 3: unknown key 'modles'. did you mean 'models'", 3),
    ("name: p\nprofile: test\nvarz: {a: 1}\n", None, "unknown key 'varz'. did you mean 'vars'",
     3),
    ("name: p\nprofile: test\nvarz: {a: 1}\nmodles: {x: 1}\n", None,  # both, not one per try
     "unknown keys 'varz' (did you mean 'vars'?); 'modles' (did you mean 'models'", 3),
    (None, ("warehouse: warehouse", "warehuose: warehouse"),
     "profile 'test', target 'local': unknown key 'warehuose'. did you mean 'warehouse'", 6),
    (None, ('master: "local[2]"', 'mastr: "local[2]"'),
     "profile 'test', target 'local': unknown spark key 'mastr'. did you mean 'master'", 8),
])
def test_every_project_and_target_key_is_known_or_refused(project, project_yml, profile_edit,
                                                          said, line):
    kw = {"project_yml": project_yml} if project_yml else {}
    if profile_edit:
        kw["profile"] = PROFILE.replace(*profile_edit)
    root = project({}, **kw)
    with pytest.raises(ProjectError) as err:
        load_project(root)
    assert said in str(err.value) and err.value.line == line, str(err.value)


@pytest.mark.unit
def test_a_dbt_project_files_own_keys_are_tolerated(project):
    root = project({}, project_yml="name: p\nversion: '1.0'\nconfig-version: 2\nprofile: test\n"
                                   "target-path: target\nanalysis-paths: [analyses]\n")
    assert load_project(root).name == "p"


@pytest.mark.unit
@pytest.mark.parametrize("sql, said, line", [
    ("{{ config(materialized='table', incremental_by=42) }}select 1 as id",
     "models/a.sql: config 'incremental_by' is 42", None),
    ("{{ config(incremental_by='id', incremental_min_rows=-1) }}select 1 as id",
     "models/a.sql: config 'incremental_min_rows' is -1; it must be a whole number of 0 or more",
     None),
    ("select 1 as id,\n  {{ 1 // 0 }} as broken",
     "models/a.sql, line 2: cannot render: ZeroDivisionError: integer division or modulo by "
     "zero", 2),
])
def test_values_a_user_can_write_are_errors_naming_the_file_not_tracebacks(project, sql, said,
                                                                           line):
    from medallion_cli import commands

    root = project({"models/a.sql": sql})
    with pytest.raises(ProjectError) as err:
        commands.list_nodes(commands.Invocation(project_dir=str(root)))
    assert str(err.value).startswith(said) and err.value.line == line, str(err.value)


@pytest.mark.unit
@pytest.mark.parametrize("written, kept", [(None, 1_000_000), (0, 0), (5000, 5000)])
def test_incremental_min_rows_written_as_null_is_the_default_not_a_null(written, kept):
    """`incremental_min_rows: null` in a property file means what leaving it out means (a null
    reached the per-group build's comparison with an input's row count); 0 stays 0."""
    from medallion_cli.load.model_config import resolve_config

    raw = {"materialized": "table", "incremental_by": "day", "incremental_min_rows": written}
    assert resolve_config(raw, "models/gold/g.sql").incremental_min_rows == kept
    with pytest.raises(ProjectError, match="incremental_min_rows' is -1"):
        resolve_config({**raw, "incremental_min_rows": -1}, "models/gold/g.sql")
