"""`python -m medallion_cli.cli`: the command line, as the `medallion` script runs it."""

from . import run

run()
