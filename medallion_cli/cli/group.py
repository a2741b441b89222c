"""The `medallion` group and what its commands share: the options every command takes (read into
an Invocation), those of the commands that run nodes, forwarding to `medallion serve`, dbt's
`-s a b c` selectors, and how results are printed and turned into an exit code. Errors are one
line; tracebacks only with --debug.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

import click

from .. import __version__, commands
from ..core.errors import MedallionError
from ..materialize.context import FlowReset
from ..run.scheduler import interrupted

if TYPE_CHECKING:
    from ..commands.plan import Reporter
    from ..run.runner import NodeResult


def common_options(func: Callable[..., None]) -> Callable[..., None]:
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
    def wrapper(project_dir: str, profiles_dir: str | None, target: str | None,
                select: tuple[str, ...], exclude: tuple[str, ...], state: str | None,
                full_refresh: bool, vars_text: str | None, debug: bool, **kwargs: Any) -> None:
        try:
            inv = commands.Invocation(project_dir, profiles_dir, target, tuple(select),
                                   tuple(exclude), full_refresh, commands.parse_vars(vars_text),
                                   kwargs.pop("threads", None), debug,
                                   fail_fast=kwargs.pop("fail_fast", False), state=state,
                                   defer=kwargs.pop("defer", False),
                                   wait_for_lock=kwargs.pop("wait_for_lock", 0))
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
            from ..core.error_text import error_message

            click.secho(f"Error: {error_message(exc)}\n  hint: --debug shows the traceback",
                        fg="red", err=True)
            sys.exit(1)

    return wrapper


def _report(task: Callable[[Reporter], list[NodeResult]], debug: bool, log_format: str = "text",
            watch: bool = False) -> None:
    """Run a task that reports node results, print them as they come, exit 1 on any failure."""
    from .console import CLOSED_OUTPUT, Console

    console = Console(log_format, debug, watch)
    try:
        results = task(console.reporter())
    except KeyboardInterrupt:  # a second Ctrl-C, or one outside running nodes: leave now
        if not console.closed:
            console.say_aborted()
        os._exit(CLOSED_OUTPUT if console.closed else 130)  # not waiting for the nodes' threads
    console.finish(results)
    if console.closed:
        sys.exit(CLOSED_OUTPUT)
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
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # Commands that take a positional argument (show MODEL) keep click's reading.
        if not any(isinstance(p, click.Argument) for p in self.params):
            args = spread_selectors(args)
        return super().parse_args(ctx, args)


class _Group(click.Group):
    command_class = _Command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["argv"] = list(args)  # as typed, for a server to run (servable)
        return super().parse_args(ctx, args)


@click.group(cls=_Group, help="Medallion: build bronze/silver/gold Delta tables from SQL models.")
@click.version_option(__version__, prog_name="medallion")
def main() -> None:
    pass


def running_options(func: Callable[..., None]) -> Callable[..., None]:
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


def waits_for_lock(func: Callable[..., None]) -> Callable[..., None]:
    """The option of the commands that write the warehouse, holding its lock."""
    return click.option("--wait-for-lock", type=click.FloatRange(min=0), default=0,
                        metavar="SECONDS",
                        help="When another command is writing the warehouse, wait up to this "
                             "long for it to finish instead of failing at once (a scheduled "
                             "run's choice).")(func)


def servable(func: Callable[..., None]) -> Callable[..., None]:
    """A command that runs on the project's `medallion serve` or daemon when one is up, or
    starts the daemon (server.py, daemon.py)."""

    @click.option("--no-server", is_flag=True,
                  help="Run in a JVM of this command's own even when medallion serve or the "
                       "daemon runs for the project.")
    @click.option("--daemon/--no-daemon", default=None,
                  help="With no server running, start medallion's daemon, which keeps Spark "
                       "warm for the next commands and stops after 15 idle minutes (default: "
                       "on in a terminal; $MEDALLION_DAEMON).")
    @functools.wraps(func)
    def wrapper(inv: commands.Invocation, debug: bool, no_server: bool, daemon: bool | None,
                **kwargs: Any) -> None:
        if not (no_server or debug or kwargs.get("watch")):
            forwarded(inv, daemon)
        return func(inv, debug=debug, **kwargs)

    return wrapper


def forwarded(inv: commands.Invocation, daemon: bool | None = None) -> None:
    """Run the command as typed on the project's server or daemon, and exit with its code,
    when one takes it (the daemon started first where wanted); else return to run it here."""
    argv = click.get_current_context().meta.get("argv", [])
    code = commands.on_server(inv, argv, daemon,
                              lambda args: main.main(args, prog_name="medallion"),
                              lambda text: click.secho(text, fg="cyan", err=True))
    if code is not None:
        sys.exit(code)


EMPTY = click.option("--empty", is_flag=True,
                     help="Check each model's SQL, config columns, expectations and contract "
                          "over inputs with no rows, writing nothing (as dbt's --empty).")


def _event_time(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        try:
            dt.datetime.fromisoformat(value)
        except ValueError:
            raise click.BadParameter(f"{value!r} is not a date or timestamp, such as 2026-01-01 "
                                     "or '2026-01-01 06:00:00'") from None
    return value


def event_range(command: Callable[..., Any]) -> Callable[..., Any]:
    """--start/--end (dbt's --event-time-start/-end): replace that range of each selected
    model's table, by its event_time (materialize/ranges.py)."""
    for name, says in (("end", "before"), ("start", "from")):
        command = click.option(f"--{name}", f"--event-time-{name}", name, default=None,
                               callback=_event_time,
                               help=f"Backfill: replace the rows of each selected model's table "
                                    f"whose event_time is {says} this date or timestamp.")(command)
    return command


def backfill(inv: commands.Invocation, start: str | None, end: str | None
             ) -> commands.Invocation:
    """The invocation with --start/--end's range, when one was given."""
    if start is None and end is None:
        return inv
    if start is not None and end is not None and (dt.datetime.fromisoformat(start)
                                                  >= dt.datetime.fromisoformat(end)):
        raise click.UsageError(f"--start {start} is not before --end {end}")
    return replace(inv, event_range=(start, end))


def reset_flow_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--reset-flow and its point: start each selected streaming model's query again from there,
    keeping its table (materialize/streaming/flow_reset.py)."""
    for option in (
            click.option("--from-earliest", is_flag=True,
                         help="With --reset-flow: from the inputs' start (merge models)."),
            click.option("--from-timestamp", default=None, callback=_event_time,
                         help="With --reset-flow: from the first commit of each streamed "
                              "table at or after this date or timestamp (UTC)."),
            click.option("--from-version", type=click.IntRange(min=0), default=None,
                         help="With --reset-flow: from this version of the table it streams."),
            click.option("--reset-flow", is_flag=True,
                         help="Start each selected streaming model's query again, from "
                              "--from-version, --from-timestamp or --from-earliest, keeping "
                              "its table: for an edit its checkpoint cannot follow.")):
        command = option(command)
    return command


def flow_reset(inv: commands.Invocation, reset: bool, version: int | None,
               timestamp: str | None, earliest: bool) -> commands.Invocation:
    """The invocation with --reset-flow's point, when it was given."""
    points = [name for name, given in (("--from-version", version is not None),
                                       ("--from-timestamp", timestamp is not None),
                                       ("--from-earliest", earliest)) if given]
    if not reset:
        if points:
            raise click.UsageError(f"{points[0]} says where --reset-flow starts: add --reset-flow")
        return inv
    if len(points) != 1:
        raise click.UsageError("--reset-flow needs one point to start from: --from-version N, "
                               "--from-timestamp T or --from-earliest")
    return replace(inv, flow_reset=FlowReset(version, timestamp))
