"""The commands around builds: serve, clean, run-operation, debug, docs, status, source freshness,
catalog prune, maintenance (optimize, vacuum, show, history, restore), jars and init.
"""

from __future__ import annotations

import sys

import click

from .. import commands
from ..core.errors import MedallionError
from ..core.project import Project
from ..spark.jars import BUNDLES
from .group import _Group, common_options, forwarded, main


@main.command(help="Keep Spark running for this project until Ctrl-C: build, run, seed, test "
                   "and retry in it then run here, starting no JVM of their own, on code Java "
                   "has already compiled.")
@common_options
@click.option("--stop", is_flag=True, help="Stop the project's server or daemon instead, once "
                                           "the command it runs ends.")
@click.option("--sql", is_flag=True, help="Also answer SQL clients (JDBC/ODBC, beeline, PyHive, "
                                          "dbt-spark's thrift method, BI tools): Spark's "
                                          "Thrift server, the tables by catalog name. With "
                                          "MEDALLION_SQL_PASSWORD set, clients must give it.")
@click.option("--sql-port", default=10000, show_default=True, help="The SQL endpoint's port.")
@click.option("--sql-host", default="127.0.0.1", show_default=True,
              help="The SQL endpoint's address; beyond loopback only with "
                   "MEDALLION_SQL_PASSWORD set.")
def serve(inv: commands.Invocation, debug: bool, stop: bool, sql: bool, sql_port: int,
          sql_host: str) -> None:
    if stop:
        pid = commands.stop_server(inv)
        click.echo(f"Stopped the project's server (pid {pid})" if pid else
                   "No server runs for this project")
        return

    def ready(project: Project, port: int) -> None:
        click.echo(f"Serving {project.root} on target '{project.target.name}' "
                   f"({project.target.engine}), port {port} on loopback (target/serve.json). "
                   "Ctrl-C stops.")
        if sql:
            from ..spark.sql_endpoint import PASSWORD_ENV, jdbc_url, password_set

            asks = f"the password in {PASSWORD_ENV}" if password_set() else "no password"
            click.echo(f"SQL endpoint: {jdbc_url(sql_port, sql_host)} (any user name, {asks})")

    def done(argv: list[str], exit_code: int, seconds: float) -> None:
        click.echo(f"{' '.join(['medallion', *argv])}: exit {exit_code} in {seconds:.1f} s")

    commands.serve(inv, lambda argv: main.main(argv, prog_name="medallion"), ready, done,
                   sql_port=sql_port if sql else None, sql_host=sql_host)


@main.command(help="Delete the project's clean-targets (medallion_project.yml; default: "
                   "target/). Tables in the warehouse are kept.")
@common_options
def clean(inv: commands.Invocation, debug: bool) -> None:
    for folder in commands.clean(inv):
        click.echo(f"Removed {folder}")


@main.command("run-operation", help="Call a macro of the project with --args (YAML or JSON), "
                                    "as dbt's run-operation; in it, run_query(sql) runs Spark "
                                    "SQL over the project's tables and log(msg) prints.")
@common_options
@click.argument("macro")
@click.option("--args", "args_text", default=None, help="The macro's arguments, e.g. "
                                                         "'{days: 7}'.")
def run_operation(inv: commands.Invocation, debug: bool, macro: str, args_text: str | None) -> None:
    from ..commands.run_operation import run_operation as run

    output = run(inv, macro, commands.parse_vars(args_text, "--args"), click.echo)
    if output:
        click.echo(output)


@main.command("debug", help="Check this machine, the profile and the project without "
                            "building: Python and Java, the project, the target, the JARs its "
                            "engine needs, the warehouse, and Spark (started, one query run).")
@common_options
def debug_command(inv: commands.Invocation, debug: bool) -> None:
    failed = False
    for check in commands.debug(inv):
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
def docs(inv: commands.Invocation, debug: bool, out: str | None) -> None:
    click.echo(f"Wrote {commands.docs(inv, out)}")


@main.command(help="Each table's last build, rows, version and data freshness (now minus the "
                   "newest value of its event_time column) against its freshness limits, and its "
                   "last failure, from the event log (no Spark started). Exits 1 when a table is "
                   "past an error_after limit, so a scheduler can gate on it.")
@common_options
@click.option("--output", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def status(inv: commands.Invocation, debug: bool, output: str) -> None:
    import json

    from ..report.status import exit_code, status_lines

    statuses = commands.status(inv)
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
def source_freshness(inv: commands.Invocation, debug: bool) -> None:
    checked = commands.source_freshness(inv)
    for c in checked:
        level = (c.level or "-").upper()
        when = f"{c.newest:%Y-%m-%d %H:%M:%S}" if c.newest else "nothing found"
        click.echo(f"{level:<6} {c.name:<32} {c.basis}: {when:<20} {c.reason}")
    sys.exit(1 if any(c.level == "error" for c in checked) else 0)


@main.group(cls=_Group, help="Commands on the target's catalog (its metastore).")
def catalog() -> None:
    pass


@catalog.command("prune", help="List the catalog entries this warehouse's builds registered "
                               "that no model or seed names any more (removed or renamed), and "
                               "with --drop drop them. A table's files stay where they are.")
@common_options
@click.option("--drop", is_flag=True, help="Drop the entries listed.")
def catalog_prune(inv: commands.Invocation, debug: bool, drop: bool) -> None:
    left = commands.catalog_prune(inv, drop)
    for entry in left:
        kind = "view" if entry.view else "table"
        kept = f" (its files stay at {entry.location})" if drop and entry.location else ""
        click.echo(f"{'Dropped' if drop else 'Left'} {entry.schema}.{entry.table}: a {kind}{kept}")
    if not left:
        click.echo("Every catalog entry of this warehouse names a model or seed of the project.")
    elif not drop:
        click.echo(f"{len(left)} catalog entr{'y' if len(left) == 1 else 'ies'} of this "
                   "warehouse name no model or seed; medallion catalog prune --drop drops them")


@main.command(help="Compact the small files of the selected tables (streaming writes many).")
@common_options
def optimize(inv: commands.Invocation, debug: bool) -> None:
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
def vacuum(inv: commands.Invocation, debug: bool, retain: str, allow_short_retention: bool) -> None:
    from ..commands import maintain as maintenance

    for name, deleted in maintenance.vacuum(inv, retain, allow_short_retention):
        click.echo(f"{name:<40} {deleted} files deleted")


@main.command(help="Print a table's rows, now or --as-of a version or timestamp; a view's rows; "
                   "a CTE's rows (--cte); or the rows of --inline SQL (with ref, source and "
                   "macros).")
@common_options
@click.argument("model", required=False)
@click.option("--limit", default=20, show_default=True)
@click.option("--as-of", default=None, help="A version number or an ISO 8601 timestamp.")
@click.option("--inline", default=None, help="Spark SQL to run instead, e.g. "
                                             "\"select * from {{ ref('x') }} where ...\".")
@click.option("--cte", default=None, help="With MODEL: the rows of this CTE of its SQL, "
                                          "computed now over its inputs.")
def show(inv: commands.Invocation, debug: bool, model: str | None, limit: int, as_of: str | None,
         inline: str | None, cte: str | None) -> None:
    from ..commands import maintain as maintenance
    from ..core.rowtext import rows_text

    if (inline is not None or cte is not None) and not debug:
        forwarded(inv)  # Spark computes these: on a warm server or daemon when there is one
    if model is not None and cte is not None and inline is None and as_of is None:
        rows = maintenance.show_cte(inv, model, cte, limit)
    elif model is not None and inline is None and cte is None:
        rows = maintenance.show(inv, model, limit, as_of)
    elif inline is not None and model is None:
        rows = maintenance.show_inline(inv, inline, limit)
    else:
        raise click.UsageError("give a MODEL (with --as-of or --cte, or neither) or --inline SQL")
    click.echo(rows_text(rows))


@main.command(help="List a table's versions: when, what operation, and the rows it inserted, "
                   "updated and deleted.")
@common_options
@click.argument("model")
@click.option("--limit", default=None, type=int)
def history(inv: commands.Invocation, debug: bool, model: str, limit: int | None) -> None:
    from ..commands import maintain as maintenance

    for commit in maintenance.history(inv, model, limit):
        changed = " ".join(f"{k}={v}" for k, v in commit.rows.items())
        click.echo(f"v{commit.version:<5} {commit.when:%Y-%m-%d %H:%M:%S}  {commit.operation:<17}"
                   f" {changed}".rstrip())


@main.command(help="Make an old version of a table current again (as a new version).")
@common_options
@click.argument("model")
@click.option("--to", "version", required=True, type=int, help="The version to restore.")
def restore(inv: commands.Invocation, debug: bool, model: str, version: int) -> None:
    from ..commands import maintain as maintenance

    click.echo(f"{model} restored to version {version} as version "
               f"{maintenance.restore(inv, model, version)}")


@main.command("jars", help="Fetch JARs from Maven Central with Maven, once, into a folder that is "
                           "reused, and print it. delta (the default): Delta Lake for Spark, "
                           "which a delta-spark target without delta_jars uses.")
@click.argument("bundles", nargs=-1, type=click.Choice(BUNDLES))
def jars(bundles: tuple[str, ...]) -> None:
    try:
        for folder in commands.fetch_jars(bundles or ("delta",)):
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
def init(name: str, template: str | None, output_dir: str, no_input: bool) -> None:
    def ask(key: str, question: str, default: str, choices: list[str] | None) -> str:
        return click.prompt(question, default=default,
                            type=click.Choice(choices) if choices else str)

    try:  # with no terminal to ask on, the template's defaults
        created = commands.init(name, template, output_dir, no_input,
                                ask=ask if sys.stdin.isatty() else None)
    except MedallionError as exc:
        click.secho(f"Error: {exc}", fg="red", err=True)
        sys.exit(exc.exit_code)
    click.echo(f"Created {created}. Next: cd {created} and follow its README.")
