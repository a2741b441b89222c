"""The client: `medallion build` and the others, when the project has a server. It sends the
command, its working folder and the environment variables the project reads, prints what
the server streams back, and exits with the command's exit code.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import sys
from pathlib import Path

from .protocol import _connect, _not_own, _served, ask_to_stop, served_file, server_kind


def forward(project_dir: str, profiles_dir: str | None, target: str | None,
            argv: list[str]) -> int | None:
    """Run the command (argv, as typed after `medallion`) on the project's server: its exit
    code. None when there is no server, or it declined (another target): the caller runs it."""
    path = served_file(project_dir)
    served = _served(path)
    if served.get("pid") == os.getpid():  # the server itself, running a forwarded command
        return None
    stranger = _not_own(path)
    if stranger:
        print(f"Note: {path} is {stranger}, so it may not be the server of this user: "
              "ignored; running in a JVM of its own", file=sys.stderr)
        return None
    connection = _connect(served)
    if connection is None:
        return None
    if served.get("kind") != server_kind():
        connection.close()
        if served.get("idle") is None:
            print(f"Note: medallion serve (pid {served.get('pid')}) started with another Python,"
                  " medallion, or other Java, Spark, Hadoop or AWS variables than this command"
                  "'s; running in a JVM of its own", file=sys.stderr)
        else:  # a daemon, started for commands like this one: replaced (operate.on_server)
            print(f"Note: medallion's daemon (pid {served.get('pid')}) started with another "
                  "Python, medallion, or other Java, Spark, Hadoop or AWS variables than this "
                  "command's: stopping it (after the command it runs)", file=sys.stderr)
            ask_to_stop(served)
        return None
    terminal = sys.stdout.isatty()
    environment = project_environment(project_dir, profiles_dir)
    if terminal:  # the server's output stream is no terminal: tell it this one's width
        environment.setdefault("COLUMNS", str(shutil.get_terminal_size().columns))
    request = {"secret": served.get("secret"), "argv": argv, "cwd": os.getcwd(),
               "env": environment, "terminal": terminal, "project_dir": project_dir,
               "profiles_dir": profiles_dir, "target": target}
    with connection:
        connection.settimeout(None)
        try:
            connection.sendall(json.dumps(request).encode() + b"\n")
        except OSError:
            pass  # the server went away: said as it reads no answer
        name = "medallion serve" if served.get("idle") is None else "medallion's daemon"
        return _relay(connection, f"{name}, pid {served.get('pid')}")


ENV_VAR_CALL = re.compile(r"""env_var\(\s*["']([^"']+)["']""")


PASSED_VARIABLES = ("COLUMNS", "TERM", "NO_COLOR", "FORCE_COLOR", "TZ")


def project_environment(project_dir: str, profiles_dir: str | None) -> dict[str, str]:
    """The variables a served command needs from the client: those the project's files read
    with env_var(), medallion's own (MEDALLION_*) and the terminal's; not the whole environment
    (a server gets nothing it does not use)."""
    root = Path(project_dir).resolve()
    files = [*root.glob("*.yml"), *Path(profiles_dir or root / "profiles").glob("*.yml")]
    for folder in ("models", "macros", "seeds", "tests", "snapshots", "analyses"):
        files += [p for p in (root / folder).rglob("*") if p.suffix in (".sql", ".yml", ".yaml")]
    named = set()
    for file in files:
        try:
            named.update(ENV_VAR_CALL.findall(file.read_text(errors="replace")))
        except OSError:
            continue
    return {name: value for name, value in os.environ.items()
            if name in named or name in PASSED_VARIABLES or name.startswith("MEDALLION_")}


def _relay(connection: socket.socket, server: str) -> int | None:
    """Print the server's messages as they come; the command's exit code."""
    messages = connection.makefile("rb")
    announced = waiting = False
    while True:
        try:
            message = json.loads(messages.readline() or "null")
        except KeyboardInterrupt:
            if waiting:  # its command has not started: the server passes it over
                raise
            # Ctrl-C: the server cancels the command's Spark jobs when this side closes; its
            # report of what was cancelled still comes. A second Ctrl-C leaves without it.
            connection.shutdown(socket.SHUT_WR)
            continue
        except (OSError, ValueError):  # the server was killed mid-message
            message = None
        if message is None:
            print(f"Error: the server ({server}) stopped " + (
                "during the command; the models it finished are committed and the others' "
                "tables are as they were: run it again" if announced else
                "before running the command; run it again"), file=sys.stderr)
            return 1
        if "declined" in message:
            print(f"Note: {message['declined']}; running in a JVM of its own", file=sys.stderr)
            return None
        if "waiting" in message:
            print(f"Note: the server ({server}) is busy: {message['waiting']}."
                  " Ctrl-C stops waiting", file=sys.stderr)
            waiting = True
            continue
        waiting = False
        if not announced:
            print(f"(on the Spark of {server})", file=sys.stderr)
            announced = True
        if "exit" in message:
            code: int = message["exit"]
            return code
        stream = sys.stdout if "out" in message else sys.stderr
        stream.write(message.get("out", message.get("err")))
        stream.flush()
