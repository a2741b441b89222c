"""The `medallion` command line: it parses arguments, calls commands/, and prints; no logic
here. group.py holds the group and the options commands share; building.py and operating.py
the commands, registered on the group when imported."""

import sys

from ..core.processes import exit_now
from . import building, operating  # noqa: F401  (their commands join the group)
from .group import main

__all__ = ["main", "run"]


def run() -> None:
    """The `medallion` script: the command, then the process's end without Python's teardown
    (exit_now)."""
    try:
        main()
        code = 0
    except SystemExit as exc:
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
            code = 1
        else:
            code = exc.code or 0
    exit_now(code)
