"""After cookiecutter renders the template: bring in the example project and pin the runner.

The example models, macros, seeds, landing files and tests are copied from the template
repository's root, which is itself the sample project, so they exist in one place only.
requirements.txt names the medallion-cli package, so the project depends on it rather than
carrying a copy, and names it in a way that works on a teammate's machine too: a VCS reference
with its commit, or a version; never a path on the machine that generated the project.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

TEMPLATE = "{{ cookiecutter._template }}"
INCLUDE_EXAMPLES = "{{ cookiecutter.include_examples }}" == "yes"
# Copied from the template's root when examples are wanted (globs, relative to the root); the
# package's build reads the same list to ship them inside the package.
EXAMPLES = json.loads('{{ cookiecutter._examples | tojson }}')
PACKAGE = "medallion-cli"


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


def remote_url(url: str) -> bool:
    return bool(re.match(r"^(git\+|https?://|git@|ssh://|gh:)", url))


def git(folder: Path, *args: str) -> str | None:
    """A git command's output in folder, if folder is a git checkout (cookiecutter's clone of a
    git template, or a clone of the template's repository)."""
    if not (folder / ".git").exists():
        return None
    run = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True)
    return run.stdout.strip() or None


def vcs_requirement(url: str, commit: str | None) -> str:
    """pip's form of a git URL, at commit unless the URL names a ref already."""
    if url.startswith("gh:"):
        url = "https://github.com/" + url.removeprefix("gh:")
    scp_like = re.match(r"^git@([^:/]+):(.+)$", url)
    if scp_like:
        url = f"ssh://git@{scp_like[1]}/{scp_like[2]}"
    url = url if url.startswith("git+") else f"git+{url}"
    pinned = "@" in url.rsplit("/", 1)[-1]
    return f"{PACKAGE}[test] @ {url}" + ("" if pinned or not commit else f"@{commit}")


def installed_vcs_reference() -> str | None:
    """The git URL and commit pip recorded if the running medallion-cli came from one."""
    try:
        recorded = metadata.distribution(PACKAGE).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    origin = json.loads(recorded or "{}")
    vcs = origin.get("vcs_info")
    if vcs and remote_url(origin["url"]):
        return vcs_requirement(origin["url"], vcs.get("commit_id"))
    return None


def version() -> str:
    """The running package's version; cookiecutter run by hand on a checkout may have none
    installed, so the checkout's pyproject.toml says it then."""
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        text = (REPO / "pyproject.toml").read_text()
        return re.search(r'^version = "([^"]+)"', text, re.M).group(1)


def package_requirement() -> str:
    """A git template: that repository at the commit cookiecutter cloned; a clone of it: its
    origin at the commit checked out. Otherwise the git reference pip installed the running
    package from, else its version (served by the team's package index, or --find-links)."""
    if remote_url(TEMPLATE):
        return vcs_requirement(TEMPLATE, git(REPO, "rev-parse", "HEAD"))
    origin = git(REPO, "remote", "get-url", "origin")
    if origin and remote_url(origin):
        return vcs_requirement(origin, git(REPO, "rev-parse", "HEAD"))
    return installed_vcs_reference() or f"{PACKAGE}[test]=={version()}"


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
