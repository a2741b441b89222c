"""The commands that build and check: build (and --watch), run, seed, test, retry, and the
looks that build nothing: compile, ls, plan, lint and format; and the language server (lsp).
"""

from __future__ import annotations

import json
from dataclasses import replace

import click

from .. import commands
from .group import (
    EMPTY,
    LOG_FORMAT,
    _report,
    _warn,
    backfill,
    common_options,
    event_range,
    flow_reset,
    main,
    reset_flow_options,
    running_options,
    servable,
    waits_for_lock,
)


@main.command(help="Load seeds, then build models, in DAG order. With --watch, keep streaming "
                   "models running on their trigger and rebuild batch models when their inputs "
                   "change, until Ctrl-C.")
@common_options
@servable
@running_options
@waits_for_lock
@click.option("--watch", is_flag=True,
              help="Keep running: streaming models on their processing-time trigger "
                   "(default 10 seconds), batch models refreshed when inputs change.")
@click.option("--metrics-port", type=int, default=None,
              help="With --watch: serve the tables' rows, files, bytes and achieved lags for "
                   "Prometheus at http://127.0.0.1:PORT/metrics.")
@click.option("--rerun-tests", is_flag=True,
              help="Run data tests that passed on their inputs as they are now too (by "
                   "default those are reported up to date).")
@EMPTY
@event_range
@reset_flow_options
@LOG_FORMAT
def build(inv: commands.Invocation, debug: bool, watch: bool, metrics_port: int | None,
          rerun_tests: bool, empty: bool, start: str | None, end: str | None,
          reset_flow: bool, from_version: int | None, from_timestamp: str | None,
          from_earliest: bool, log_format: str) -> None:
    if metrics_port is not None and not watch:
        raise click.UsageError("--metrics-port serves the figures while --watch runs: add --watch")
    inv = replace(flow_reset(backfill(inv, start, end), reset_flow, from_version,
                             from_timestamp, from_earliest),
                  rerun_tests=rerun_tests, empty=empty, metrics_port=metrics_port)
    _report(lambda report: commands.build(inv, "build", ("seed", "model"), report, watch), debug,
            log_format, watch)


@main.command(help="Build models only (no seeds), in DAG order.")
@common_options
@servable
@running_options
@waits_for_lock
@EMPTY
@event_range
@reset_flow_options
@LOG_FORMAT
def run(inv: commands.Invocation, debug: bool, empty: bool, start: str | None, end: str | None,
        reset_flow: bool, from_version: int | None, from_timestamp: str | None,
        from_earliest: bool, log_format: str) -> None:
    inv = replace(flow_reset(backfill(inv, start, end), reset_flow, from_version,
                             from_timestamp, from_earliest), empty=empty)
    _report(lambda report: commands.build(inv, "run", ("model",), report), debug, log_format)


@main.command(help="Load seeds/*.csv into Delta tables; a seed reloads when its file changed.")
@common_options
@servable
@running_options
@waits_for_lock
@LOG_FORMAT
def seed(inv: commands.Invocation, debug: bool, log_format: str) -> None:
    _report(lambda report: commands.build(inv, "seed", ("seed",), report), debug, log_format)


@main.command(help="Print the rendered Spark SQL of the selected models (no Spark started). "
                   "Also written to target/compiled/. Each model's SELECT is checked against "
                   "its inputs' columns; exit 1 on a finding.")
@common_options
def compile(inv: commands.Invocation, debug: bool) -> None:
    compiled = commands.compile_models(inv, _warn)
    if compiled.note:
        click.secho(f"note: {compiled.note}", fg="yellow", err=True)
    for node in compiled.nodes:
        click.echo(click.style(f"-- {node.name} ({node.file.rel_path})", fg="cyan"))
        click.echo(compiled.sql[node.name].strip() + "\n")
    checked = compiled.checked
    if checked is None:
        return
    for name, why in checked.unchecked.items():
        click.secho(f"note: {name} not checked before Spark: {why}", fg="yellow", err=True)
    for finding in checked.findings:
        click.secho(f"Error: {finding}", fg="red", err=True)
    if checked.findings:
        raise SystemExit(1)


@main.command(help="Check the selected models' SQL with sqlfluff (Spark's dialect, the "
                   "project's .sqlfluff when it has one), each finding at its line in the "
                   "model's file; --fix fixes what sqlfluff can. Exit 1 on a finding left. "
                   "Needs pip install 'medallion-cli[lint]'.")
@common_options
@click.option("--fix", is_flag=True, help="Fix what sqlfluff can, in the files.")
def lint(inv: commands.Invocation, debug: bool, fix: bool) -> None:
    found, fixed = commands.lint_models(inv, fix)
    for path in fixed:
        click.echo(f"fixed {path}")
    for finding in found:
        click.echo(str(finding))
    if found:
        raise SystemExit(1)


@main.command("format", help="Lay out the selected models' SQL with sqlfluff's layout and "
                             "capitalisation rules (never the query's meaning); --check lists "
                             "the files it would change, exit 1 when any.")
@common_options
@click.option("--check", is_flag=True, help="Change nothing: list what would change.")
def format_sql(inv: commands.Invocation, debug: bool, check: bool) -> None:
    changed = commands.format_models(inv, check)
    for path in changed:
        click.echo(f"{'would reformat' if check else 'reformatted'} {path}")
    if check and changed:
        raise SystemExit(1)


@main.command(help="Run the language server editors start (over stdio): the static checks' "
                   "findings as you type, go to the definition of ref(), source() and macros, "
                   "completion of model, source and column names, a column's type, "
                   "description and lineage on hover (docs/editors.md).")
def lsp() -> None:
    from ..editor.server import serve_stdio  # pygls: for the editor alone

    serve_stdio()


@main.command("ls", help="List models and seeds in DAG order with layer, materialization, "
                         "dependencies and streaming checkpoints, with a warning per static "
                         "check's finding (no Spark started).")
@common_options
def ls(inv: commands.Invocation, debug: bool) -> None:
    rows = commands.list_nodes(inv, _warn)
    for row in rows:
        deps = ", ".join(row.depends_on) or "-"
        click.echo(f"{row.name:<32} {row.kind:<6} {row.layer:<8} {row.materialized:<12} <- {deps}")
        if row.flows_into:
            click.echo(f"{'':<32} flows into: {row.flows_into} ({row.table})")
        if row.checkpoint:
            click.echo(f"{'':<32} checkpoint: {row.checkpoint}")


@main.command(help="Say per model the mode it runs in (a stream and its trigger, a refresh per "
                   "group, on new rows or in full), why (its target_lag, or its config), the "
                   "lag it can expect to hold from its last builds' time in the event log, and "
                   "what the next build does with a model edited since its table was written; "
                   "exit 1 when the static checks find a mistake a build would refuse a model "
                   "for (no Spark started).")
@common_options
@click.option("--output", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def plan(inv: commands.Invocation, debug: bool, output: str) -> None:
    # plan alone reads the event log (delta-rs): imported here, not by every command
    from ..commands.modes import plan_modes
    from ..report.lags import seconds_text

    plans = plan_modes(inv)
    if output == "json":
        click.echo(json.dumps([p.as_json() for p in plans], indent=2))
        raise SystemExit(1 if any(p.refused for p in plans) else 0)
    for p in plans:
        lag = "-" if p.lag_seconds is None else seconds_text(p.lag_seconds)
        expects = "" if p.expected_seconds is None else \
            f"  expects {seconds_text(p.expected_seconds)}"
        click.echo(f"{p.name:<32} lag {lag:<7} {p.mode}{expects}")
        click.echo(f"{'':<32} {'chosen: ' if p.chosen else ''}{p.why}")
        if p.problem:
            click.secho(f"{'':<32} WARN {p.problem}", fg="yellow")
        if p.change:
            click.secho(f"{'':<32} CHANGED: {p.change}", fg="cyan")
        if p.refused:
            click.secho(f"{'':<32} ERROR: {p.refused}", fg="red")
    missed = [p.name for p in plans if p.problem]
    lagged = [p for p in plans if p.lag_seconds is not None]
    if not lagged:
        click.echo("No model has a target_lag: with one, and no materialized, the lag chooses "
                   "its mode (docs/streaming-and-cdc.md, Target lags)")
    else:
        click.echo(f"{len(lagged) - len(missed)} of {len(lagged)} models with a target lag "
                   f"expect to hold it" + (f"; not {', '.join(missed)}" if missed else ""))
    refused = [p.name for p in plans if p.refused]
    if refused:  # a build would fail them before Spark starts
        click.secho(f"{len(refused)} model(s) a build would refuse: {', '.join(refused)}",
                    fg="red", err=True)
        raise SystemExit(1)


@main.command(help="Run model unit tests (tests/unit/*.yml, on the rows they give, touching no "
                   "table), then data tests (generic tests in models/**/*.yml, singular tests in "
                   "tests/*.sql) against the built tables; show failing rows; exit 1 when a test "
                   "with severity error fails. --unit runs the unit tests alone.")
@common_options
@servable
@running_options
@click.option("--unit", is_flag=True, help="Run only the model unit tests (tests/unit/*.yml).")
@LOG_FORMAT
def test(inv: commands.Invocation, debug: bool, unit: bool, log_format: str) -> None:
    task = commands.unit_test if unit else commands.test
    _report(lambda report: task(inv, report), debug, log_format)


@main.command(help="Run again what failed or was skipped in the last build, run, seed or test "
                   "(from target/run_results.json), with the same command.")
@common_options
@servable
@running_options
@waits_for_lock
@LOG_FORMAT
def retry(inv: commands.Invocation, debug: bool, log_format: str) -> None:
    _report(lambda report: commands.retry(inv, report), debug, log_format)
