"""Jinja templates: their sources (the project's files, or an editor's unsaved text of one,
with dbt's `{% test %}` blocks as macros), compiled once per process and reused while their
source is unchanged (Jinja checks each one's checksum): every command renders the project, and a
--watch refresh renders it again each time, so compiling is most of a load's work unless kept.
"""

from __future__ import annotations

import os
import re
from typing import Any

import jinja2
import jinja2.bccache

TEST_BLOCK = re.compile(r"{%(-?)\s*test\s+(\w+)\s*\(")
END_TEST_BLOCK = re.compile(r"{%(-?)\s*endtest\s*(-?)%}")


def test_blocks_as_macros(text: str) -> str:
    """`{% test name(model, ...) %}...{% endtest %}` (dbt's generic test syntax) as a macro named
    test_<name>, so generic tests are ordinary macros; lines stay where they were."""
    text = TEST_BLOCK.sub(lambda m: "{%" + m.group(1) + " macro test_" + m.group(2) + "(", text)
    return END_TEST_BLOCK.sub(lambda m: "{%" + m.group(1) + " endmacro " + m.group(2) + "%}", text)


class ProjectLoader(jinja2.FileSystemLoader):
    """The project's files, or the text an editor holds of one (texts: rel path -> text)."""

    def __init__(self, root: str, texts: dict[str, str]):
        super().__init__(root)
        self.texts = texts

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Any]:
        if template in self.texts:
            return (test_blocks_as_macros(self.texts[template]),
                    os.path.join(str(self.searchpath[0]), template), lambda: False)
        source, filename, uptodate = super().get_source(environment, template)
        return test_blocks_as_macros(source), filename, uptodate


class _CompiledTemplates(jinja2.BytecodeCache):
    """Compiled templates in memory, by name and source checksum (Jinja's bytecode cache)."""

    def __init__(self) -> None:
        self.code: dict[str, bytes] = {}

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if bucket.key in self.code:
            bucket.bytecode_from_string(self.code[bucket.key])

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self.code[bucket.key] = bucket.bytecode_to_string()

    def template(self, env: jinja2.Environment, name: str, source: str) -> jinja2.Template:
        """A template made from `source`, not from a file (env.from_string, kept). `name` says
        where it is used, so environments compiled differently never share one."""
        bucket = self.get_bucket(env, name, None, source)
        if bucket.code is None:
            bucket.code = env.compile(source, name)
            self.set_bucket(bucket)
        return env.template_class.from_code(env, bucket.code, env.make_globals(None))


COMPILED = _CompiledTemplates()
# env_var() in a YAML file or a source's option: no names but env_var, an unknown one an error.
STRICT = jinja2.Environment(undefined=jinja2.StrictUndefined)


def strict_template(source: str) -> jinja2.Template:
    return COMPILED.template(STRICT, "<env_var>", source)
