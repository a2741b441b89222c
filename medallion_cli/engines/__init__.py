"""Engines: where Delta tables are read and written, behind one interface (base.py).

A profile's target names its engine; this is the one place a name becomes an engine. What
engines differ in, the build learns from their declared capabilities (base.Capabilities).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..core.errors import CapabilityError, MedallionError
from ..core.locations import is_remote
from .base import Engine
from .catalog import Catalog, SqlCatalog

if TYPE_CHECKING:
    from ..core.project import Target
    from .delta_spark.engine import DeltaSparkEngine
    from .embedded.engine import EmbeddedEngine


def engine_class(name: str) -> type[EmbeddedEngine] | type[DeltaSparkEngine]:
    """The class of the engine a target names (imported when asked for: the embedded engine
    brings delta-rs, the delta-spark engine Delta's Python API)."""
    if name == "embedded":
        from .embedded.engine import EmbeddedEngine

        return EmbeddedEngine
    if name == "delta-spark":
        from .delta_spark.engine import DeltaSparkEngine

        return DeltaSparkEngine
    raise ValueError(f"unknown engine {name}")


def make_engine(target: Target, spark_log: Path | None = None) -> Engine:
    """The target's engine, when it can do what the target asks. spark_log: where Spark's own
    output goes when it starts (None: the terminal, as --debug wants)."""
    engine = engine_class(target.engine)
    stores = engine.capabilities.object_stores
    scheme = urlsplit(target.warehouse).scheme.lower()
    if is_remote(target.warehouse) and "*" not in stores and scheme not in stores:
        raise CapabilityError(
            f"target '{target.name}' has its warehouse on {scheme}:// ({target.warehouse}), "
            f"but the {engine.name} engine writes to local disks"
            + (" and " + ", ".join(f"{s}://" for s in stores) if stores else " only"),
            path=target.profiles_file,
            hint="use engine: delta-spark for this store (docs/engines-and-clusters.md), or "
                 "give this engine a local folder")
    if target.spark_remote and engine.capabilities.spark_connect:
        raise CapabilityError(
            f"target '{target.name}': spark: remote needs an engine that runs on a Spark "
            f"Connect server, and {engine.capabilities.spark_connect}",
            path=target.profiles_file,
            hint="use engine: delta-spark with spark: remote, or drop remote to run Spark here")
    if (target.metastore and engine.capabilities.catalog == "thrift"
            and not target.metastore.startswith("thrift://")):
        raise CapabilityError(
            f"target '{target.name}': metastore: {target.metastore} is kept by Spark's own "
            f"catalog, and the {engine.name} engine's Spark has no Delta catalog (delta-rs "
            "keeps its tables): it registers them in a Hive Metastore service only",
            path=target.profiles_file,
            hint="metastore: thrift://host:9083 (a Hive Metastore service), or engine: "
                 "delta-spark")
    return engine(target, spark_log)


def catalog_of(engine: Engine, target: Target) -> Catalog:
    """Where the target's tables are registered: a Hive Metastore service through its Thrift
    API, on every engine (no Spark SQL: 25 tables cost a delta-spark build 7 s through its
    Spark's Hive client, bench/catalog_bench.py); any other metastore through the engine's
    Spark, when its capability says it names Delta tables (make_engine refused the others)."""
    if target.metastore is None:
        raise MedallionError(f"target '{target.name}' has no metastore: it names no table",
                             path=target.profiles_file,
                             hint="set metastore: in the target (docs/engines-and-clusters.md)")
    if target.metastore.startswith("thrift://"):
        from .thrift_catalog import ThriftCatalog  # (pymetastore: imported when needed)

        return ThriftCatalog(target.metastore, target.profiles_file)
    assert engine.capabilities.catalog == "spark_sql"  # (make_engine)
    return SqlCatalog(engine.spark)
