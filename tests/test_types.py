"""The package's types, checked by mypy in strict mode, the whole package: every function
typed, no value of an unknown type passed on, and each engine checked against the Engine
protocol (engines/__init__.py returns them as one)."""

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parent.parent / "medallion_cli"
# mypy's incremental cache (mypy's own place, in the checkout): 13-15 s on a fresh clone, half a
# second again while the files are unchanged
CACHE = PACKAGE.parent / ".mypy_cache"


def test_the_package_type_checks_strictly():
    from mypy import api

    out, err, status = api.run([
        "--strict", "--ignore-missing-imports", "--follow-imports=silent",
        "--config-file", str(PACKAGE.parent / "pyproject.toml"),  # (its mypy overrides)
        "--cache-dir", str(CACHE), "--python-version", "3.11",
        str(PACKAGE)])
    assert status == 0, out + err


def test_a_type_error_fails_the_check(tmp_path):
    """The check is live: the same flags refuse a function without types and a wrong call."""
    from mypy import api

    (tmp_path / "broken.py").write_text("def f(x):\n    return x\n\n\ndef g() -> int:\n"
                                        "    return 'text'\n")
    out, _, status = api.run(["--strict", "--cache-dir", os.devnull, str(tmp_path / "broken.py")])
    assert status == 1 and "no-untyped-def" in out and "return-value" in out, out
