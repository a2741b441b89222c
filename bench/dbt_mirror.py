"""The generated project of static_checks_bench.py / lag_project.py, mirrored as a dbt project
(the same model files, its sources in dbt's form, a dbt-spark profile that parse never
connects with), to time `dbt parse` beside `medallion compile` on the same models:

    python bench/dbt_mirror.py /tmp/checks --models 500
    farm-bench -n 5 -- dbt parse --no-partial-parse --project-dir /tmp/checks/dbt \\
        --profiles-dir /tmp/checks/dbt --vs 'medallion compile --project-dir /tmp/checks/medallion'
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import yaml
from lag_project import write

DBT_PROJECT = """\
name: mirror
profile: mirror
config-version: 2
model-paths: [models]
"""
PROFILE = """\
mirror:
  target: dev
  outputs:
    dev: {type: spark, method: thrift, host: 127.0.0.1, port: 10000, schema: mirror}
"""


def mirror(medallion: Path, dbt: Path) -> None:
    shutil.copytree(medallion / "models", dbt / "models")
    sources = yaml.safe_load((medallion / "models/sources.yml").read_text())["sources"]
    (dbt / "models/sources.yml").write_text(yaml.safe_dump({"version": 2, "sources": [
        {"name": s["name"], "tables": [{"name": t["name"]} for t in s["tables"]]}
        for s in sources]}))
    (dbt / "dbt_project.yml").write_text(DBT_PROJECT)
    (dbt / "profiles.yml").write_text(PROFILE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--models", type=int, default=500)
    args = parser.parse_args()
    write(args.folder / "medallion", args.models)
    mirror(args.folder / "medallion", args.folder / "dbt")


if __name__ == "__main__":
    main()
