"""Medallion's own Java classes (a Delta log store, the SQL endpoint's password check), each
compiled once from its source beside the module that uses it, with javac, into a JAR in the JAR
cache, where it is reused while its source and the JARs it is compiled against are unchanged."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from ..core.errors import MedallionError
from . import jars


def compiled_jar(source: Path, class_path: list[Path], what: str) -> Path:
    """The JAR of `source` compiled against `class_path`; `what` names it in errors ("the S3
    log store that ..."). The folder is named by the source and the class path's JARs."""
    digest = hashlib.sha256(source.read_bytes() + "".join(
        jar.name for jar in class_path).encode()).hexdigest()[:10]
    where = jars.cache_root() / f"{source.stem}-{digest}"
    jar = where / f"{source.stem}.jar"
    if jar.is_file():
        return jar
    javac = java_compiler(what)
    where.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{source.stem}-", dir=where.parent))
    try:
        classes = staging / "classes"
        run = subprocess.run(
            [javac, "--release", "17", "-nowarn", "-d", str(classes), "-cp",
             os.pathsep.join(map(str, class_path)), str(source)],
            capture_output=True, text=True)
        if run.returncode != 0:
            first = next((ln for ln in run.stderr.splitlines() if "error" in ln), run.stderr)
            raise MedallionError(f"{what} did not compile: {first.strip()}",
                                 path=source, hint="report it with this line")
        with zipfile.ZipFile(staging / jar.name, "w") as archive:
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        shutil.rmtree(classes)
        try:
            staging.rename(where)  # atomic: another command that finished first wins
        except OSError:
            if not jar.is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return jar


def java_compiler(what: str) -> str:
    """javac: JAVA_HOME's, else the PATH's."""
    home = os.environ.get("JAVA_HOME")
    found = (home and shutil.which("javac", path=str(Path(home) / "bin"))) or shutil.which("javac")
    if not found:
        raise MedallionError(f"no Java compiler (javac) was found to build {what}",
                             hint="install a JDK (not only a JRE), e.g. apt-get install "
                                  "openjdk-17-jdk-headless")
    return found
