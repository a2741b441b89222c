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
    """The catalog the engine keeps (its capability) for the target's metastore."""
    if target.metastore is None:
        raise MedallionError(f"target '{target.name}' has no metastore: it names no table",
                             path=target.profiles_file,
                             hint="set metastore: in the target (docs/engines-and-clusters.md)")
    if engine.capabilities.catalog == "spark_sql":
        return SqlCatalog(engine.spark)
    # imported here: it brings pymetastore, which only a thrift:// metastore needs
    from .thrift_catalog import ThriftCatalog

    return ThriftCatalog(target.metastore, target.profiles_file)
