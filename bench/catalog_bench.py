"""Registering a project's tables in a Hive Metastore service: what a build spends on it.

    python bench/catalog_bench.py --models 25 --repeat 3
    python bench/catalog_bench.py --models 25 --repeat 3 --engine delta-spark

Starts a Hive Metastore on PostgreSQL on loopback (medallion_cli/testing/hive_metastore.py) and
makes a project of N table models (a few rows each). Then, alternately, each run from an empty
warehouse and each its own process (JVM start included): `medallion build` on a target with no
metastore, and on one with `metastore: thrift://...`. The report gives each side's median and
the difference, the seconds registration adds to a build of N tables. It also times, in this
process, what the embedded engine's build asks of the service per table (a lookup before the
write, then the registration), N times: the registrations alone, without the build's noise.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from medallion_cli.engines.catalog import Docs
from medallion_cli.engines.thrift_catalog import ThriftCatalog
from medallion_cli.testing import hive_metastore

PROFILE = """\
bench:
  target: plain
  outputs:
    plain: &plain
      engine: {engine}
      warehouse: warehouse
      threads: 2
      spark: {{master: "local[2]", conf: {{spark.sql.shuffle.partitions: 2}}}}
    catalog:
      <<: *plain
      metastore: {uri}
"""


def project(root: Path, models: int, engine: str, uri: str) -> Path:
    (root / "models/silver").mkdir(parents=True)
    (root / "profiles").mkdir()
    (root / "medallion_project.yml").write_text("name: bench\nprofile: bench\n")
    (root / "profiles/profiles.yml").write_text(PROFILE.format(engine=engine, uri=uri))
    for i in range(models):
        (root / f"models/silver/table_{i:02d}.sql").write_text(
            f"select {i} as id, 'x' as name union all select {i + 1}, 'y'")
    return root


def build_seconds(root: Path, target: str) -> float:
    shutil.rmtree(root / "warehouse", ignore_errors=True)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "medallion_cli.cli", "build", "-t", target,
                           "--project-dir", str(root), "--no-daemon"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stdout + done.stderr)
    return time.perf_counter() - started


def registrations_seconds(uri: str, models: int, folder: Path) -> float:
    catalog = ThriftCatalog(uri)
    started = time.perf_counter()
    for i in range(models):
        assert catalog.lookup("registered", f"table_{i:02d}") is None
        catalog.register_table("registered", f"table_{i:02d}", str(folder / f"t{i}"), True,
                               Docs())
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=25)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--engine", default="embedded", choices=["embedded", "delta-spark"])
    args = parser.parse_args()
    metastore = hive_metastore.start()
    try:
        with tempfile.TemporaryDirectory() as folder:
            alone = registrations_seconds(metastore.uri, args.models, Path(folder))
            print(f"{args.models} lookups and registrations in this process: {alone:.2f} s")
            root = project(Path(folder) / "project", args.models, args.engine, metastore.uri)
            times: dict[str, list[float]] = {"plain": [], "catalog": []}
            for round_ in range(args.repeat):
                for target in ("plain", "catalog") if round_ % 2 == 0 else ("catalog", "plain"):
                    times[target].append(build_seconds(root, target))
                    print(f"round {round_ + 1} {target}: {times[target][-1]:.1f} s", flush=True)
    finally:
        metastore.stop()
    plain, catalog = (statistics.median(times[t]) for t in ("plain", "catalog"))
    print(f"median build of {args.models} tables ({args.engine}): no metastore {plain:.1f} s, "
          f"registered {catalog:.1f} s: {catalog - plain:+.1f} s ({catalog / plain:.2f}x)")


if __name__ == "__main__":
    main()
