"""What went wrong, in one line, from whatever Spark, Delta or Python raised.

Spark errors arrive as a wrapper line ("An error occurred while calling o303.save.") over a Java
stack with a chain of causes; the reason is the deepest cause that carries an error class
([CAST_INVALID_INPUT] ...), plus a deeper plain cause when there is one (the I/O error behind a
[FAILED_READ_FILE]). A Python traceback inside Spark's (a foreachBatch function) has its reason
on its last `SomeError: ...` line. A few Delta errors are said in medallion's words, the same
words the embedded engine uses for the same situation.
"""

from __future__ import annotations

import re

from .errors import MedallionError

PYTHON_ERROR_LINE = re.compile(r"^\s*[\w.]*(Error|Exception): .+")
JAVA_CAUSE = re.compile(r"^(?:Caused by: )?(?:[\w$]+\.)+[\w$]*(?:Exception|Error|Throwable)"
                        r"(?:: (?P<message>.*))?$")
ERROR_CLASS = re.compile(r"^\[(?P<name>[A-Z0-9_.]+)\]")
SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\.?$")


def changed_upstream(path: str, version: int | str) -> str:
    """Why a stream over a table that changed existing rows stops (both engines say this)."""
    return (f"the upstream table {path} changed or removed existing rows at version {version}, "
            "which a streaming read cannot take as new rows. Stream only from append-only "
            "tables, or rebuild the reading model with --full-refresh")


def _delta_changed_upstream(text: str) -> str:
    version = re.search(r"at version (\d+)", text)
    path = re.search(r"found at path (\S+?)\.?$", text, re.MULTILINE)
    return changed_upstream(path.group(1) if path else "it reads",
                            version.group(1) if version else "?")


# Error class -> how to say it, given Spark's whole error text.
REWRITES = {"DELTA_SOURCE_TABLE_IGNORE_CHANGES": _delta_changed_upstream}


def error_message(exc: BaseException) -> str:
    """What went wrong, in a line."""
    if isinstance(exc, MedallionError):
        return str(exc)
    text = str(exc).strip() or type(exc).__name__
    lines = text.splitlines()
    if "Traceback (most recent call last)" in text:
        reasons = [line.strip() for line in lines if PYTHON_ERROR_LINE.match(line)]
        if reasons:
            return _spark_reason([reasons[-1]], text) or reasons[-1]
    return _spark_reason(lines, text) or lines[0]


def _spark_reason(lines: list[str], text: str) -> str | None:
    """The deepest error-classed message among Java causes (or a Python error line), with the
    deepest plain cause below it; None when there is no such line."""
    causes = []
    for line in lines:
        stripped = line.strip()
        match = JAVA_CAUSE.match(stripped)
        message = match.group("message") if match else stripped.split(": ", 1)[-1]
        if (match or ERROR_CLASS.match(message)) and message:
            causes.append(SQLSTATE.sub("", message).strip())
    classed = [i for i, c in enumerate(causes) if ERROR_CLASS.match(c)]
    if not classed:
        return None
    reason = causes[classed[-1]]
    name = ERROR_CLASS.match(reason).group("name")
    if name in REWRITES:
        return REWRITES[name](text)
    deeper = causes[classed[-1] + 1:]
    return f"{reason} ({deeper[-1]})" if deeper else reason
