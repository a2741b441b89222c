"""What went wrong, in one line, from whatever Spark, Delta or Python raised.

Spark errors arrive as a wrapper line ("An error occurred while calling o303.save.") over a Java
stack with a chain of causes; the reason is the deepest cause that carries an error class
([CAST_INVALID_INPUT] ...), plus a deeper plain cause when there is one (the I/O error behind a
[FAILED_READ_FILE]), or, when no cause has a class, the deepest plain one. A Python traceback
inside Spark's (a foreachBatch function) has its reason on its last `SomeError: ...` line. A few
Delta errors are said in medallion's words, the same words the embedded engine uses for the same
situation.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Callable
from urllib.parse import urlsplit

from .errors import MedallionError

if TYPE_CHECKING:
    from .project import Target

PYTHON_ERROR_LINE = re.compile(r"^\s*[\w.]*(Error|Exception): .+")
# A Java exception line: its causes say "Caused by: ", py4j puts ": " before the first one
JAVA_CAUSE = re.compile(r"^(?:Caused by: |: )?(?:[\w$]+\.)+[\w$]*(?:Exception|Error|Throwable)"
                        r"(?:: (?P<message>.*))?$")
PY4J_WRAPPER = re.compile(r"^An error occurred while calling [\w.]+\.$")
ERROR_CLASS = re.compile(r"^\[(?P<name>[A-Z0-9_.]+)\]")
# What a Spark Connect server puts before its errors' messages: which session, which user
CONNECT_SESSION = re.compile(r"\[session: [0-9a-f-]+\] \[userId: [^\]]*\] ?")
SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\.?$")


def changed_upstream(path: str, version: int | str) -> str:
    """Why a stream over a table that changed existing rows stops (both engines say this)."""
    return (f"the upstream table {path} changed or removed existing rows at version {version}, "
            "which a streaming read cannot take as new rows. Stream only from append-only "
            "tables, or rebuild the reading model with --full-refresh")


CONCURRENT_COMMIT = ("another build committed to this table at the same time, so this write was "
                     "refused and added nothing: run one build per warehouse at a time, then "
                     "build again to go on")


def _delta_changed_upstream(text: str) -> str:
    version = re.search(r"at version (\d+)", text)
    path = re.search(r"found at path (\S+?)\.?$", text, re.MULTILINE)
    return changed_upstream(path.group(1) if path else "it reads",
                            version.group(1) if version else "?")


def _raised(reason: str, text: str) -> str:
    """A check medallion raised inside a Spark job (raise_error): its own words."""
    return ERROR_CLASS.sub("", reason, count=1).strip()


# Error class -> how to say it, given the error's line and Spark's whole error text.
REWRITES: dict[str, Callable[[str, str], str]] = {
    "DELTA_SOURCE_TABLE_IGNORE_CHANGES": lambda reason, text: _delta_changed_upstream(text),
    "USER_RAISED_EXCEPTION": _raised,
    **{name: lambda reason, text: CONCURRENT_COMMIT for name in (
        "DELTA_CONCURRENT_APPEND", "DELTA_CONCURRENT_TRANSACTION", "DELTA_CONCURRENT_WRITE",
        "DELTA_CONCURRENT_DELETE_READ", "DELTA_CONCURRENT_DELETE_DELETE",
        "DELTA_METADATA_CHANGED")}}


def _csv_header(text: str) -> str | None:
    """Spark's header check (enforceSchema=false) as one line naming the file."""
    if "CSV header does not conform to the schema" not in text:
        return None
    found = {key: re.search(rf"^\s*{key}: (.*)$", text, re.MULTILINE)
             for key in ("Header", "Schema", "CSV file")}
    said = {key: m.group(1).strip() if m else "?" for key, m in found.items()}
    said["CSV file"] = said["CSV file"].removeprefix("file://")
    return (f"the header of {said['CSV file']} ({said['Header']}) does not name the source's "
            f"columns in order ({said['Schema']}), so its values would land in the wrong "
            "columns: move the file out of the landing folder, fix its header, and land it again")


def _kafka_data_loss(text: str) -> str | None:
    """Spark's Kafka source finding records it had not read yet gone from the topic."""
    if "not available in Kafka any more" not in text:
        return None
    reason = re.search(r"Could not read records in offset (\[[^)]*\)) for topic partition (\S+)",
                       text)
    where = f" (offsets {reason.group(1)} of {reason.group(2)})" if reason else ""
    return (f"records this query had not read yet are gone from Kafka{where}: aged out by the "
            "topic's retention, or the topic was deleted. Keep records longer than the build "
            "interval (retention.ms), or set failOnDataLoss: false in the source's options to go "
            "on without them")


def _kafka_unreachable(text: str) -> str | None:
    """Kafka's clients giving up on brokers that never answered (down, or not at the address
    the source names)."""
    if "Timed out waiting for a node assignment" not in text:
        return None
    return ("no Kafka broker answered (Timed out waiting for a node assignment): start the "
            "broker, or correct kafka.bootstrap.servers in the source's options so that it names "
            "one Spark's driver can reach; nothing was read, and the next build goes on from "
            "where this model stopped")


def _moved_files(text: str) -> str | None:
    """Spark's file stream finding, in its checkpoint, files read under another folder than its
    input's now (checkpoints keep whole paths): the project or warehouse moved, or a source's
    path changed."""
    found = re.search(r"Wrong basePath (\S+) for the root path: (\S+)", text)
    if not found:
        return None
    then = re.sub(r"^file:(//)?", "", found.group(2))
    return (f"this stream's checkpoint lists files it read from {Path(then).parent}, but it now "
            f"reads {found.group(1)}: the folder it reads changed since the last build (the "
            "project or its warehouse moved, or a source's path changed), and a checkpoint keeps "
            "whole paths. Move it back, or rebuild this model and the models downstream of it "
            "from scratch: medallion build --full-refresh -s <model>+")


# How to recover a table whose log has a commit file cut short or garbled (both engines say it)
DAMAGED_LOG_FIX = ("put the file back from a copy; or, if it is the newest, move it out of "
                   "_delta_log (the table is then as of the commit before it); or rebuild the "
                   "table's model: medallion build --full-refresh -s <model>+")
DELTA_ACTION = re.compile(r'\{"(?:add|remove|commitInfo|metaData|protocol|txn)":')


def _damaged_log(text: str) -> str | None:
    """Delta Lake for Spark failing on a commit file that is not JSON lines (where the
    embedded engine's delta-rs fails first, deltars.open_table says it with the table)."""
    unreadable = re.search(r"FAILED_READ_FILE\S* Encountered error while reading file "
                           r"(\S+/_delta_log/\d+\.json)", text)
    if not unreadable and not ("MALFORMED_RECORD_IN_PARSING" in text and DELTA_ACTION.search(text)):
        return None
    commit = unreadable.group(1).removesuffix(".") if unreadable else "one of its _delta_log/*.json files"
    return (f"the Delta log of a table this model reads or writes cannot be read: {commit} is "
            f"damaged or was not written whole. To recover, {DAMAGED_LOG_FIX}")


# What S3A, the AWS SDK, delta-rs (object_store) and pyarrow say when a store does not answer.
STORE_UNREACHABLE = ("Generic S3 error", "error sending request", "Read timeout on endpoint",
                     "Connect timeout on endpoint", "Could not connect to the endpoint",
                     "ConnectTimeoutException", "SocketTimeoutException", "Connection refused",
                     "Unable to execute HTTP request", "AWSClientIOException",
                     "SdkClientException", "Connection reset", "curlCode: 7")
# A network error is the store's when the text names a store (S3A's s3a:// paths, the AWS SDKs,
# an endpoint): Spark's own sockets time out too (its Python workers, Kafka, Spark Connect).
STORE_NAMED = re.compile(r"s3a?://|\bS3\b|AWS|https?://")


# How each client gives the status and S3 error code of a store's 5xx answer (S3A and the AWS
# SDKs, delta-rs's object_store, pyarrow, boto3).
STORE_STATUS = re.compile(r"Status Code: (5\d\d)|HTTP status (5\d\d)|"
                          r"\b(5\d\d) (?:Service Unavailable|Internal Server Error|Slow Down)")
STORE_CODE = re.compile(r"<Code>(\w+)</Code>|An error occurred \((\w+)\)|"
                        r"\b(SlowDown|InternalError|ServiceUnavailable)\b")


# A store's answer that the bucket is not there, and what to do: said alike whichever client met
# it (S3A at Spark's start, spark/start.py; delta-rs before it, below)
NO_BUCKET = ("its bucket does not exist",
             "create the bucket (e.g. aws s3 mb s3://{bucket}), or fix the target's warehouse")


# What a store's refusal of the warehouse means for the user, by what S3A (or another Hadoop
# file system) or delta-rs raised, most specific first.
STORE_REFUSALS = (
    (("UnknownStoreException", "NoSuchBucket"), *NO_BUCKET),
    (("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "NoAuthWithAWSException",
      "AccessDeniedException"), "the store refused these credentials",
     "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or the profile or role in use) and the "
     "bucket's policy"),
    (("ConnectException", "UnknownHostException", "Connection refused", "AWSClientIOException",
      "SdkClientException"), "the store is not reachable",
     "check AWS_ENDPOINT_URL (or the network to the store), then build again"),
)


def unusable_warehouse(target: Target, text: str, store: str) -> MedallionError | None:
    """The target's warehouse refused by its store (no bucket, keys refused, not reachable), said
    alike whichever client met it first: S3A at Spark's start (spark/start.py), or delta-rs
    when is_incremental() asks before (commands/invocation.py)."""
    for markers, meaning, fix in STORE_REFUSALS:
        if any(marker in text for marker in markers):
            return MedallionError(
                f"target '{target.name}': the warehouse {target.warehouse} cannot be used: "
                f"{meaning} (store: {store})", path=target.profiles_file,
                hint=fix.format(bucket=urlsplit(target.warehouse).netloc))
    return None


def store_named(text: str) -> str:
    """The store an error names (its endpoint), else the one the AWS variables point at."""
    named = re.search(r"https?://[\w.-]+(?::\d+)?", text)
    return (named.group(0) if named else os.environ.get("AWS_ENDPOINT_URL_S3")
            or os.environ.get("AWS_ENDPOINT_URL") or "S3")


def _store_trouble(text: str) -> str | None:
    """An object store that stopped answering, or kept answering 500/503, mid-build, whichever
    client noticed: which it was, where, and what to do."""
    found = STORE_STATUS.search(text)
    status = found if found and ("S3" in text or "AWS" in text) else None  # a store's answer
    marker = STORE_NAMED.search(text) and next((m for m in STORE_UNREACHABLE if m in text), None)
    if status is None and marker is None:
        return None
    store = store_named(text)
    missing = "NoSuchBucket" in text and re.search(r"<BucketName>([^<]+)</BucketName>", text)
    if missing:  # an answer, not a store gone
        meaning, fix = NO_BUCKET
        return f"{meaning} (store: {store}): {fix.format(bucket=missing.group(1))}"
    after = ("after retries; what was committed stays. {check}, then build again: it goes "
             "on from each table's last commit")
    if status:
        code = STORE_CODE.search(text)
        answer = " ".join(filter(None, [next(filter(None, status.groups())),
                                        code and next(filter(None, code.groups()))]))
        return f"the object store refused ({store}: {answer}), " + after.format(
            check="The store is failing or busy (S3 slows a prefix down with 503 SlowDown); "
                  "wait or check its status")
    return f"the object store did not answer ({store}: {marker}), " + after.format(
        check="Check the store (AWS_ENDPOINT_URL, the network)")


GRPC_DETAILS = re.compile(r'details = "([^"]*)"')


def grpc_details(text: str) -> str | None:
    """What a gRPC error (a Spark Connect client's) says went wrong, without its wrapping."""
    found = GRPC_DETAILS.search(text)
    return found.group(1) if found else None


def unanswered(details: str) -> str:
    """Why a server did not answer, from a gRPC error's details: their last error."""
    return details.split("last error: ")[-1]


def _connect_trouble(text: str) -> str | None:
    """A Spark Connect server that stopped answering mid-build (killed, restarted, the network):
    what was committed stays, as when a local driver dies."""
    if "StatusCode.UNAVAILABLE" not in text:
        return None
    details = unanswered(grpc_details(text) or "UNAVAILABLE")
    return (f"the Spark Connect server did not answer ({details}), after retries; what was "
            "committed stays. Start the server again (or check the network), then build again: "
            "it goes on from each table's last commit")


def error_message(exc: BaseException) -> str:
    """What went wrong, in a line."""
    if isinstance(exc, MedallionError):
        return str(exc)
    text = CONNECT_SESSION.sub("", str(exc)).strip() or type(exc).__name__
    lines = text.splitlines()
    said = (_csv_header(text) or _kafka_data_loss(text) or _kafka_unreachable(text)
            or _moved_files(text) or _damaged_log(text) or _connect_trouble(text)
            or _store_trouble(text))
    if said:
        return said
    if "Traceback (most recent call last)" in text:
        reasons = [line.strip() for line in lines if PYTHON_ERROR_LINE.match(line)]
        if reasons:
            return _spark_reason([reasons[-1]], text) or reasons[-1]
    return _spark_reason(lines, text) or lines[0]


def _spark_reason(lines: list[str], text: str) -> str | None:
    """The deepest error-classed message among Java causes (or a Python error line), with the
    deepest plain cause below it; without one, under py4j's wrapper line, the deepest plain
    cause (the wrapper names only the Java object called); else None."""
    causes = []
    for line in lines:
        stripped = line.strip()
        match = JAVA_CAUSE.match(stripped)
        message = (match.group("message") if match else stripped
                   if ERROR_CLASS.match(stripped) else stripped.split(": ", 1)[-1])
        if (match or ERROR_CLASS.match(message)) and message:
            causes.append(SQLSTATE.sub("", message).strip())
    classed = [(i, found) for i, c in enumerate(causes) if (found := ERROR_CLASS.match(c))]
    if not classed:
        return causes[-1] if causes and PY4J_WRAPPER.match(lines[0]) else None
    index, found = classed[-1]
    reason = causes[index]
    name = found.group("name").split(".")[0]  # no sub-class
    if name in REWRITES:
        return REWRITES[name](reason, text)
    deeper = causes[index + 1:]
    return f"{reason} ({deeper[-1]})" if deeper else reason
