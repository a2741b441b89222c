"""The `medallion` command line. It parses arguments, calls tasks, and prints; no logic here."""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import replace

import click

from .. import __version__
from ..commands import tasks
from ..core.errors import MedallionError
from ..run.runner import interrupted
from ..spark.jars import BUNDLES


def common_options(func):
    """Options every command takes, so `medallion build -s x --target t` reads like dbt."""

    @click.option("--project-dir", default=".", show_default=True, type=click.Path(),
                  help="Folder holding medallion_project.yml.")
    @click.option("--profiles-dir", default=None, type=click.Path(),
                  help="Folder holding profiles.yml (default: <project>/profiles, or "
                       "$MEDALLION_PROFILES_DIR).")
    @click.option("--target", "-t", default=None, help="Profile target (default: the profile's).")
    @click.option("--select", "-s", multiple=True,
                  help="Nodes to run: name (wildcards: silver_*), +name (with ancestors), "
                       "name+ (with descendants), 2+name / name+1 (that many generations), "
                       "@name, tag:x, path:models/silver, layer:gold, resource_type:model, "
                       "config.KEY:VALUE; `,` intersects (tag:x,layer:gold). Several values "
                       "after one -s, or -s again, for their union.")
    @click.option("--exclude", multiple=True, help="Nodes to leave out, same syntax as --select.")
    @click.option("--state", default=None, type=click.Path(),
                  help="Folder with an earlier run's manifest.json, for -s state:modified "
                       "(or state:new).")
    @click.option("--full-refresh", is_flag=True,
                  help="Rebuild incremental models and seeds from scratch.")
    @click.option("--vars", "vars_text", default=None, help="Variables as YAML or JSON.")
    @click.option("--debug", is_flag=True,
                  help="Show Python tracebacks and Spark's own log (else in target/spark.log).")
    @functools.wraps(func)
    def wrapper(project_dir, profiles_dir, target, select, exclude, state, full_refresh,
                vars_text, debug, **kwargs):
        try:
            inv = tasks.Invocation(project_dir, profiles_dir, target, tuple(select),
                                   tuple(exclude), full_refresh, tasks.parse_vars(vars_text),
                                   kwargs.pop("threads", None), debug,
                                   fail_fast=kwargs.pop("fail_fast", False), state=state,
                                   defer=kwargs.pop("defer", False))
            return func(inv, debug=debug, **kwargs)
        except MedallionError as exc:
            if debug:
                raise
            click.secho(f"Error: {exc}", fg="red", err=True)
            sys.exit(exc.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as exc:  # a failure medallion did not foresee: still one line
            if debug:
                raise
            from ..core.failures import error_message

            click.secho(f"Error: {error_message(exc)}\n  hint: --debug shows the traceback",
                        fg="red", err=True)
            sys.exit(1)

    return wrapper


def _report(task, debug: bool, log_format: str = "text", watch: bool = False) -> None:
    """Run a task that reports node results, print them as they come, exit 1 on any failure."""
    from .console import Console

    console = Console(log_format, debug, watch)
    try:
        results = task(console.reporter())
    except KeyboardInterrupt:  # a second Ctrl-C, or one outside running nodes: leave now
        click.secho("\nAborted by Ctrl-C: what finished is committed; the rest is as it was",
                    fg="yellow", err=True)
        os._exit(130)  # not waiting for the nodes' threads
    console.finish(results)
    sys.exit(130 if interrupted(results) else 1 if any(r.failed for r in results) else 0)


def _warn(message: str) -> None:
    click.secho(f"warning: {message}", fg="yellow", err=True)


LOG_FORMAT = click.option("--log-format", type=click.Choice(["text", "json"]), default="text",
                          show_default=True, help="json: one JSON object per event.")


SELECTING = ("-s", "--select", "--exclude")


def spread_selectors(args: list[str]) -> list[str]:
    """`-s a b c` as dbt reads it: every value after --select (or --exclude) up to the next
    option belongs to it."""
    spread, flag = [], None
    for arg in args:
        if arg.startswith("-"):
            flag = arg.split("=")[0] if arg.split("=")[0] in SELECTING else None
            spread.append(arg)
        elif flag and spread[-1] != flag:
            spread += [flag, arg]
        else:
            spread.append(arg)
    return spread


class _Command(click.Command):
    def parse_args(self, ctx, args):
        # Commands that take a positional argument (show MODEL) keep click's reading.
        if not any(isinstance(p, click.Argument) for p in self.params):
            args = spread_selectors(args)
        return super().parse_args(ctx, args)


class _Group(click.Group):
    command_class = _Command

    def parse_args(self, ctx, args):
        ctx.meta["argv"] = list(args)  # as typed, for a server to run (servable)
        return super().parse_args(ctx, args)


@click.group(cls=_Group, help="Medallion: build bronze/silver/gold Delta tables from SQL models.")
@click.version_option(__version__, prog_name="medallion")
def main() -> None:
    pass


def running_options(func):
    """Options of the commands that run nodes."""
    func = click.option("--defer", is_flag=True,
                        help="Read the tables of unselected models this target has not built "
                             "from the --state run's warehouse (as dbt's --defer).")(func)
    func = click.option("--fail-fast", "-x", is_flag=True,
                        help="After the first failure, start nothing more (what is running "
                             "finishes) and report the rest skipped.")(func)
    return click.option("--threads", type=int, default=None,
                        help="How many independent nodes to build at once (default: "
                             "profile's).")(func)


def servable(func):
    """A command that runs on the project's `medallion serve` when one is up (server.py)."""

    @click.option("--no-server", is_flag=True,
                  help="Run in a JVM of this command's own even when medallion serve runs for "
                       "the project.")
    @functools.wraps(func)
    def wrapper(inv, debug, no_server, **kwargs):
        if not (no_server or debug or kwargs.get("watch")):
            from ..serve.server import forward

            argv = click.get_current_context().meta.get("argv", [])
            code = forward(inv.project_dir, inv.profiles_dir, inv.target, argv)
            if code is not None:
                sys.exit(code)
        return func(inv, debug=debug, **kwargs)

    return wrapper


EMPTY = click.option("--empty", is_flag=True,
                     help="Check each model's SQL, config columns, expectations and contract "
                          "over inputs with no rows, writing nothing (as dbt's --empty).")


@main.command(help="Load seeds, then build models, in DAG order. With --watch, keep streaming "
                   "models running on their trigger and rebuild batch models when their inputs "
                   "change, until Ctrl-C.")
@common_options
@servable
@running_options
@click.option("--watch", is_flag=True,
              help="Keep running: streaming models on their processing-time trigger "
                   "(default 10 seconds), batch models refreshed when inputs change.")
@click.option("--rerun-tests", is_flag=True,
              help="Run data tests that passed on their inputs as they are now too (by "
                   "default those are reported up to date).")
@EMPTY
@LOG_FORMAT
def build(inv, debug, watch, rerun_tests, empty, log_format):
    inv = replace(inv, rerun_tests=rerun_tests, empty=empty)
    _report(lambda report: tasks.build(inv, "build", ("seed", "model"), report, watch), debug,
            log_format, watch)


@main.command(help="Build models only (no seeds), in DAG order.")
@common_options
@servable
@running_options
@EMPTY
@LOG_FORMAT
def run(inv, debug, empty, log_format):
    inv = replace(inv, empty=empty)
    _report(lambda report: tasks.build(inv, "run", ("model",), report), debug, log_format)


@main.command(help="Load seeds/*.csv into Delta tables; a seed reloads when its file changed.")
@common_options
@servable
@running_options
@LOG_FORMAT
def seed(inv, debug, log_format):
    _report(lambda report: tasks.build(inv, "seed", ("seed",), report), debug, log_format)


@main.command(help="Print the rendered Spark SQL of the selected models (no Spark started). "
                   "Also written to target/compiled/.")
@common_options
def compile(inv, debug):
    compiled = tasks.compile_models(inv, _warn)
    if compiled.note:
        click.secho(f"note: {compiled.note}", fg="yellow", err=True)
    for node in compiled.nodes:
        click.echo(click.style(f"-- {node.name} ({node.file.rel_path})", fg="cyan"))
        click.echo(compiled.sql[node.name].strip() + "\n")


@main.command("ls", help="List models and seeds in DAG order with layer, materialization, "
                         "dependencies and streaming checkpoints (no Spark started).")
@common_options
def ls(inv, debug):
    rows = tasks.list_nodes(inv, _warn)
    for row in rows:
        deps = ", ".join(row.depends_on) or "-"
        click.echo(f"{row.name:<32} {row.kind:<6} {row.layer:<8} {row.materialized:<12} <- {deps}")
        if row.flows_into:
            click.echo(f"{'':<32} flows into: {row.flows_into} ({row.table})")
        if row.checkpoint:
            click.echo(f"{'':<32} checkpoint: {row.checkpoint}")


@main.command(help="Run data tests (generic tests in models/**/*.yml, singular tests in "
                   "tests/*.sql) against the built tables; show failing rows; exit 1 when a test "
                   "with severity error fails. --unit runs model unit tests (tests/unit/*.yml) "
                   "instead, on the rows they give, touching no table.")
@common_options
@servable
@running_options
@click.option("--unit", is_flag=True, help="Run model unit tests from tests/unit/*.yml.")
@LOG_FORMAT
def test(inv, debug, unit, log_format):
    task = tasks.unit_test if unit else tasks.test
    _report(lambda report: task(inv, report), debug, log_format)


@main.command(help="Run again what failed or was skipped in the last build, run, seed or test "
                   "(from target/run_results.json), with the same command.")
@common_options
@servable
@running_options
@LOG_FORMAT
def retry(inv, debug, log_format):
    _report(lambda report: tasks.retry(inv, report), debug, log_format)


@main.command(help="Keep Spark running for this project until Ctrl-C: build, run, seed, test "
                   "and retry in it then run here, starting no JVM of their own, on code Java "
                   "has already compiled.")
@common_options
def serve(inv, debug):
    def ready(project, port):
        click.echo(f"Serving {project.root} on target '{project.target.name}' "
                   f"({project.target.engine}), port {port} on loopback (target/serve.json). "
                   "Ctrl-C stops.")

    def done(argv, exit_code, seconds):
        click.echo(f"{' '.join(['medallion', *argv])}: exit {exit_code} in {seconds:.1f} s")

    tasks.serve(inv, lambda argv: main.main(argv, prog_name="medallion"), ready, done)


@main.command(help="Delete the project's clean-targets (medallion_project.yml; default: "
                   "target/). Tables in the warehouse are kept.")
@common_options
def clean(inv, debug):
    for folder in tasks.clean(inv):
        click.echo(f"Removed {folder}")


@main.command("run-operation", help="Call a macro of the project with --args (YAML or JSON), "
                                    "as dbt's run-operation; in it, run_query(sql) runs Spark "
                                    "SQL over the project's tables and log(msg) prints.")
@common_options
@click.argument("macro")
@click.option("--args", "args_text", default=None, help="The macro's arguments, e.g. "
                                                         "'{days: 7}'.")
def run_operation(inv, debug, macro, args_text):
    from ..commands.operate import run_operation as run

    output = run(inv, macro, tasks.parse_vars(args_text, "--args"), click.echo)
    if output:
        click.echo(output)


@main.command("debug", help="Check this machine, the profile and the project without "
                            "building: Python and Java, the project, the target, the JARs its "
                            "engine needs, the warehouse, and Spark (started, one query run).")
@common_options
def debug_command(inv, debug):
    failed = False
    for check in tasks.debug(inv):
        mark = click.style("OK  " if check.ok else "FAIL", fg="green" if check.ok else "red")
        click.echo(f"{mark} {check.name:<10} {check.detail}")
        failed |= not check.ok
    sys.exit(1 if failed else 0)


@main.command(help="Write a static HTML page documenting the project: the DAG by layer, each "
                   "model's SQL, config, columns, tests and lineage (no Spark started on the "
                   "embedded engine; delta-spark reads built tables' columns through Spark).")
@common_options
@click.option("--out", default=None, type=click.Path(),
              help="Where to write the page (default: target/docs/index.html).")
def docs(inv, debug, out):
    click.echo(f"Wrote {tasks.docs(inv, out)}")


@main.command(help="Each table's last build, rows, version and data freshness (now minus the "
                   "newest value of its event_time column) against its freshness limits, and its "
                   "last failure, from the event log (no Spark started). Exits 1 when a table is "
                   "past an error_after limit, so a scheduler can gate on it.")
@common_options
@click.option("--output", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def status(inv, debug, output):
    import json

    from ..report.status import exit_code, status_lines

    statuses = tasks.status(inv)
    if output == "json":
        click.echo(json.dumps([s.as_json for s in statuses], indent=2))
    else:
        for line in status_lines(statuses):
            click.echo(line)
    sys.exit(exit_code(statuses))


@main.group(cls=_Group, help="Commands on sources.")
def source() -> None:
    pass


@source.command("freshness", help="How old each source's newest data is (its loaded_at_field, "
                                  "else its newest file or last commit), against its "
                                  "freshness limits; exit 1 past an error_after limit. Select "
                                  "with -s source:NAME or source:NAME.TABLE.")
@common_options
def source_freshness(inv, debug):
    checked = tasks.source_freshness(inv)
    for c in checked:
        level = (c.level or "-").upper()
        when = f"{c.newest:%Y-%m-%d %H:%M:%S}" if c.newest else "nothing found"
        click.echo(f"{level:<6} {c.name:<32} {c.basis}: {when:<20} {c.reason}")
    sys.exit(1 if any(c.level == "error" for c in checked) else 0)


@main.command(help="Compact the small files of the selected tables (streaming writes many).")
@common_options
def optimize(inv, debug):
    from ..commands import maintain as maintenance

    for name, metrics in maintenance.optimize(inv):
        click.echo(f"{name:<40} {metrics['files_removed']} files compacted into "
                   f"{metrics['files_added']}")


@main.command(help="Delete files of the selected tables that no version within --retain needs.")
@common_options
@click.option("--retain", default="168h", show_default=True,
              help="Keep what versions this recent need (e.g. 168h, 7d).")
@click.option("--allow-short-retention", is_flag=True,
              help="Allow --retain under 168h (readers of older versions lose their files).")
def vacuum(inv, debug, retain, allow_short_retention):
    from ..commands import maintain as maintenance

    for name, deleted in maintenance.vacuum(inv, retain, allow_short_retention):
        click.echo(f"{name:<40} {deleted} files deleted")


@main.command(help="Print a table's rows, now or --as-of a version or timestamp; a view's rows; "
                   "or the rows of --inline SQL (with ref, source and macros).")
@common_options
@click.argument("model", required=False)
@click.option("--limit", default=20, show_default=True)
@click.option("--as-of", default=None, help="A version number or an ISO 8601 timestamp.")
@click.option("--inline", default=None, help="Spark SQL to run instead, e.g. "
                                             "\"select * from {{ ref('x') }} where ...\".")
def show(inv, debug, model, limit, as_of, inline):
    from ..commands import maintain as maintenance
    from ..core.rowtext import rows_text

    if (model is None) == (inline is None):
        raise click.UsageError("give a MODEL or --inline SQL (one of them)")
    rows = (maintenance.show_inline(inv, inline, limit) if inline is not None
            else maintenance.show(inv, model, limit, as_of))
    click.echo(rows_text(rows))


@main.command(help="List a table's versions: when, what operation, and the rows it inserted, "
                   "updated and deleted.")
@common_options
@click.argument("model")
@click.option("--limit", default=None, type=int)
def history(inv, debug, model, limit):
    from ..commands import maintain as maintenance

    for commit in maintenance.history(inv, model, limit):
        changed = " ".join(f"{k}={v}" for k, v in commit.rows.items())
        click.echo(f"v{commit.version:<5} {commit.when:%Y-%m-%d %H:%M:%S}  {commit.operation:<17}"
                   f" {changed}".rstrip())


@main.command(help="Make an old version of a table current again (as a new version).")
@common_options
@click.argument("model")
@click.option("--to", "version", required=True, type=int, help="The version to restore.")
def restore(inv, debug, model, version):
    from ..commands import maintain as maintenance

    click.echo(f"{model} restored to version {version} as version "
               f"{maintenance.restore(inv, model, version)}")


@main.command("jars", help="Fetch JARs from Maven Central with Maven, once, into a folder that is "
                           "reused, and print it. delta (the default): Delta Lake for Spark, "
                           "which a delta-spark target without delta_jars uses.")
@click.argument("bundles", nargs=-1, type=click.Choice(BUNDLES))
def jars(bundles):
    try:
        for folder in tasks.fetch_jars(bundles or ("delta",)):
            click.echo(folder)
    except MedallionError as exc:
        click.secho(f"Error: {exc}", fg="red", err=True)
        sys.exit(exc.exit_code)


@main.command(help="Create a new project NAME from the Medallion template (cookiecutter), "
                   "asking for the rest unless --no-input.")
@click.argument("name")
@click.option("--template", default=None,
              help="Template folder or git URL (default: the one beside this package).")
@click.option("--output-dir", default=".", show_default=True, type=click.Path())
@click.option("--no-input", is_flag=True, help="Take the template's defaults for the rest.")
def init(name, template, output_dir, no_input):
    try:
        created = tasks.init(name, template, output_dir, no_input)
    except MedallionError as exc:
        click.secho(f"Error: {exc}", fg="red", err=True)
        sys.exit(exc.exit_code)
    click.echo(f"Created {created}. Next: cd {created} and follow its README.")


if __name__ == "__main__":
    main()
