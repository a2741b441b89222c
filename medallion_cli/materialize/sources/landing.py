"""Landing files (json, csv, parquet) read so that no row is lost, doubled or silently wrong.

- Fields a JSON line has beyond the declared schema are kept in `_rescued_data` (as Auto
  Loader does), or fail the build, or are dropped only when the source says
  `unknown_fields: ignore`.
- A CSV file's header must name the schema's columns in order: Spark maps CSV columns by
  position, so a swapped header would put values in the wrong columns.
- A line that is not valid UTF-8 is a malformed row whose raw bytes are kept, base64-escaped, in
  `_corrupt_record`: a Delta table holds only valid UTF-8 for its readers.
- A stream of JSON or CSV files with no declared schema takes the schema inferred from the files
  landed when it is first read (as Auto Loader does) and keeps it in the warehouse
  (`_medallion/schemas/<source>.ddl`), so the stream's columns do not change under it: fields
  later files add are rescued like any field outside a declared schema (JSON), never dropped.
- A stream reads every landed file however old its mtime (Spark skips files over 7 days older
  than the newest unless told otherwise), and a file that changed after it was read is reported.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from ...core.errors import SourceError
from ...core.locations import COMMIT_OR_CHECKPOINT, data_files, is_remote
from ...core.project import SourceTable
from ..context import CORRUPT_COLUMN, SOURCE_FILE_COLUMN
from .debezium import decoded
from .json_values import readable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameReader, SparkSession
    from pyspark.sql.streaming.readwriter import DataStreamReader
    from pyspark.sql.types import StructField, StructType

# Spark's file stream source forgets files this much older than the newest one it has seen.
EVERY_FILE = "36500d"
# Spark reads these options itself; a JSON line read as text would ignore them.
WHOLE_FILE_OPTIONS = ("multiline", "encoding", "charset")


def read_landing(spark: SparkSession, source: SourceTable, streaming: bool) -> DataFrame:
    """The source's files as rows: the schema's columns, `_corrupt_record` (json, csv),
    `_rescued_data` (json), and `_source_file`."""
    options = dict(source.options)
    if streaming and not any(k.lower() == "maxfileage" for k in options):
        options["maxFileAge"] = EVERY_FILE
    reader = spark.readStream if streaming else spark.read
    schema: str | StructType | None  # a Parquet stream's is read from its files
    schema = source.schema
    if source.format == "json" and schema and (source.unknown_fields != "ignore" or source.cdc):
        rows = _json_with_rescue(reader, source, schema, options)
    else:
        if source.format == "csv":
            options.setdefault("header", "true")
            if schema and str(options["header"]).lower() == "true":
                options.setdefault("enforceSchema", "false")  # check the header's names
        if schema and source.format in ("json", "csv"):
            # Rows that do not fit the schema keep their raw text here instead of becoming nulls.
            schema = f"{schema}, {CORRUPT_COLUMN} string"
            options.setdefault("columnNameOfCorruptRecord", CORRUPT_COLUMN)
        if streaming and not schema:
            if source.format != "parquet":
                raise SourceError(
                    f"source '{source.source}.{source.name}' is read as a stream and needs a "
                    "schema", path=source.origin,
                    hint="add schema: 'col type, ...' to the source table")
            schema = spark.read.parquet(str(source.path)).schema  # Parquet carries its own
        reader = reader.format(source.format)
        if schema:
            reader = reader.schema(schema)
        rows = reader.options(**options).load(str(source.path))
        rows = rows.select("*", rows["_metadata.file_path"].alias(SOURCE_FILE_COLUMN))
    if CORRUPT_COLUMN in rows.columns:
        rows = rows.withColumn(CORRUPT_COLUMN, readable(rows[CORRUPT_COLUMN]))
    return rows


def inferred_schema(spark: SparkSession, source: SourceTable, kept: str) -> str:
    """The schema of a streaming JSON or CSV source that declares none, as DDL: the one kept at
    `kept`, else inferred from the files landed now and kept there. With unknown_fields:
    add_new_columns, the fields of files landed since it was kept are added to it (the files
    it has seen are kept beside it)."""
    if is_remote(kept) or is_remote(source.path):
        raise SourceError(
            f"source '{source.source}.{source.name}' is read as a stream and declares no schema; "
            "an inferred one is kept only for local files and a local warehouse",
            path=source.origin, hint="add schema: 'col type, ...' to the source table")
    path, seen_path = Path(kept), Path(kept + ".files")
    landed = [str(p) for p in data_files(source.path)]
    if path.is_file():
        ddl = path.read_text()
        if source.unknown_fields != "add_new_columns":
            return ddl
        # a schema kept before this mode was set: its files count as seen
        seen = set(json.loads(seen_path.read_text())) if seen_path.is_file() else set(landed)
        new = [f for f in landed if f not in seen]
        from ...spark.pyspark_api import T

        # pyspark types fromDDL as DataType's; a DDL of columns gives a StructType
        names = T.StructType.fromDDL(ddl).fieldNames()  # type: ignore[attr-defined]
        known = {name.lower() for name in names}
        added = [f for f in _fields(spark, source, new) if f.name.lower() not in known]
        ddl = ", ".join([ddl] + [_ddl(f) for f in added])
    else:
        fields = _fields(spark, source, landed)
        if not fields:
            raise SourceError(
                f"source '{source.source}.{source.name}' declares no schema and has no rows to "
                f"infer one from at {source.path}", path=source.origin,
                hint="land a file first, or add schema: 'col type, ...' to the source table")
        ddl = ", ".join(_ddl(f) for f in fields)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(ddl)
    seen_path.write_text(json.dumps(landed))
    return ddl


def _fields(spark: SparkSession, source: SourceTable, files: list[str]) -> list[StructField]:
    """The fields Spark infers from these files (none from no files)."""
    if not files:
        return []
    options = {k: v for k, v in source.options.items() if k.lower() != "maxfileage"}
    reader = spark.read.options(**options)
    if source.format == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    try:
        found = reader.format(source.format).load(files).schema
    except Exception as exc:
        if "UNABLE_TO_INFER_SCHEMA" not in str(exc):
            raise
        return []
    return [f for f in found.fields if f.name != CORRUPT_COLUMN]


def _ddl(field: StructField) -> str:
    return f"`{field.name}` {field.dataType.simpleString()}"


def _json_with_rescue(reader: DataFrameReader | DataStreamReader, source: SourceTable,
                      schema: str, options: dict[str, str]) -> DataFrame:
    """JSON lines read as text and parsed here, so that the fields outside the schema can be
    seen: Spark's JSON reader drops them."""
    from ...spark.pyspark_api import F

    if any(k.lower() in WHOLE_FILE_OPTIONS for k in options):
        raise SourceError(
            f"source '{source.source}.{source.name}': fields outside the schema can only be "
            "rescued from JSON Lines files (one UTF-8 object per line), not with multiLine or "
            "encoding", path=source.origin,
            hint="set unknown_fields: ignore on the source table to drop such fields")
    lines = reader.format("text").options(**options).load(str(source.path))
    lines = lines.where(F.trim("value") != "").select(  # blank lines are no rows, as in Spark
        "value", lines["_metadata.file_path"].alias(SOURCE_FILE_COLUMN))
    return decoded(lines, source, schema, options, F.col(SOURCE_FILE_COLUMN))


def changed_after_read(checkpoint: str) -> list[str]:
    """Landed files whose mtime is newer than when the model's stream read them: a file still
    being written when it was read (its later bytes were never read) or rewritten in place.
    Not a Delta table's commits (the embedded engine's streams over tables read them as
    files): they never change, so a newer mtime only says the warehouse was copied."""
    if is_remote(checkpoint):
        return []
    changed, read = [], _as_read(Path(checkpoint) / READ_FOLDER)
    for entry in _read_files(Path(checkpoint) / "sources"):
        path = unquote(urlparse(entry["path"]).path)
        if _is_commit(Path(path)):
            continue
        # as read, when that was later than listed (a batch left for a growing file)
        seen = read.get(entry.get("batchId", -1), {}).get(path, entry["timestamp"])
        try:
            # Whole milliseconds as Java gives them; st_mtime (a float) can round up into the
            # next millisecond and make an untouched file look changed.
            modified = Path(path).stat().st_mtime_ns // 1_000_000
        except OSError:
            continue  # moved away after reading (Spark's cleanSource, or by hand)
        if modified > seen:
            changed.append(path)
    return sorted(changed)


def _as_read(folder: Path) -> dict[int, dict[str, int]]:
    """batch id -> {landed file: its mtime in ms when the batch read it}."""
    if not folder.is_dir():
        return {}
    return {int(p.name): json.loads(p.read_text()) for p in folder.iterdir() if p.name.isdigit()}


class StillBeingWritten(SourceError):
    """A landed file a micro-batch is about to read is still being written: the batch waits
    (uncommitted) for the next build or trigger, which reads the same files, whole by then."""


READ_FOLDER = "medallion_read"  # in a checkpoint: each batch's landed files' mtimes as read
# a whole-second mtime this recent may be a coarse one (FAT keeps 2 s): looked at twice
SETTLING_SECONDS = 2.0
SECOND_LOOK_SECONDS = 0.25


def check_settled(checkpoint: str, batch_id: int, origin: str) -> None:
    """Refuse to read a batch with a landed file that is still growing: modified a moment ago,
    and changing between two looks. A file copied in whole is read at once, even a second
    after it landed: its second look finds it as it was. (A batch's files are fixed when Spark
    plans it, so a batch left now reads the same files, whole, when it runs again.)

    A file is read once it has been quiet for SECOND_LOOK_SECONDS. Where its mtime has
    fractions of a second, the mtime says since when: the second look waits only for the rest
    (a file landed 0.3 s before its batch is read without a pause). A whole-second mtime may
    be a coarse one (up to 2 s behind, on some file systems): such a file is quiet only from
    the first look."""
    if is_remote(checkpoint):
        return
    files = [unquote(urlparse(e["path"]).path)
             for e in _read_files(Path(checkpoint) / "sources") if e.get("batchId") == batch_id]
    looks = {path: _look(path) for path in files if not _is_commit(Path(path))}
    now = time.time()
    quiet_since = {path: min(look[1] / 1e9, now) if look[1] % 1_000_000_000 else now
                   for path, look in looks.items()
                   if look and now - look[1] / 1e9 < SETTLING_SECONDS}
    recent = {path: looks[path] for path, since in quiet_since.items()
              if now - since < SECOND_LOOK_SECONDS}
    growing = []
    if recent:
        time.sleep(max(quiet_since[path] for path in recent) + SECOND_LOOK_SECONDS - now)
        growing = [path for path, look in recent.items() if _look(path) != look]
    if looks and not growing:  # as read: a later change is one the batch missed
        read = Path(checkpoint) / READ_FOLDER / str(batch_id)
        read.parent.mkdir(exist_ok=True)
        read.write_text(json.dumps({path: look[1] // 1_000_000
                                    for path, look in looks.items() if look}))
    if growing:
        raise StillBeingWritten(
            f"landed file(s) still being written: {', '.join(sorted(growing))}; the batch "
            "reading them is left for the next build or trigger, which reads them whole",
            path=origin, hint="land files atomically: write them elsewhere, then move them "
                              "into the landing folder")


def _look(path: str) -> tuple[int, int] | None:
    """(size, mtime in ns), or None for a file moved away."""
    try:
        facts = Path(path).stat()
    except OSError:
        return None
    return facts.st_size, facts.st_mtime_ns


def _read_files(sources: Path) -> list[dict[str, Any]]:
    """The files a file stream source's log says were read: the newest compacted log file and
    the batch files after it, per source of the query."""
    entries = []
    for log in sorted(p for p in sources.glob("*") if p.is_dir()) if sources.is_dir() else []:
        batches = sorted((int(p.name.split(".")[0]), p) for p in log.iterdir()
                         if p.name.split(".")[0].isdigit())
        compacted = [i for i, (_, p) in enumerate(batches) if p.name.endswith(".compact")]
        for _, p in batches[compacted[-1] if compacted else 0:]:
            for line in p.read_text().splitlines()[1:]:  # line one is the log's version
                entry = json.loads(line)
                if "path" in entry and "timestamp" in entry:
                    entries.append(entry)
    return entries


def _is_commit(path: Path) -> bool:
    return (path.parent.name == "_delta_log"
            and re.match(COMMIT_OR_CHECKPOINT, path.name) is not None)


def changed_note(checkpoint: str, root: str, model: str) -> str | None:
    changed = changed_after_read(checkpoint)
    if not changed:
        return None
    shown = ", ".join(_relative(p, root) for p in changed[:3]) + (
        f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    return (f"landed file(s) changed after they were read: {shown}; what was written after the "
            f"read is not in the table. Read every file whole again with medallion build "
            f"--full-refresh -s {model}+ (landing them again under new names would double "
            "the rows read), and land files atomically: write elsewhere, then move")


def _relative(path: str, root: str) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path
