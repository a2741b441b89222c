"""S3 the way AWS users configure it: the standard AWS_* variables read in one place and given
to both of the clients that reach the store, Spark's S3A file system (data files, checkpoints,
Delta Lake for Spark's log) and delta-rs (the embedded engine's log).

With no keys in the environment neither client is given any, and each finds credentials as the
AWS SDKs do (S3A: its provider chain, instance roles included; delta-rs: profiles, web
identity, instance roles). AWS_ENDPOINT_URL alone points both at an S3-compatible store (MinIO,
R2, moto), which is addressed by path (http://host/bucket/key), not by a bucket's host name.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from ..core.locations import on_s3
from ..core.project import Target

S3A = "org.apache.hadoop.fs.s3a.S3AFileSystem"


@dataclass(frozen=True)
class AwsSettings:
    endpoint: str | None = None
    region: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None


def aws_settings(env: Mapping[str, str] | None = None) -> AwsSettings:
    """The standard variables (AWS_ENDPOINT_URL_S3 before AWS_ENDPOINT_URL, as the SDKs read
    them; AWS_REGION before AWS_DEFAULT_REGION)."""
    env = os.environ if env is None else env
    return AwsSettings(
        endpoint=env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None,
        region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
        access_key=env.get("AWS_ACCESS_KEY_ID") or None,
        secret_key=env.get("AWS_SECRET_ACCESS_KEY") or None,
        session_token=env.get("AWS_SESSION_TOKEN") or None)


# How long a store that stopped answering is waited for before the node fails (one line:
# core/error_text.py) and the build goes on with what does not need it: about a minute, not
# S3A's and object_store's defaults (S3A: 7 retries of 5 attempts of up to 200 s each).
# A slow answer is not a stopped one: the socket timeout is per read, not per transfer.
S3A_PATIENCE = {"fs.s3a.connection.establish.timeout": "10s", "fs.s3a.connection.timeout": "20s",
                "fs.s3a.attempts.maximum": "2", "fs.s3a.retry.limit": "2",
                "fs.s3a.retry.throttle.limit": "5"}
DELTARS_PATIENCE = {"connect_timeout": "10s", "timeout": "120s", "max_retries": "3",
                    "retry_timeout": "60s"}


# Each setting's name for S3A (under spark.hadoop.) and for delta-rs; the credentials go
# together or not at all.
SETTING_NAMES = {"endpoint": ("fs.s3a.endpoint", "AWS_ENDPOINT_URL"),
                 "region": ("fs.s3a.endpoint.region", "AWS_REGION"),
                 "access_key": ("fs.s3a.access.key", "AWS_ACCESS_KEY_ID"),
                 "secret_key": ("fs.s3a.secret.key", "AWS_SECRET_ACCESS_KEY"),
                 "session_token": ("fs.s3a.session.token", "AWS_SESSION_TOKEN")}
CREDENTIALS = ("access_key", "secret_key", "session_token")


def _named(aws: AwsSettings, client: int) -> dict[str, str]:
    """The settings that are set, under the names of one client (0: S3A, 1: delta-rs)."""
    keys = bool(aws.access_key and aws.secret_key)
    return {names[client]: getattr(aws, field) for field, names in SETTING_NAMES.items()
            if getattr(aws, field) and (keys or field not in CREDENTIALS)}


def s3a_conf(aws: AwsSettings) -> dict[str, str]:
    """Spark settings for S3A from the AWS settings; s3:// is S3A too, so one location reads
    the same to Spark and to delta-rs. The keys are credentials (spark.conf.is_secret): they
    reach the Hadoop configuration after the JVM starts, never its command line."""
    conf = {**S3A_PATIENCE, **_named(aws, 0)}
    if aws.endpoint:  # an S3-compatible store: addressed by path, TLS as its URL says
        conf["fs.s3a.path.style.access"] = "true"
        conf["fs.s3a.connection.ssl.enabled"] = str(urlsplit(aws.endpoint).scheme != "http").lower()
    if "fs.s3a.session.token" in conf:
        conf["fs.s3a.aws.credentials.provider"] = (
            "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider")
    # Uploads buffered in memory: S3A's disk buffers need Hadoop's checksummed local file
    # system, which a local driver replaces with the raw one (spark/conf.py).
    conf["fs.s3a.fast.upload.buffer"] = "bytebuffer"
    return {"spark.hadoop.fs.s3.impl": S3A, **{f"spark.hadoop.{k}": v for k, v in conf.items()}}


def deltars_options(aws: AwsSettings) -> dict[str, str]:
    """delta-rs's storage options from the same settings. Commits are conditional puts
    (put-if-absent), which S3 and the compatible stores honour: no lock table is needed."""
    options = {**DELTARS_PATIENCE, **_named(aws, 1)}
    if aws.endpoint and urlsplit(aws.endpoint).scheme == "http":
        options["AWS_ALLOW_HTTP"] = "true"
    return options


def storage_options(location: str) -> dict[str, str] | None:
    """What delta-rs needs to open a table at the location: the AWS settings for S3, nothing
    for a local folder."""
    return deltars_options(aws_settings()) if on_s3(location) else None


def with_s3a(target: Target) -> Target:
    """The target with S3A set from the AWS settings; its own spark.hadoop.fs.s3a.* win."""
    return replace(target, spark_conf={**s3a_conf(aws_settings()), **target.spark_conf})


def arrow_filesystem(location: str) -> tuple[Any, str]:
    """(pyarrow file system, path in it) for a location: S3 with the AWS settings, else the
    local disk. For the few files Python itself reads or writes beside Spark: a commit's JSON,
    a Parquet footer, a staged file going into its table."""
    import pyarrow.fs as pafs

    if not on_s3(location):
        return pafs.LocalFileSystem(), str(location)
    aws = aws_settings()
    endpoint = urlsplit(aws.endpoint) if aws.endpoint else None
    filesystem = pafs.S3FileSystem(
        access_key=aws.access_key, secret_key=aws.secret_key, session_token=aws.session_token,
        region=aws.region, allow_bucket_creation=False,
        endpoint_override=endpoint.netloc + endpoint.path if endpoint else None,
        scheme=endpoint.scheme if endpoint else "https")
    parts = urlsplit(str(location))
    return filesystem, parts.netloc + parts.path


def read_bytes(location: str) -> bytes:
    """A file's bytes, local or on S3; FileNotFoundError when it is not there."""
    filesystem, path = arrow_filesystem(location)
    with filesystem.open_input_stream(path) as stream:
        data: bytes = stream.read()
    return data


def write_bytes(location: str, data: bytes) -> None:
    """Write a file whole (an object appears when its upload closes)."""
    filesystem, path = arrow_filesystem(location)
    with filesystem.open_output_stream(path) as stream:
        stream.write(data)


def remove_all(location: str) -> None:
    """Delete a file, or everything under a folder (a prefix); nothing there is fine."""
    import pyarrow.fs as pafs

    filesystem, path = arrow_filesystem(location)
    kind = filesystem.get_file_info(path).type
    if kind == pafs.FileType.File:
        filesystem.delete_file(path)
    elif kind == pafs.FileType.Directory:
        filesystem.delete_dir(path)


def files_below(location: str) -> list[tuple[str, int, int]]:
    """(path under the location, size, modified in ms, as Hadoop's FileSystem says it) of
    every file below a location."""
    import pyarrow.fs as pafs

    filesystem, path = arrow_filesystem(location)
    found = filesystem.get_file_info(pafs.FileSelector(path, recursive=True,
                                                       allow_not_found=True))
    root = path.rstrip("/") + "/"
    return sorted((info.path.removeprefix(root), info.size, info.mtime_ns // 1_000_000)
                  for info in found if info.type == pafs.FileType.File)


def put_file(local_file: str, location: str) -> None:
    """Copy a local file to a location (S3: a multipart upload when large)."""
    import pyarrow.fs as pafs

    filesystem, path = arrow_filesystem(location)
    pafs.copy_files(local_file, path, source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=filesystem)


def s3_client() -> Any:
    """A boto3 client from the AWS settings; with no keys set, boto3 finds credentials itself.
    (boto3 makes its clients' classes at run time: no type to name.)"""
    import boto3
    from botocore.config import Config

    aws = aws_settings()
    return boto3.client("s3", endpoint_url=aws.endpoint, region_name=aws.region,
                        aws_access_key_id=aws.access_key, aws_secret_access_key=aws.secret_key,
                        aws_session_token=aws.session_token,
                        config=Config(connect_timeout=10, read_timeout=20,
                                      retries={"max_attempts": 3, "mode": "standard"}))


def bucket_problem(location: str) -> str | None:
    """Why a warehouse on S3 cannot be written, or None: the bucket answers, takes a write, and
    refuses a second create-only write of one object (the conditional writes delta-rs's commits
    and the warehouse's lease rely on)."""
    parts = urlsplit(location)
    bucket, probe = parts.netloc, "/".join(filter(None, [parts.path.strip("/"),
                                                         "_medallion/probe-conditional-write"]))
    client = s3_client()
    try:
        client.head_bucket(Bucket=bucket)
        client.put_object(Bucket=bucket, Key=probe, Body=b"1", IfNoneMatch="*")
    except Exception as exc:
        return str(exc).splitlines()[0]
    problem: str | None
    try:
        client.put_object(Bucket=bucket, Key=probe, Body=b"2", IfNoneMatch="*")
        problem = ("the store overwrote an object written with If-None-Match: *; it does not "
                   "support conditional writes, so concurrent commits would not be refused")
    except Exception as exc:
        status = getattr(exc, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode")
        problem = None if status in (409, 412) else str(exc).splitlines()[0]
    client.delete_object(Bucket=bucket, Key=probe)
    return problem
