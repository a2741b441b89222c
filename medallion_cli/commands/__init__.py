"""What each `medallion` command does, one module per family; the command line (cli/) only
parses and prints. This face names every command for callers (the CLI, the pytest plugin,
scripts): `commands.build(commands.Invocation(project_dir="."), "build")`."""

from .build import build, retry
from .catalog import catalog_prune
from .checkup import Check
from .inspect import compile_models, docs, list_nodes, source_freshness, status
from .invocation import Invocation, parse_vars
from .lint import format_models, lint_models
from .operate import clean, debug, fetch_jars, init, on_server, serve, stop_server
from .plan import Reporter
from .run_operation import run_operation
from .test import test, unit_test

__all__ = ["Check", "Invocation", "Reporter", "build", "catalog_prune", "clean",
           "compile_models", "debug",
           "docs", "fetch_jars", "format_models", "init", "lint_models", "list_nodes",
           "on_server", "parse_vars", "retry",
           "run_operation", "serve", "source_freshness", "status", "stop_server", "test",
           "unit_test"]
