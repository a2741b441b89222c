"""README.md and the reference pages under docs/ say only what the CLI and the config take.

No Spark and no Java: the CLI is read from its click group (`main.commands`), the config
vocabulary from SPELLED_KEYS. docs/ARCHITECTURE.md is left out (it describes the code).

How the pages are read:

- A *code piece* is a line of a fenced code block, or an inline code span (a paragraph's
  lines are joined first, so a span may wrap).
- A *command mention* is `medallion <word>` in a code piece (after an optional path such as
  `.venv/bin/`), and `medallion <group> <word>` for a group (`source freshness`). The long
  options checked against it are the `--xyz` written after it in the same piece, up to a
  shell separator (`&&`, `||`, `;`, ` | `), a comment (` #`) or the next mention.
- A *config key* is, in code: `key=` at the top level of `config(...)` inside `{{ ... }}`
  (string literals blanked first, so `delete_when="op = 'D'"` yields `delete_when` only); in a
  fenced block: each key of a `config:` mapping (a block mapping's first level, or a flow
  mapping `{...}` read with YAML); and each backticked name before the first `: ` of an item
  in the "The config vocabulary" list of docs/models-and-config.md. A `config:` under `tests:`
  or `data_tests:` is a data test's config (dbt's keys, TEST_CONFIG_KEYS below).
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
import yaml

from medallion_cli.cli.group import main
from medallion_cli.core.config import SPELLED_KEYS

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.glob("*.md") if p.name != "ARCHITECTURE.md")
CHECKED = [README, *PAGES]
README_MAX_LINES = 250
VOCABULARY_PAGE = DOCS / "models-and-config.md"
VOCABULARY_HEADING = "## The config vocabulary"
# A data test's config keys, as dbt's (severity, thresholds, store_failures, ...).
TEST_CONFIG_KEYS = ("severity", "error_if", "warn_if", "tags", "enabled", "name",
                    "store_failures")

# The three commands at the top of README.md, as CI runs them: byte for byte.
README_COMMANDS = (
    "# set up, then build the sample project (embedded engine: nothing but pip, works offline)\n"
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/medallion build\n",
    "# set up, then run the tests (the default tier: every behaviour once, the engine contract "
    "on both\n"
    "# engines, with S3, Kafka and Spark Connect started on loopback; Delta's JARs are fetched "
    "with\n"
    "# Maven, `mvn`, on first use). `-m slow` runs the slow tier: docs/testing.md\n"
    "python3 -m venv .venv && .venv/bin/pip install -e \".[test]\" && .venv/bin/python -m "
    "pytest\n",
    "# set up, then build the sample with Delta Lake for Spark (the delta-spark engine; "
    "`medallion jars`\n"
    "# fetches its JARs from Maven Central with `mvn`, once)\n"
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/medallion jars && "
    ".venv/bin/medallion build -t local-delta\n",
)

FENCE = re.compile(r"^\s*(```|~~~)")
SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.S)
MENTION = re.compile(r"(?<![\w./~-])(?:[\w.~-]*/)*medallion[ \t]+([a-z][a-z-]*)"
                     r"(?:[ \t]+([a-z][a-z-]*))?")
CUT = re.compile(r"&&|\|\||;|\s\|\s|\s#")
LONG_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
CONFIG_CALL = re.compile(r"\bconfig\((.*?)\)\s*\}\}", re.S)
STRING = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")
CALL_KEY = re.compile(r"(?:^|[(,])\s*([A-Za-z_][\w-]*)\s*=(?!=)")
YAML_CONFIG = re.compile(r"^(\s*)(-\s+)?config:\s*(.*)$")
YAML_KEY = re.compile(r"^(\s*)(-\s+)?([\w.-]+):(\s|$)")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def fenced_blocks(text: str) -> list[tuple[int, list[str]]]:
    """(line number of the block's first line, its lines) for each fenced code block."""
    blocks, current, start = [], None, 0
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            if current is None:
                current, start = [], number + 1
            else:
                blocks.append((start, current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def paragraphs(text: str) -> list[tuple[int, str]]:
    """(line number, text) of each run of prose lines outside fenced blocks."""
    found, lines, start, fenced = [], [], 0, False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        if fenced or FENCE.match(line) or not line.strip():
            if lines:
                found.append((start, "\n".join(lines)))
            lines = []
            continue
        if not lines:
            start = number
        lines.append(line)
    if lines:
        found.append((start, "\n".join(lines)))
    return found


def inline_spans(path: Path) -> list[tuple[int, str]]:
    """(line number, code) for every inline code span of a page, outside fenced blocks."""
    spans = []
    for start, paragraph in paragraphs(path.read_text()):
        for match in SPAN.finditer(paragraph):
            line = start + paragraph.count("\n", 0, match.start())
            spans.append((line, match.group(2).replace("\n", " ")))
    return spans


def code_pieces(path: Path) -> list[tuple[int, str]]:
    """(line number, code) for every fenced line and every inline code span of a page."""
    return [(start + i, line) for start, block in fenced_blocks(path.read_text())
            for i, line in enumerate(block)] + inline_spans(path)


def commands() -> dict[str, click.Command]:
    """'build', 'source freshness', ...: every command the CLI has, groups walked."""
    found = {}

    def walk(group: click.Group, prefix: str) -> None:
        for name, command in group.commands.items():
            found[prefix + name] = command
            if isinstance(command, click.Group):
                walk(command, prefix + name + " ")

    walk(main, "")
    return found


def long_options(command: click.Command) -> set[str]:
    options = {"--help"}
    for param in command.params:
        if isinstance(param, click.Option):
            options.update(o for o in (*param.opts, *param.secondary_opts) if o.startswith("--"))
    return options


def command_problems(path: Path) -> list[str]:
    known = commands()
    problems = []
    for line, code in code_pieces(path):
        mentions = list(MENTION.finditer(code))
        for i, mention in enumerate(mentions):
            name, sub = mention.group(1), mention.group(2)
            where = f"{rel(path)}:{line}"
            if name not in known:
                problems.append(f"{where}: `medallion {name}` is no command")
                continue
            command, shown, end = known[name], name, mention.end(1)
            if isinstance(command, click.Group):
                shown = f"{name} {sub}"
                if shown not in known:
                    problems.append(f"{where}: `medallion {shown}` is no command")
                    continue
                command, end = known[shown], mention.end(2)
            rest = code[end:mentions[i + 1].start() if i + 1 < len(mentions) else len(code)]
            rest = CUT.split(rest, maxsplit=1)[0]
            problems += [f"{where}: `medallion {shown}` has no option {option}"
                         for option in LONG_OPTION.findall(rest)
                         if option not in long_options(command)]
    return problems


def call_keys(path: Path) -> list[tuple[int, str]]:
    """(line, key) for each `key=` of a `{{ config(...) }}` in a fenced block or a span."""
    text = path.read_text()
    sources = [(start, "\n".join(block)) for start, block in fenced_blocks(text)]
    sources += [(line, code) for line, code in inline_spans(path) if "config(" in code]
    found = []
    for start, code in sources:
        for call in CONFIG_CALL.finditer(code):
            inner = STRING.sub("''", call.group(1))
            base = start + code.count("\n", 0, call.start(1))
            for key in CALL_KEY.finditer(inner):
                found.append((base + inner.count("\n", 0, key.start(1)), key.group(1)))
    return found


def _key_column(line: str) -> tuple[int, int, str] | None:
    """(indent, column of the key, key) of a YAML `key:` line (a list item's too)."""
    match = YAML_KEY.match(line)
    if not match:
        return None
    indent = len(match.group(1))
    return indent, indent + len(match.group(2) or ""), match.group(3)


def _under_tests(lines: list[str], index: int, column: int) -> bool:
    """Whether a key at `column` on lines[index] sits under a `tests:`/`data_tests:` key."""
    limit = column
    for line in reversed(lines[:index]):
        found = _key_column(line)
        if not found or not line.strip():
            continue
        indent, key_column, key = found
        if key_column < limit:
            if key in ("tests", "data_tests"):
                return True
            limit = min(indent, key_column)
    return False


def yaml_config_keys(path: Path) -> list[tuple[int, str, bool]]:
    """(line, key, is a data test's config) for each key of a `config:` mapping in a fenced
    block."""
    found = []
    for start, block in fenced_blocks(path.read_text()):
        for i, line in enumerate(block):
            match = YAML_CONFIG.match(line)
            if not match:
                continue
            column = len(match.group(1)) + len(match.group(2) or "")
            for_test = _under_tests(block, i, column)
            rest = match.group(3).split(" #")[0].strip()
            if rest.startswith("{"):
                mapping = yaml.safe_load(rest)
                found += [(start + i, str(key), for_test) for key in mapping]
                continue
            child = None
            for j in range(i + 1, len(block)):
                if not block[j].strip():
                    continue
                indent = len(block[j]) - len(block[j].lstrip())
                if indent <= column:
                    break
                child = indent if child is None else child
                key = _key_column(block[j])
                if indent == child and key:
                    found.append((start + j, key[2], for_test))
    return found


def vocabulary_keys() -> list[tuple[int, str]]:
    """(line, key) for each backticked name heading an item of the config vocabulary list."""
    lines = VOCABULARY_PAGE.read_text().splitlines()
    start = lines.index(VOCABULARY_HEADING)
    found = []
    for number, line in enumerate(lines[start + 1:], start + 2):
        if line.startswith("## "):
            break
        if line.startswith("- "):
            head = line[2:].split(": ", 1)[0]
            found += [(number, key) for key in re.findall(r"`([^`]+)`", head)]
    return found


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a page's headings (not of `#` lines in its code blocks)."""
    found, fenced = set(), False
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            found.add(slug(line.lstrip("#")))
    return found


@pytest.mark.unit
def test_readme_is_short_and_maps_every_page():
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES, \
        f"README.md has {len(text.splitlines())} lines; at most {README_MAX_LINES}"
    linked = {target.split("#")[0] for target in LINK.findall(text)
              if target.startswith("docs/")}
    missing = [rel(p) for p in PAGES if rel(p) not in linked]
    assert not missing, f"README.md links to no {', '.join(missing)}"
    absent = [target for target in sorted(linked) if not (ROOT / target).is_file()]
    assert not absent, f"README.md links to pages that do not exist: {', '.join(absent)}"


@pytest.mark.unit
def test_readme_keeps_the_three_commands_as_ci_runs_them():
    first_block = "\n".join(fenced_blocks(README.read_text())[0][1]) + "\n"
    assert first_block == "\n".join(README_COMMANDS), \
        "README.md's first code block is not the three commands as CI runs them"


@pytest.mark.unit
@pytest.mark.parametrize("page", CHECKED, ids=rel)
def test_commands_and_options_exist(page):
    problems = command_problems(page)
    assert not problems, "\n".join(problems)


@pytest.mark.unit
@pytest.mark.parametrize("page", CHECKED, ids=rel)
def test_config_keys_are_in_the_vocabulary(page):
    problems = [f"{rel(page)}:{line}: config key '{key}' in config(...) is not one medallion "
                "takes" for line, key in call_keys(page) if key not in SPELLED_KEYS]
    for line, key, for_test in yaml_config_keys(page):
        valid = TEST_CONFIG_KEYS if for_test else SPELLED_KEYS
        if key not in valid:
            problems.append(f"{rel(page)}:{line}: {'test ' if for_test else ''}config key "
                            f"'{key}' under config: is not one medallion takes")
    assert not problems, "\n".join(problems)


@pytest.mark.unit
def test_the_vocabulary_lists_every_key_and_no_other():
    listed = vocabulary_keys()
    wrong = [f"{rel(VOCABULARY_PAGE)}:{line}: '{key}' is no config key"
             for line, key in listed if key not in SPELLED_KEYS]
    assert not wrong, "\n".join(wrong)
    unlisted = sorted(set(SPELLED_KEYS) - {key for _, key in listed})
    assert not unlisted, (f"{rel(VOCABULARY_PAGE)}: the config vocabulary does not list "
                          f"{', '.join(unlisted)}")


@pytest.mark.unit
@pytest.mark.parametrize("page", CHECKED, ids=rel)
def test_links_between_pages_resolve(page):
    problems = []
    for number, line in enumerate(page.read_text().splitlines(), 1):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            file, _, anchor = target.partition("#")
            linked = (page.parent / file).resolve() if file else page
            if not linked.exists():
                problems.append(f"{rel(page)}:{number}: {target}: no such file")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                problems.append(f"{rel(page)}:{number}: {target}: no such heading")
    assert not problems, "\n".join(problems)
