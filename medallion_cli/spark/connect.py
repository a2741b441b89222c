"""Spark reached through Spark Connect: a target whose `spark: {remote: "sc://host:port"}`
names a server. The client is pyspark's own (its `connect` extra: gRPC, no JVM in this process);
the server runs the queries and keeps Delta. Each way the connection can fail is said in one
line naming the target: no client installed, no answer, a refused token, TLS the server does
not speak, a Spark of another version, a server without Delta Lake.
"""

from __future__ import annotations

import re
import warnings
from typing import TYPE_CHECKING

from ..core.error_text import grpc_details, unanswered
from ..core.errors import MedallionError
from ..core.project import Target
from .start import quiet_python_error_log

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Spark retries a server that does not answer for about ten minutes; this says so in seconds.
RETRIES = 3
TOKEN = re.compile(r"(;token=)[^;]*")
# A path with no table: asking a server with Delta for its history says so in Delta's words.
NO_TABLE = "/medallion-connect-check/no-table-here"


def shown(url: str) -> str:
    """The URL as messages say it: its token hidden."""
    return TOKEN.sub(r"\1***", url)


# pyspark's Connect session, when garbage-collected, shuts down the thread pool through which
# every session releases its results (__del__, then client.close()); collected while its own
# thread was in that pool's submit, it waited for a lock that thread held: a build hung. Sessions
# are kept until the process ends instead (node_sessions_released closes their channels).
_KEPT: list[SparkSession] = []


def client_session(target: Target, quiet: bool = True) -> SparkSession:
    """A new session on the target's server (each node gets its own, as on a local Spark).
    Made without a round trip: `check_server` makes the first. quiet: the server's errors are
    not also logged on stderr (medallion says them itself; --debug shows them)."""
    try:
        from pyspark.sql import SparkSession
        from pyspark.sql.connect.client.retries import DefaultPolicy
    except ImportError as exc:
        raise MedallionError(
            f"target '{target.name}' reaches Spark through Spark Connect, and the Spark Connect "
            f"client is not installed ({_missing(exc)})", path=target.profiles_file,
            hint="pip install 'medallion-cli[connect]' (pyspark's connect extra)") from exc
    quiet_python_error_log(quiet)
    # pyspark warns of each call it gave up retrying, at exit too (closing the session): the
    # error medallion says is the one line
    warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")
    # pyspark's own builder, which also switches pyspark's functions (F.col...) to Connect's
    # in this process
    session = SparkSession.builder.remote(_url(target)).create()
    session.client.set_retry_policies([DefaultPolicy(max_retries=RETRIES)])
    _KEPT.append(session)
    return session  # type: ignore[no-any-return]  # pyspark's untyped @remote_only on create


def _missing(exc: ImportError) -> str:
    """What is missing, in pyspark's words where it has them ("grpcio >= 1.48.1 must be
    installed ...")."""
    if exc.name:
        return f"no module {exc.name}"
    return re.sub(r"^\[[A-Z_]+\]\s*", "", (str(exc).strip().splitlines() or ["?"])[0])


def configure(session: SparkSession, target: Target) -> None:
    """The target's Spark settings, on a session of the server: settings a session can change
    (spark.sql.*, Delta's); one line for those only the server's start takes."""
    for key, value in target.spark_conf.items():
        try:
            session.conf.set(key, value)
        except Exception as exc:
            if "CANNOT_MODIFY" not in str(exc):  # _CONFIG, _STATIC_CONFIG
                raise
            raise _server_setting(target, key) from exc


def _server_setting(target: Target, key: str) -> MedallionError:
    return MedallionError(
        f"target '{target.name}': spark: conf {key} is the Spark Connect server's own setting, "
        "which a client's session cannot change", path=target.profiles_file,
        hint="set it where the server starts, and keep only session settings (spark.sql.*) in "
             "the target")


def is_connect(spark: SparkSession) -> bool:
    """Whether the session is a Spark Connect client's (no JVM here: no sparkContext)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def check_server(spark: SparkSession, target: Target) -> str:
    """The server's Spark version, once it answered, runs a Spark of the client's minor
    version, and has Delta Lake; else one line saying which and what to do."""
    import pyspark

    try:
        version = spark.version
    except Exception as exc:
        raise MedallionError(connection_problem(target, exc), path=target.profiles_file,
                             hint=connection_hint(exc)) from exc
    if version.split(".")[:2] != pyspark.__version__.split(".")[:2]:
        raise MedallionError(
            f"{_server(target)} runs Spark {version}, and this client is pyspark "
            f"{pyspark.__version__}",
            path=target.profiles_file,
            hint=f"install the client of the server's version: pip install "
                 f"'pyspark[connect]=={'.'.join(version.split('.')[:2])}.*'")
    if not has_delta(spark):
        raise MedallionError(
            f"{_server(target)} has no Delta Lake", path=target.profiles_file,
            hint="start it with Delta's JARs (`medallion jars` fetches them) and "
                 "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension, "
                 "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog")
    return version


def has_delta(spark: SparkSession) -> bool:
    """Whether the server knows Delta's SQL: without Delta's extension, DESCRIBE HISTORY of a
    path is read as DESCRIBE of a table named HISTORY, which is not found. (With it, the path
    has no table, and Delta's error says so.)"""
    try:
        spark.sql(f"DESCRIBE HISTORY delta.`{NO_TABLE}`").collect()
    except Exception as exc:
        return not ("TABLE_OR_VIEW_NOT_FOUND" in str(exc) and "`HISTORY`" in str(exc))
    return True


def connection_problem(target: Target, exc: BaseException) -> str:
    text = str(exc)
    details = grpc_details(text) or (text.strip().splitlines() or [type(exc).__name__])[0]
    where = _server(target)
    if "UNAUTHENTICATED" in text:
        return f"{where} refused the token ({details})"
    if "Tls handshake failed" in text or "WRONG_VERSION_NUMBER" in text:
        return f"{where} does not speak TLS, which the client uses with a token or use_ssl=true"
    if "UNAVAILABLE" in text:
        return f"{where} did not answer ({unanswered(details)})"
    return f"{where} failed: {details}"


def _url(target: Target) -> str:
    assert target.spark_remote is not None  # only a Spark Connect target's is asked for
    return target.spark_remote


def _server(target: Target) -> str:
    return f"target '{target.name}': the Spark Connect server at {shown(_url(target))}"


def connection_hint(exc: BaseException) -> str:
    text = str(exc)
    if "UNAUTHENTICATED" in text:
        return ("put the server's token in the URL: remote: \"sc://host:port/;token="
                "{{ env_var('SPARK_CONNECT_TOKEN') }}\"")
    if "Tls handshake failed" in text or "WRONG_VERSION_NUMBER" in text:
        return ("use a server with TLS; on this machine, the host name localhost sends the token "
                "without TLS")
    return "start the server, or fix spark: remote in the target"
