"""`medallion lint` and `medallion format`: the models' SQL checked and laid out by sqlfluff
(Spark's dialect), on the files as written: sqlfluff's Jinja templater renders each with dbt's
builtins (ref, source, config, var, is_incremental, this) and the project's macros, and maps
each finding back to the file's own line; fixes touch only the SQL outside Jinja tags. The
project's own `.sqlfluff` (or setup.cfg, tox.ini, pyproject.toml) wins over these defaults.
Needs sqlfluff: `pip install 'medallion-cli[lint]'`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.errors import MedallionError
from .invocation import Invocation, load, selected_nodes

if TYPE_CHECKING:
    from ..core.project import Project

# Medallion's defaults: Spark SQL, rendered as Medallion renders it; lines as long as the
# project's own Python and docs keep them
DEFAULTS: dict[str, Any] = {"core": {"dialect": "sparksql", "templater": "jinja",
                                     "max_line_length": 100},
                            "templater": {"jinja": {"apply_dbt_builtins": True}}}
LAYOUT_RULES = "layout,capitalisation"  # what `format` changes: never the query's meaning


@dataclass(frozen=True)
class LintFinding:
    path: str  # the model's file, relative to the project
    line: int
    column: int
    code: str  # sqlfluff's rule (TMP: the template did not render; PRS: it did not parse)
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}: {self.code} {self.message}"


def _linter(project: Project, rules: str | None) -> Any:
    """sqlfluff's linter with Medallion's defaults under the project's own config."""
    try:
        from sqlfluff.core import FluffConfig, Linter
        from sqlfluff.core.config.loader import load_config_at_path
        from sqlfluff.core.helpers.dict import nested_combine
    except ImportError:
        raise MedallionError("medallion lint and format need sqlfluff",
                             hint="pip install 'medallion-cli[lint]'") from None
    macros = ",".join(str(p) for p in dict.fromkeys(f.parent for f in project.macro_files))
    ours = nested_combine(DEFAULTS, {"templater": {"jinja": {"load_macros_from_path": macros}}}
                          if macros else {})
    # sqlfluff keeps a folder's config for its process; a command reads the files as they are
    theirs = load_config_at_path.__wrapped__(str(project.root))
    layout: dict[str, Any] = {"core": {"rules": rules}} if rules else {}
    return Linter(config=FluffConfig(configs=nested_combine(ours, theirs, layout)))


def lint_models(inv: Invocation, fix: bool = False, rules: str | None = None
                ) -> tuple[list[LintFinding], list[str]]:
    """The selected models' findings (after fixing them with fix), and the files fixed."""
    loaded = load(inv)
    linter = _linter(loaded.project, rules)
    found, fixed = [], []
    for name in selected_nodes(inv, loaded, ("model",)):
        node = loaded.graph.nodes[name].file
        text = node.path.read_text()
        linted = linter.lint_string(text, fname=node.rel_path, fix=fix)
        if fix:
            new, _ = linted.fix_string()
            if new != text:
                node.path.write_text(new)
                fixed.append(node.rel_path)
        found += [LintFinding(node.rel_path, v.line_no, v.line_pos, v.rule_code(), v.desc())
                  for v in linted.get_violations() if not (fix and getattr(v, "fixes", None))]
    return found, fixed


def format_models(inv: Invocation, check: bool = False) -> list[str]:
    """Lay out the selected models (sqlfluff's layout and capitalisation rules); the files
    changed, or with check those that would be, nothing written."""
    if not check:
        return lint_models(inv, fix=True, rules=LAYOUT_RULES)[1]
    found, _ = lint_models(inv, rules=LAYOUT_RULES)
    return sorted({f.path for f in found if f.code not in ("TMP", "PRS")})
