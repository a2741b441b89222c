"""Jinja templates compiled once per process and reused while their source is unchanged (Jinja
checks each one's checksum): every command renders the project, and a --watch refresh renders
it again each time, so compiling is most of a load's work unless it is kept.
"""

from __future__ import annotations

import jinja2
import jinja2.bccache


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
