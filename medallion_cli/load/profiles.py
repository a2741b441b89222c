"""A profile's target: engine, warehouse, Spark settings, threads, JARs, metastore and lineage,
each key known or refused.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..core.errors import ProjectError, closest
from ..core.locations import is_remote, on_s3, resolve
from ..core.project import ENGINES, PROFILES_FILE, PROJECT_FILE, WORKER_WAIT, Target
from .model_config import check_keys
from .yaml_io import read_yaml


def load_target(root: Path, profile_name: str, profiles_dir: Path | None,
                target_name: str | None) -> Target:
    profiles_dir = profiles_dir or Path(os.environ.get("MEDALLION_PROFILES_DIR", root / "profiles"))
    profiles_path = Path(profiles_dir) / PROFILES_FILE
    if not profiles_path.is_file():
        raise ProjectError("profiles file not found", path=profiles_path,
                           hint="create profiles/profiles.yml or pass --profiles-dir")
    profiles = read_yaml(profiles_path, render_env=True)
    if profile_name not in profiles:
        raise ProjectError(
            f"profile '{profile_name}' not found. {closest(profile_name, profiles)}".strip(),
            path=profiles_path,
            hint=f"the project asks for profile '{profile_name}' in {PROJECT_FILE}")
    profile = profiles[profile_name] or {}
    outputs = profile.get("outputs") or {}
    name = str(target_name or profile.get("target"))
    if name not in outputs:
        raise ProjectError(
            f"target '{name}' not found in profile '{profile_name}'. "
            f"{closest(str(name), outputs)}".strip(), path=profiles_path,
            hint="targets here: " + (", ".join(outputs) or "none"))
    out = outputs[name] or {}
    where = f"profile '{profile_name}', target '{name}'"
    check_keys(out, str(profiles_path), TARGET_KEYS, "key", where, "target keys")
    check_keys(out.get("spark") or {}, str(profiles_path), SPARK_KEYS, "spark key", where,
               "spark keys")
    engine = out.get("engine", "embedded")
    if engine not in ENGINES:
        raise ProjectError(f"target '{name}' has unknown engine '{engine}'", path=profiles_path,
                           hint="engines: " + ", ".join(ENGINES))
    spark = out.get("spark") or {}
    remote = _remote(spark, profiles_path, name)
    try:
        warehouse = resolve(str(out.get("warehouse", "warehouse")), root)
    except ValueError as exc:
        raise ProjectError(f"target '{name}': warehouse {exc}", path=profiles_path,
                           hint="a folder (relative to the project or absolute), file:///path, "
                                "or an object-store URI such as s3a://bucket/lake") from exc
    if remote and is_remote(warehouse) and not on_s3(warehouse):
        raise ProjectError(
            f"target '{name}': a warehouse on {warehouse} is not built over Spark Connect yet: "
            "this machine keeps files beside the tables (streaming checkpoints' notes) with "
            "pyarrow there, which reaches S3", path=profiles_path,
            hint="put the warehouse on S3 (s3://bucket/path) or in a folder both this machine "
                 "and the server reach, or reach the cluster with spark: master")
    metastore = out.get("metastore")
    if metastore is not None and metastore not in METASTORES and not _thrift_uri(metastore):
        raise ProjectError(f"target '{name}': metastore is {metastore!r}", path=profiles_path,
                           hint="metastore: local (a Derby metastore in the warehouse), "
                                "session (the cluster's Hive metastore or Unity Catalog) or "
                                "thrift://host:9083 (a Hive Metastore service)")
    if metastore == "local" and is_remote(warehouse):
        raise ProjectError(f"target '{name}': metastore: local keeps a Derby database in the "
                           f"warehouse, and {warehouse} is not on this machine",
                           path=profiles_path,
                           hint="on a cluster use metastore: session (its own catalog)")
    return Target(
        name=name,
        engine=engine,
        warehouse=warehouse,
        spark_master=str(spark.get("master", "local[*]")),
        spark_remote=remote,
        spark_conf={str(k): str(v) for k, v in (spark.get("conf") or {}).items()},
        threads=int(out.get("threads", 1)),
        delta_jars=str(root / out["delta_jars"]) if out.get("delta_jars") else None,
        profiles_file=str(profiles_path),
        lineage=_lineage_config(out.get("lineage"), profiles_path, name),
        metastore=metastore,
        worker_wait=_worker_wait(spark, remote, profiles_path, name),
    )


def _worker_wait(spark: dict[str, Any], remote: str | None, profiles_path: Path,
                 target: str) -> float:
    """spark: worker_wait, in seconds: over Spark Connect only (a local Spark's workers are
    this machine's, started with no such wait)."""
    if "worker_wait" not in spark:
        return WORKER_WAIT
    where = f"target '{target}': spark: worker_wait"
    if remote is None:
        raise ProjectError(f"{where} is for a Spark Connect server (spark: remote)",
                           path=profiles_path, hint="leave it out, or add spark: remote")
    value = spark["worker_wait"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ProjectError(f"{where} is {value!r}", path=profiles_path,
                           hint=f"seconds, e.g. worker_wait: 120 (default {WORKER_WAIT:g})")
    return float(value)


def _remote(spark: dict[str, Any], profiles_path: Path, target: str) -> str | None:
    """spark: remote, a Spark Connect URL (sc://host:port, with ;token=... and other
    parameters as Spark Connect takes them), checked."""
    remote = spark.get("remote")
    if remote is None:
        return None
    where = f"target '{target}': spark: remote"
    if not str(remote).startswith("sc://"):
        raise ProjectError(f"{where} is {remote!r}; it must be a Spark Connect URL",
                           path=profiles_path,
                           hint="e.g. remote: \"sc://host:15002\", or with a token: "
                                "\"sc://host:15002/;token={{ env_var('SPARK_CONNECT_TOKEN') }}\"")
    if "master" in spark:
        raise ProjectError(f"{where} and spark: master both say where Spark is",
                           path=profiles_path,
                           hint="keep remote (a Spark Connect server) or master (Spark started "
                                "by medallion), not both")
    return str(remote)


LINEAGE_KEYS = ("namespace", "transport", "batch_every")


SPARK_KEYS = ("master", "remote", "conf", "worker_wait")
TARGET_KEYS = ("engine", "warehouse", "threads", "spark", "delta_jars", "metastore", "lineage")


METASTORES = ("local", "session")


def _thrift_uri(value: Any) -> bool:
    """A Hive Metastore service's address: thrift://host:port."""
    if not isinstance(value, str) or not value.startswith("thrift://"):
        return False
    host, _, port = value.removeprefix("thrift://").rstrip("/").rpartition(":")
    return bool(host) and port.isdigit()


def _lineage_config(raw: Any, profiles_path: Path, target: str) -> dict[str, Any]:
    """A target's `lineage:` mapping, checked: a transport as openlineage-python takes it."""
    if raw is None:
        return {}
    where = f"target '{target}': lineage"
    if not isinstance(raw, dict):
        raise ProjectError(f"{where} must be a mapping", path=profiles_path,
                           hint="e.g. lineage: {transport: {type: http, url: "
                                "'http://localhost:5000'}}")
    check_keys(raw, str(profiles_path), LINEAGE_KEYS, "lineage key", where, "lineage keys")
    transport = raw.get("transport")
    if not isinstance(transport, dict) or not transport.get("type"):
        raise ProjectError(f"{where} needs a transport with a type (http, file, console, "
                           "kafka...)", path=profiles_path,
                           hint="e.g. transport: {type: http, url: 'http://localhost:5000'}")
    every = raw.get("batch_every", 1)
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ProjectError(f"{where}: batch_every is {every!r}; it must be a whole number "
                           "above 0", path=profiles_path)
    return {**raw, "batch_every": every}
