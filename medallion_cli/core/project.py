"""A project's parts as data: its target (from a profile), sources, model and seed files, and
where each one's tables, quarantine, tombstones and checkpoints live. Reading them is load/'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import MedallionError
from .locations import is_remote, join

PROJECT_FILE = "medallion_project.yml"


PROFILES_FILE = "profiles.yml"


ENGINES = ("embedded", "delta-spark")
WORKER_WAIT = 35.0  # seconds (spark: worker_wait): three starts again, after 5, 10 and 20 s


SOURCE_FORMATS = ("json", "csv", "parquet", "delta", "kafka")


CDC_FORMATS = ("debezium",)


# What JSON fields outside the schema become; add_new_columns (an inferred schema only) widens
# the kept schema with the fields of files landed since, as Auto Loader's addNewColumns
UNKNOWN_FIELDS = ("rescue", "fail", "ignore", "add_new_columns")


QUARANTINE_SUFFIX = "_quarantine"


TOMBSTONE_SUFFIX = "_tombstones"


TRUNCATE_SUFFIX = "_truncates"


@dataclass(frozen=True)
class Target:
    """One output of a profile: which engine, where the warehouse is, how Spark starts."""

    name: str
    engine: str
    warehouse: str  # a location: an absolute local path or an object-store URI (locations.py)
    spark_master: str
    spark_conf: dict[str, str]
    threads: int
    delta_jars: str | None = None  # delta-spark engine: a folder of Delta JARs for spark.jars
    spark_remote: str | None = None  # a Spark Connect server's URL (sc://...): no local JVM
    profiles_file: str | None = None  # where the target is defined, for errors about it
    # OpenLineage: {"namespace": str, "transport": {...openlineage-python's transport config},
    # "batch_every": N}; empty: no lineage events (lineage.py)
    lineage: dict[str, Any] = field(default_factory=dict)
    # Where tables are registered by name (materialize/register.py): None (nowhere: ref()
    # names paths), "local" (a Derby metastore in the warehouse), "session" (the cluster's
    # own catalog: a Hive metastore or Unity Catalog) or a Hive Metastore service's
    # thrift://host:port, which every engine and process shares
    metastore: str | None = None
    # Over Spark Connect: how long in all a streaming model's start waits for the server's
    # Python worker for its micro-batches, which Spark gives 10 s a try to connect back
    worker_wait: float = WORKER_WAIT


@dataclass(frozen=True)
class SourceTable:
    source: str
    name: str
    format: str
    path: str  # a location: a local folder or an object-store URI
    schema: str | None
    options: dict[str, str]
    origin: str
    unknown_fields: str = "rescue"  # JSON fields outside the schema: UNKNOWN_FIELDS
    cdc: str | None = None  # "debezium": values are change events, unpacked (materialize/sources/debezium.py)
    unique_key: tuple[str, ...] = ()  # a change event's key: an update that changes it is split
    # dbt's source freshness: the column saying when a row was loaded (else the files' or
    # commits' times) and {warn_after, error_after} in seconds (freshness.py)
    loaded_at_field: str | None = None
    freshness: dict[str, float] = field(default_factory=dict)
    data_tests: tuple[Any, ...] = ()  # tests on the table, and on its columns (in `columns`)
    columns: tuple[Any, ...] = ()
    description: str = ""

    @property
    def relation(self) -> str:
        return f"{self.source}__{self.name}"

    def unlanded(self) -> MedallionError | None:
        """Landing files whose local folder does not exist: what reading them would raise."""
        if self.format in ("delta", "kafka") or is_remote(self.path) or Path(self.path).exists():
            return None
        return MedallionError(f"source '{self.source}.{self.name}': no files at {self.path}",
                              path=self.origin, hint="land files there or fix the source's path")


@dataclass(frozen=True)
class NodeFile:
    """A model (.sql under a model path) or a seed (.csv under a seed path)."""

    kind: str  # "model" | "seed"
    name: str
    path: Path
    rel_path: str
    layer: str
    yaml_config: dict[str, Any]
    description: str = ""
    columns: tuple[Any, ...] = ()
    data_tests: tuple[Any, ...] = ()  # model-level tests from its properties file
    properties: str | None = None  # the models/**/*.yml file describing it, if any
    # What its target_lag chose where its config names no mode (dag/lags.py), beneath all
    # the config it sets itself
    chosen_config: dict[str, Any] = field(default_factory=dict)


@dataclass
class Project:
    root: Path
    name: str
    vars: dict[str, Any]
    target: Target
    nodes: dict[str, NodeFile]
    sources: dict[tuple[str, str], SourceTable]
    macro_files: list[Path]
    singular_tests: list[Path] = field(default_factory=list)
    unit_test_files: list[Path] = field(default_factory=list)
    clean_targets: list[str] = field(default_factory=lambda: ["target"])  # medallion clean
    # dbt's on-run-start / on-run-end: SQL run once before and after the nodes of a build
    on_run_start: tuple[str, ...] = ()
    on_run_end: tuple[str, ...] = ()
    flow_targets: dict[str, str] = field(default_factory=dict)  # flow -> model (set by commands.invocation.load)

    def table_path(self, node: NodeFile) -> str:
        """Its table; a flow's is the table of the model it flows into."""
        owner = self.nodes[self.flow_targets[node.name]] if node.name in self.flow_targets else node
        return join(self.target.warehouse, owner.layer, owner.name)

    def quarantine_path(self, node: NodeFile) -> str:
        """Where rows a model's `drop` expectations reject are kept, beside its table."""
        return self.table_path(node) + QUARANTINE_SUFFIX

    def tombstone_path(self, node: NodeFile) -> str:
        """Where a MERGE model with deletes remembers the keys it deleted, beside its table."""
        return self.table_path(node) + TOMBSTONE_SUFFIX

    def truncate_path(self, node: NodeFile) -> str:
        """Where a MERGE model with truncate_when remembers its latest truncate."""
        return self.table_path(node) + TRUNCATE_SUFFIX

    def inferred_schema_path(self, source: SourceTable) -> str:
        """Where the schema inferred for a streaming file source without one is kept."""
        return join(self.target.warehouse, "_medallion", "schemas", f"{source.relation}.ddl")

    def test_failures_path(self, test_name: str) -> str:
        """Where a data test with store_failures keeps its failing rows of the last run."""
        return join(self.target.warehouse, "_medallion", "test_failures", test_name)

    def checkpoint_path(self, node: NodeFile) -> str:
        """Where a streaming model's Structured Streaming checkpoint lives."""
        return join(self.target.warehouse, "_checkpoints", node.layer, node.name)

    @property
    def target_dir(self) -> Path:
        return self.root / "target"
