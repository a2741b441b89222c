"""After cookiecutter renders the template: bring in the example project and pin the runner.

The example models, macros, seeds, landing files and tests are copied from the template
repository's root, which is itself the sample project, so they exist in one place only.
requirements.txt names the medallion-cli package, so the project depends on it rather than
carrying a copy of its code, and names it in a way that installs on a teammate's machine too,
with nothing but the package registries: a git template's repository at its commit; a version
from the team's index; or, when this medallion-cli came from a wheel file or a clone, that
wheel in the project's `wheels/` folder, which requirements.txt points pip at. Never a path on
the machine that generated the project.
"""

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

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
    return f"{PACKAGE}[dev] @ {url}" + ("" if pinned or not commit else f"@{commit}")


def installed_origin() -> dict:
    """Where pip installed the running medallion-cli from (its direct_url.json: a git URL, a
    wheel file or a folder); empty when it came from an index. A checkout's own egg-info, found
    first when the checkout is the working folder, records nothing, so every copy is asked."""
    for dist in metadata.distributions(name=PACKAGE):
        recorded = dist.read_text("direct_url.json")
        if recorded:
            return json.loads(recorded)
    return {}


def installed_vcs_reference(origin: dict) -> str | None:
    """The git URL and commit pip recorded if the running medallion-cli came from one."""
    vcs = origin.get("vcs_info")
    if vcs and remote_url(origin["url"]):
        return vcs_requirement(origin["url"], vcs.get("commit_id"))
    return None


def local_path(url: str) -> Path | None:
    return Path(unquote(urlparse(url).path)) if url.startswith("file:") else None


def wheel_into(project: Path, origin: dict) -> bool:
    """Put a wheel of this medallion-cli in the project's wheels/: the wheel file it was
    installed from, or one built from the folder it was installed from (a clone), or from this
    template's own checkout when cookiecutter runs on one. False when there is neither (it came
    from an index, which serves it to the project too)."""
    source = local_path(origin.get("url", ""))
    wheels = project / "wheels"
    if source and source.suffix == ".whl" and source.is_file():
        wheels.mkdir(exist_ok=True)
        shutil.copy2(source, wheels / source.name)
        return True
    folder = source if source and source.is_dir() else None
    if folder is None and not origin and not installed() and is_checkout(REPO):
        folder = REPO  # cookiecutter on a clone, with no medallion-cli installed
    if folder is None or not is_checkout(folder):
        return False
    wheels.mkdir(exist_ok=True)
    kept = kept_wheel(folder)
    if kept is None:
        build_wheel(folder, wheels)
    else:
        for wheel in kept.glob("medallion_cli-*.whl"):
            shutil.copy2(wheel, wheels / wheel.name)
    return True


def kept_wheel(folder: Path) -> Path | None:
    """The folder holding a wheel built from the checkout as its files are now, kept under the
    user's cache by a hash of those files (git's list: tracked, and new but not ignored): a
    second project from an unchanged clone takes it instead of building it again (3 s). None
    when the folder is not a git checkout (nothing to key it by)."""
    listed = git(folder, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    if listed is None:
        return None
    digest = hashlib.sha256()
    for name in sorted(filter(None, set(listed.split("\0")))):
        file = folder / name
        if file.is_file():
            digest.update(name.encode() + b"\0" + file.read_bytes())
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "medallion"
    kept = cache / "wheels" / digest.hexdigest()[:16]
    kept.parent.mkdir(parents=True, exist_ok=True)
    # One build at a time: two at once from one checkout share its build/ folder, and one
    # fails ("File exists"); the second init waits, then takes the first's wheel.
    with open(kept.parent.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not list(kept.glob("medallion_cli-*.whl")):
            building = build_wheel(folder, Path(tempfile.mkdtemp(dir=kept.parent)))
            os.replace(building, kept)  # whole or not at all
    return kept


def build_wheel(folder: Path, into: Path) -> Path:
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                            "-w", str(into), str(folder)], capture_output=True, text=True)
    if built.returncode != 0:
        sys.exit(f"cannot build a wheel of medallion-cli from {folder} for the project's "
                 f"wheels/ folder:\n{built.stderr.strip()}")
    return into


def is_checkout(folder: Path) -> bool:
    return (folder / "pyproject.toml").is_file() and (folder / "medallion_cli").is_dir()


def installed() -> bool:
    try:
        metadata.version(PACKAGE)
        return True
    except metadata.PackageNotFoundError:
        return False


def version() -> str:
    """The running package's version; cookiecutter run by hand on a checkout may have none
    installed, so the checkout's pyproject.toml says it then."""
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        text = (REPO / "pyproject.toml").read_text()
        return re.search(r'^version = "([^"]+)"', text, re.M).group(1)


def requirements(project: Path) -> str:
    """A git template: that repository at the commit cookiecutter cloned. Else the git reference
    pip installed the running package from; else its version, from the project's wheels/ when
    it came from a wheel file or a clone (a clone's remote may not be reachable from where the
    project is set up; the registries are), from the team's index otherwise."""
    if remote_url(TEMPLATE):
        return vcs_requirement(TEMPLATE, git(REPO, "rev-parse", "HEAD")) + "\n"
    origin = installed_origin()
    pinned = f"{PACKAGE}[dev]=={version()}\n"
    vcs = installed_vcs_reference(origin)
    if vcs:
        return vcs + "\n"
    if wheel_into(project, origin):
        return ("# medallion-cli from the wheel in wheels/ (keep it with the project); once your "
                "team's index\n# serves medallion-cli, delete wheels/ and the next line\n"
                "--find-links ./wheels\n" + pinned)
    return pinned


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
    (project / "requirements.txt").write_text(requirements(project))


main()
