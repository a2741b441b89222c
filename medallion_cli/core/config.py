"""The model configuration vocabulary: every key with its allowed values and defaults
(NodeConfig), and intervals as users write them. Config comes from three places, later ones
winning: `medallion_project.yml` per folder, `models/**/*.yml` per model, and `{{ config(...) }}`
in the SQL file itself; load/model_config.py merges and checks them.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

MATERIALIZATIONS = ("view", "table", "incremental", "streaming")
STRATEGIES = ("append", "merge")
SCHEMA_CHANGE_POLICIES = ("append_new_columns", "sync_all_columns", "fail")
EXPECTATION_ACTIONS = ("warn", "drop", "fail")

# Each key users may set, with the values it accepts (None: any value of the right shape).
CONFIG_KEYS = {
    "materialized": MATERIALIZATIONS,
    "strategy": STRATEGIES,
    "unique_key": None,
    "sequence_by": None,
    "delete_when": None,
    "truncate_when": None,
    "scd_type": (1, 2),
    "trigger": None,
    "partition_by": None,
    "on_schema_change": SCHEMA_CHANGE_POLICIES,
    "tags": None,
    "expectations": None,
    "enabled": (True, False),
    "column_types": None,
    "optimize_after_files": None,
    "table_properties": None,
    "tombstone_retention": None,
    "cdc": ("debezium", "snapshot"),
    "incremental_by": None,
    "incremental_min_rows": None,
    "event_time": None,
    "freshness": None,
    "contract": None,
    "except_columns": None,
    "ignore_null_updates": (True, False),
    "track_history_columns": None,
    "track_history_except_columns": None,
    "zorder_by": None,
    "cluster_by": None,
    "pre_hook": None,
    "post_hook": None,
    "schema": None,
    "alias": None,
    "persist_docs": None,
    "meta": None,
    "flow_into": None,
    "once": (True, False),
    "target_lag": None,
    "compaction": None,
    "static_checks": (True, False),
    "when_matched": None,
    "when_not_matched_by_source": None,
    "merge_update_columns": None,
    "merge_exclude_columns": None,
    "renamed_columns": None,
}
# dbt's spellings of our keys (hooks in YAML, dbt-spark's tblproperties), taken as ours
# (merge_layers renames them)
SPELLINGS = {"pre-hook": "pre_hook", "post-hook": "post_hook", "tblproperties": "table_properties"}
SPELLED_KEYS = tuple(CONFIG_KEYS) + tuple(SPELLINGS)
# Keys that watch, check, name or lay out a table without deciding what it holds: changing
# them rebuilds nothing.
OBSERVING_KEYS = ("event_time", "freshness", "contract", "zorder_by", "cluster_by", "pre_hook",
                  "post_hook", "schema", "alias", "persist_docs", "meta", "incremental_min_rows",
                  "target_lag", "compaction", "static_checks")
PERSIST_DOCS = ("relation", "columns")
# Keys added after tables were written with a definition: left out of it while at their
# default (each one's is empty or false), so that upgrading changes no table's definition.
LATER_KEYS = ("except_columns", "ignore_null_updates", "track_history_columns",
              "track_history_except_columns", "truncate_when", "when_matched",
              "when_not_matched_by_source", "merge_update_columns", "merge_exclude_columns",
              "renamed_columns")
# What `cdc: debezium` on a model sets unless the config says otherwise: the change events'
# order (commit time, then log position) and their delete flag (materialize/sources/debezium.py).
# `cdc: snapshot`: rows are whole snapshots, whose missing keys become deletes flagged so
# (materialize/writing/snapshots.py), a column kept out of the table.
SNAPSHOT_VANISHED = "_snapshot_vanished"
CDC_DEFAULTS: dict[str, dict[str, Any]] = {
    "debezium": {"strategy": "merge", "sequence_by": ("_cdc_committed_at", "_cdc_lsn"),
                 "delete_when": "_cdc_deleted"},
    "snapshot": {"strategy": "merge", "delete_when": SNAPSHOT_VANISHED}}


@dataclass(frozen=True)
class CompactionPolicy:
    """When a table's small files are compacted (materialize/compaction.py): once any
    threshold is passed, at most once per min_interval, and, for a model with a target lag,
    only while compacting fits in half of it (the other half is its refresh's)."""

    small_file_bytes: int = 32 * 2**20  # a data file below this is small
    min_small_files: int = 10  # compact once this many files are small,
    min_small_bytes: int | None = 256 * 2**20  # or they hold this many bytes,
    min_mean_file_bytes: int | None = None  # or the table's mean file is below this
    min_interval: float = 60.0  # seconds between two compactions of the table


@dataclass(frozen=True)
class MergeClause:
    """One WHEN clause of a merge model's MERGE (load/merge_clauses.py checks it): where its
    condition holds (SQL on `s`, the batch's row, and `t`, the stored one; None: always), the
    row is updated (`assign`: these columns to these SQL values; none: the row's columns) or
    deleted."""

    then: str  # "update" | "delete"
    condition: str | None = None
    assign: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class NodeConfig:
    materialized: str = "table"
    strategy: str = "append"
    unique_key: tuple[str, ...] = ()
    sequence_by: tuple[str, ...] = ()  # columns ordering a key's rows, the first first
    delete_when: str | None = None
    scd_type: int = 1
    trigger: str = "available_now"
    partition_by: tuple[str, ...] = ()
    on_schema_change: str = "fail"
    tags: tuple[str, ...] = ()
    expectations: dict[str, dict[str, str]] = field(default_factory=dict)
    enabled: bool = True
    column_types: dict[str, str] = field(default_factory=dict)
    optimize_after_files: int | None = None  # streaming: compact once the table has more files
    table_properties: dict[str, str] = field(default_factory=dict)  # Delta table properties, as strings
    tombstone_retention: str = "30 days"  # how long a MERGE remembers a deleted key
    cdc: str | None = None  # the change-event format the model's rows come in
    # A table kept up to date per group of these columns: only the groups its inputs' changes
    # touch are recomputed (materialize/by_groups/groups.py).
    incremental_by: tuple[str, ...] = ()
    # Below this many rows in its inputs, such a table is recomputed in full: one pass over
    # them is quicker than finding and replacing the changed groups (bench/incremental_bench.py
    # put the two level at about 3M rows; at 300k the full pass took a fifth of the time)
    incremental_min_rows: int = 1_000_000
    event_time: str | None = None  # the column saying when a row's event happened
    # How stale the newest event_time may get: {"warn_after": seconds, "error_after": seconds}
    freshness: dict[str, float] = field(default_factory=dict)
    # dbt's model contract ({enforced: true}): the columns declared with a data_type in its
    # properties file are the rows' names and types, checked before anything is written
    contract: bool = False
    # AUTO CDC's COLUMNS * EXCEPT and IGNORE NULL UPDATES, for merge models: columns used only
    # to apply the changes (an `op` flag) kept out of the table; a null in an update keeps the
    # stored value
    except_columns: tuple[str, ...] = ()
    ignore_null_updates: bool = False
    # SCD2 (AUTO CDC's TRACK HISTORY ON): a new version only when one of these columns changes
    # (default: all but keys and sequence_by); other columns are updated in place
    track_history_columns: tuple[str, ...] = ()
    track_history_except_columns: tuple[str, ...] = ()
    # OPTIMIZE ZORDER BY these columns (medallion optimize, optimize_after_files): files hold
    # narrow ranges of them, so reads filtering on them skip most files
    zorder_by: tuple[str, ...] = ()
    # Liquid clustering (delta-spark): the table's clustering columns, which OPTIMIZE clusters
    # its rows by; changed at will without rewriting the table
    cluster_by: tuple[str, ...] = ()
    # AUTO CDC's APPLY AS TRUNCATE WHEN, for SCD1 merge models: an event where this holds
    # empties the table of every row not newer than it (by sequence_by)
    truncate_when: str | None = None
    # dbt's hooks: SQL statements (Jinja, as the model) run before its query and after its write
    pre_hook: tuple[str, ...] = ()
    post_hook: tuple[str, ...] = ()
    # dbt's relation naming: the table is registered in the catalog (a target with a
    # metastore) as <schema>.<alias>, by default <layer>.<model name>
    schema: str | None = None
    alias: str | None = None
    # dbt's persist_docs: the descriptions written into the catalog as table and column
    # comments ({relation: true, columns: true})
    persist_docs: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)  # free-form facts, kept in the manifest
    # Declarative pipelines' flows: this streaming query appends to another streaming model's
    # table, with a checkpoint of its own (a second landing folder, a backfill); once: it runs
    # one time only (INSERT INTO ONCE), again only when that table is refreshed
    flow_into: str | None = None
    once: bool = False
    # How far behind its sources the table may fall: an interval, or 'downstream' (as fresh as
    # what reads it needs); without `materialized`, it chooses the mode (dag/lags.py)
    target_lag: str | None = None
    mode_by_lag: bool = False  # the config names a target_lag and no materialized
    # When its small files are compacted; by default a model with a target_lag (or
    # optimize_after_files) has one, others none (`compaction: false` turns it off)
    compaction: CompactionPolicy | None = None
    # Its SELECT checked against its inputs' columns before Spark starts (report/static_checks.py);
    # false silences a check Medallion gets wrong
    static_checks: bool = True
    # MERGE clauses (merge models, SCD1): a matched row takes the first of when_matched whose
    # condition holds (none given: an update), a stored row the batch lacks the first of
    # when_not_matched_by_source; an update sets merge_update_columns, or all but
    # merge_exclude_columns (dbt's), or every column
    when_matched: tuple[MergeClause, ...] = ()
    when_not_matched_by_source: tuple[MergeClause, ...] = ()
    merge_update_columns: tuple[str, ...] = ()
    merge_exclude_columns: tuple[str, ...] = ()
    # Columns renamed in its table in place ({old: new}), which SQL alone cannot tell from a
    # drop and an add (materialize/writing/schema_changes.py)
    renamed_columns: dict[str, str] = field(default_factory=dict)

    def as_dict(self, defining: bool = False) -> dict[str, Any]:
        """The config; defining: only the keys that decide what the table holds (a change to
        how it is watched or checked, its freshness or contract, rebuilds nothing)."""
        return {key: _plain(getattr(self, key)) for key in CONFIG_KEYS
                if not (defining and (key in OBSERVING_KEYS or key in LATER_KEYS
                                      and not getattr(self, key)))}

    def delta_properties(self, columns: list[str]) -> dict[str, str]:
        """The properties its table is written with: the change data feed on (what readers of
        its changes need; it costs only MERGEs, which write their changes beside their data),
        unless table_properties says otherwise or the rows have the feed's own columns (a
        table of changes read from another: Delta refuses a feed over those)."""
        feed = {} if set(columns) & set(CHANGE_FEED_COLUMNS) else {CHANGE_FEED: "true"}
        return {**feed, **self.table_properties}


def _plain(value: Any) -> Any:
    """A config value as JSON holds it (policies and clauses as mappings)."""
    if isinstance(value, (CompactionPolicy, MergeClause)):
        return asdict(value)
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value


CHANGE_FEED = "delta.enableChangeDataFeed"
CHANGE_FEED_TYPES = {"_change_type": "string", "_commit_version": "bigint",
                     "_commit_timestamp": "timestamp"}  # what a change feed's rows add
CHANGE_FEED_COLUMNS = tuple(CHANGE_FEED_TYPES)


def as_tuple(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return tuple(str(v) for v in value)


UNIT_SECONDS = {"millisecond": 0.001, "second": 1, "minute": 60, "hour": 3600, "day": 86400}


def interval_seconds(text: str) -> float | None:
    """'30 seconds', '2 days' as seconds; None when the text is not such an interval."""
    amount, _, unit = text.strip().partition(" ")
    scale = UNIT_SECONDS.get(unit.strip().rstrip("s"))
    return int(amount) * scale if amount.isdigit() and scale else None


SIZE_UNITS = {"b": 1, "kb": 2**10, "mb": 2**20, "gb": 2**30, "tb": 2**40}


def size_bytes(value: Any) -> int | None:
    """'32 MB', '1GB', 4096 as bytes (units of 1024); None when it is not such a size."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value >= 0 else None
    found = re.fullmatch(r"\s*(\d+)\s*([kmgt]?b)\s*", str(value).lower())
    return int(found.group(1)) * SIZE_UNITS[found.group(2)] if found else None


def size_text(size: float) -> str:
    """300 B, 1.5 MB (units of 1024)."""
    units = ("B", "kB", "MB", "GB", "TB")
    step = 0
    while size >= 1024 and step < len(units) - 1:
        size, step = size / 1024, step + 1
    return f"{size:.0f} B" if step == 0 else f"{size:.1f} {units[step]}"


def is_interval(text: str) -> bool:
    return interval_seconds(text) is not None


NULL_KEY_RULE = "unique_key_not_null"  # every MERGE model's implicit rule
