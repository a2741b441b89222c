"""Dagster assets from a Medallion project (`pip install 'medallion-cli[dagster]'`): one asset
per model and seed, keyed [layer, name] and grouped by layer, with the DAG's dependencies; each
data test an asset check on the node it checks. Materializing all or a subset runs `medallion
build -s <the selected nodes>` in Dagster's process (their data tests after them), and each
node's rows, version and seconds become its materialization's metadata. A failed node fails the
run, after the nodes that succeeded are recorded.

    import dagster as dg
    from medallion_cli.integrations.dagster import medallion_assets

    defs = dg.Definitions(assets=[medallion_assets("/srv/lakehouse", target="prod")])
"""

# (no `from __future__ import annotations`: Dagster reads the context's annotation as a type)
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import dagster as dg

from .. import commands
from ..run.runner import NodeResult
from .project_graph import project_graph

DONE = ("success", "up_to_date", "warn")


def medallion_assets(project_dir: str, target: str | None = None,
                     profiles_dir: str | None = None, name: str = "medallion"
                     ) -> dg.AssetsDefinition:
    inv = commands.Invocation(project_dir=project_dir, profiles_dir=profiles_dir, target=target)
    nodes, checks = project_graph(inv)
    keys = {n.name: dg.AssetKey([n.layer, n.name]) for n in nodes}
    specs = [dg.AssetSpec(keys[n.name], deps=[keys[p] for p in n.parents],
                          description=n.description or None, group_name=n.layer,
                          kinds={"spark", "delta"}, skippable=True) for n in nodes]
    check_specs = [dg.AssetCheckSpec(c.name, asset=keys[c.node]) for c in checks]

    # (mypy does not follow Dagster's imports, pyproject.toml: its decorator is untyped there)
    @dg.multi_asset(  # type: ignore[untyped-decorator]
        name=name, specs=specs, check_specs=check_specs, can_subset=True)
    def _build(context: dg.AssetExecutionContext) -> Iterator[Any]:
        chosen = [n for n, key in keys.items() if key in context.selected_asset_keys]
        results = {r.name: r for r in commands.build(replace(inv, select=tuple(chosen)),
                                                     "build")}
        for node in chosen:
            if node in results and results[node].status in DONE:
                yield dg.MaterializeResult(asset_key=keys[node],
                                           metadata=_metadata(results[node]))
        for check in checks:
            result = results.get(check.name)
            if result is not None and dg.AssetCheckKey(keys[check.node], check.name) in (
                    context.selected_asset_check_keys):
                yield dg.AssetCheckResult(
                    asset_key=keys[check.node], check_name=check.name,
                    passed=result.status in ("success", "up_to_date"),
                    severity=dg.AssetCheckSeverity.WARN if check.severity == "warn"
                    else dg.AssetCheckSeverity.ERROR,
                    metadata={"failing rows": result.rows or 0})
        failed = [r for r in results.values() if r.failed and r.kind != "test"]
        if failed:
            raise dg.Failure("; ".join(f"{r.name}: {r.message}" for r in failed))

    return _build


def _metadata(result: NodeResult) -> dict[str, Any]:
    found = {"status": result.status, "rows written": result.rows,
             "Delta version": result.version, "seconds": round(result.seconds, 2)}
    return {k: v for k, v in found.items() if v is not None}
