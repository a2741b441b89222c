"""Locations: where tables and checkpoints live, a local folder or an object-store URI.

A location is a plain str: an absolute local path (`/data/lake/silver/orders`) or a URI with a
scheme (`s3a://bucket/lake/silver/orders`, `abfss://container@account.dfs.core.windows.net/lake`).
`file://` URIs are turned into local paths when the warehouse is resolved, so "remote" means
exactly "has a scheme". Parts are joined with `/`, as both local paths and URIs are written.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

COMMIT_OR_CHECKPOINT = r"^\d{20}\.(json|checkpoint(\.[^.]+)*\.(parquet|json))$"
COMMIT = r"^(\d{20})\.json$"


def _scheme(value: str) -> str:
    # One letter before ':' is a Windows drive (C:\lake), not a scheme.
    scheme = urlsplit(value).scheme
    return scheme.lower() if len(scheme) > 1 else ""


def resolve(value: str, base: str | Path) -> str:
    """A location from a config value (a profile's warehouse, a source's path).

    A relative path is taken from `base` (the project root, or a source's own location, which may
    be a URI), a `file://` URI becomes a local absolute path, any other URI (s3a, s3, abfss, wasbs,
    gs, hdfs, dbfs, ...) stays as given without a trailing slash. Raises ValueError for a URI that
    names no place."""
    scheme = _scheme(value)
    if scheme == "file":
        parts = urlsplit(value)
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"{value} names a host ({parts.netloc}); a file:// location is a "
                             "local folder: file:///absolute/path")
        return str(Path(unquote(parts.path)).resolve())
    if scheme:
        location = value.rstrip("/")
        if not location.split(":", 1)[1].strip("/"):
            raise ValueError(f"{value} names no bucket, container or folder")
        return location
    path = Path(value)
    if path.is_absolute():
        return str(path.resolve())
    if is_remote(str(base)):
        return join(str(base), posixpath.normpath(value))
    return str((Path(base) / path).resolve())


S3_SCHEMES = ("s3", "s3a")


def on_s3(location: str | None) -> bool:
    return bool(location) and _scheme(str(location)) in S3_SCHEMES


def is_remote(location: str) -> bool:
    """Whether the location is on object storage (or HDFS...), not on this machine's disk."""
    return _scheme(location) not in ("", "file")


def local_table_exists(path: str) -> bool:
    """Whether a local folder holds a Delta table: its log has a commit or a checkpoint (early
    commits may be cleaned up). Read from the files, not by loading the table: cheap, and a
    table with a feature a reader lacks is still there, and must not be taken for none."""
    log = Path(path) / "_delta_log"
    return log.is_dir() and any(re.match(COMMIT_OR_CHECKPOINT, p.name) for p in log.iterdir())


def local_table_version(path: str) -> int | None:
    """A local table's newest version, from its log's commit file names (None when it has none,
    or is not local): what loading the table says, for a listing instead of a replay of its log
    (10 ms a table under `build --watch`, where every refresh asks it of every input). Commits
    are written whole under their name (a rename), and the newest is never cleaned up."""
    log = Path(path) / "_delta_log"
    if is_remote(str(path)) or not log.is_dir():
        return None
    return max((int(m.group(1)) for p in log.iterdir() if (m := re.match(COMMIT, p.name))),
               default=None)


def data_files(folder: str | Path) -> list[Path]:
    """The files under a local folder that Spark reads, sorted: not those whose names start
    with '.' or '_' (checksums, _SUCCESS, files being written)."""
    return sorted(p for p in Path(folder).rglob("*")
                  if p.is_file() and not p.name.startswith((".", "_")))


def local_files(location: str | Path) -> list[tuple[str, int, int]]:
    """(path within the folder, size, modified in ns) of every file under a local folder; a
    location that is one file (a source table's `path` may name one): that file, by name."""
    location = Path(location)
    if location.is_file():
        return [_file_facts(location.name, location)]
    return sorted(_file_facts(str(p.relative_to(location)), p)
                  for p in location.rglob("*") if p.is_file())


def _file_facts(name: str, path: Path) -> tuple[str, int, int]:
    stat = path.stat()  # once: size and mtime from one system call
    return name, stat.st_size, stat.st_mtime_ns


def join(location: str, *parts: str) -> str:
    """`location/part/part`."""
    return "/".join([location.rstrip("/"), *parts])
