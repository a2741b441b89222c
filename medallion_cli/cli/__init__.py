"""The `medallion` command line: it parses arguments, calls commands/, and prints; no logic
here. group.py holds the group and the options commands share; building.py and operating.py
the commands, registered on the group when imported."""

from . import building, operating  # noqa: F401  (their commands join the group)
from .group import main

__all__ = ["main"]
