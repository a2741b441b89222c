"""After cookiecutter renders the template: bring in the example project and pin the runner.

The example models, macros, seeds, landing files and tests are copied from the template
repository's root, which is itself the sample project, so they exist in one place only.
requirements.txt points at this same repository, so the project depends on the medallion_cli
package rather than carrying a copy of it.
"""

import os
import re
import shutil
import sys
from pathlib import Path

TEMPLATE = "{{ cookiecutter._template }}"
INCLUDE_EXAMPLES = "{{ cookiecutter.include_examples }}" == "yes"
# Copied from the repository root when examples are wanted (globs, relative to the root).
EXAMPLES = ["models/**/*", "macros/*.sql", "seeds/*", "landing/**/*", "tests/*.sql",
            "tests/unit/*.yml", "tests/examples/*.sql", "tests/generic/*.sql",
            "tests/test_sample_*.py"]


def template_root() -> Path:
    """The template repository's folder. Hooks run inside the new project, so a relative path
    (`cookiecutter .`) is taken from where cookiecutter was started: the shell's PWD."""
    given = Path("{{ cookiecutter._repo_dir }}")
    root = given if given.is_absolute() else Path(os.environ.get("PWD", "")) / given
    if not (root / "cookiecutter.json").is_file():
        sys.exit(f"cannot find the Medallion template at {root}; run cookiecutter with the "
                 "template's absolute path")
    return root.resolve()


REPO = template_root()


def package_requirement() -> str:
    """medallion-cli from where this template came from: a git URL or a local folder."""
    if re.match(r"^(git\+|https?://|git@|ssh://|gh:)", TEMPLATE):
        url = TEMPLATE if TEMPLATE.startswith("git+") else f"git+{TEMPLATE}"
        return f"medallion-cli[test] @ {url}"
    return f"medallion-cli[test] @ {REPO.resolve().as_uri()}"


def copy_examples(project: Path) -> None:
    for pattern in EXAMPLES:
        for src in REPO.glob(pattern):
            if src.is_file():
                dest = project / src.relative_to(REPO)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest)
    for keep in project.rglob(".gitkeep"):
        if any(p != keep for p in keep.parent.iterdir()):
            keep.unlink()


def main() -> None:
    project = Path.cwd()
    if INCLUDE_EXAMPLES:
        copy_examples(project)
    (project / "requirements.txt").write_text(package_requirement() + "\n")


main()
