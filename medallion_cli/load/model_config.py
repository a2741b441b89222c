"""A model's config as written (in its file, per folder in medallion_project.yml, in
models/**/*.yml) merged, checked key by key and value by value, and made a NodeConfig.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from typing import Any

from ..core.config import (
    CDC_DEFAULTS,
    CONFIG_KEYS,
    NULL_KEY_RULE,
    SNAPSHOT_VANISHED,
    SPELLED_KEYS,
    SPELLINGS,
    NodeConfig,
    as_tuple,
    interval_seconds,
    is_interval,
)
from ..core.errors import ProjectError, closest
from . import config_values as values
from .merge_clauses import clauses


def check_keys(raw: dict[str, Any], origin: str, allowed: Collection[str] = SPELLED_KEYS,
               what: str = "config key", where: str = "", listed: str = "valid keys",
               tolerated: Collection[str] = ()) -> None:
    """Reject keys outside `allowed` (the config vocabulary unless told), naming the closest
    one, the line where a YAML mapping has it, and the valid ones. `tolerated` keys pass
    unlisted (another tool's, meaning nothing here)."""
    unknown = [key for key in raw if key not in allowed and key not in tolerated]
    if unknown:  # all at once, each with its closest valid key
        said = (f"unknown {what} '{unknown[0]}'. {closest(str(unknown[0]), allowed)}".strip()
                if len(unknown) == 1 else f"unknown {what}s " + "; ".join(
                    f"'{key}'" + (f" ({near})" if (near := closest(str(key), allowed)) else "")
                    for key in unknown))
        raise ProjectError((f"{where}: " if where else "") + said, path=origin,
                           line=getattr(raw, "lines", {}).get(unknown[0]),
                           hint=f"{listed}: " + ", ".join(allowed))


def merge_layers(*layers: dict[str, Any]) -> dict[str, Any]:
    """Combine raw config dicts, later winning; tags accumulate as in dbt."""
    merged: dict[str, Any] = {}
    tags: list[str] = []
    for layer in layers:
        for key, value in layer.items():
            key = SPELLINGS.get(key, key)
            if key == "tags":
                tags.extend(t for t in as_tuple(value) if t not in tags)
            else:
                merged[key] = value
    if tags:
        merged["tags"] = tags
    return merged


MERGE_CLAUSE_KEYS = ("when_matched", "when_not_matched_by_source", "merge_update_columns",
                     "merge_exclude_columns")


def resolve_config(raw: dict[str, Any], origin: str) -> NodeConfig:
    """Validate a merged raw config and turn it into a NodeConfig."""
    check_keys(raw, origin)
    cdc = raw.get("cdc")
    raw = {**(CDC_DEFAULTS.get(cdc, {}) if isinstance(cdc, str) else {}), **raw}
    for key, allowed in CONFIG_KEYS.items():
        if allowed is not None and key in raw and raw[key] not in allowed:
            raise ProjectError(
                f"config '{key}' is {raw[key]!r}; it must be one of "
                + ", ".join(repr(a) for a in allowed), path=origin)
    min_rows = values.whole_number(raw.get("incremental_min_rows"), "incremental_min_rows",
                                   origin, least=0)  # null: the default, as when unset
    config = NodeConfig(
        materialized=raw.get("materialized", "table"),
        strategy=raw.get("strategy", "append"),
        unique_key=values.names(raw, "unique_key", origin),
        sequence_by=values.names(raw, "sequence_by", origin),
        delete_when=raw.get("delete_when"),
        scd_type=int(raw.get("scd_type", 1)),
        trigger=str(raw.get("trigger", "available_now")),
        partition_by=values.names(raw, "partition_by", origin),
        on_schema_change=raw.get("on_schema_change", "fail"),
        tags=values.names(raw, "tags", origin),
        expectations=values.expectations(raw.get("expectations") or {}, origin),
        enabled=bool(raw.get("enabled", True)),
        column_types=dict(raw.get("column_types") or {}),
        optimize_after_files=values.whole_number(raw.get("optimize_after_files"),
                                                 "optimize_after_files", origin),
        table_properties=values.table_properties(raw.get("table_properties") or {}, origin),
        tombstone_retention=str(raw.get("tombstone_retention", "30 days")),
        cdc=raw.get("cdc"),
        incremental_by=values.names(raw, "incremental_by", origin),
        incremental_min_rows=NodeConfig.incremental_min_rows if min_rows is None else min_rows,
        event_time=raw.get("event_time"),
        freshness=values.freshness_limits(raw["freshness"], origin) if "freshness" in raw else {},
        contract=values.contract(raw.get("contract"), origin),
        except_columns=values.names(raw, "except_columns", origin),
        ignore_null_updates=bool(raw.get("ignore_null_updates", False)),
        track_history_columns=values.names(raw, "track_history_columns", origin),
        track_history_except_columns=values.names(raw, "track_history_except_columns", origin),
        zorder_by=values.names(raw, "zorder_by", origin),
        cluster_by=values.names(raw, "cluster_by", origin),
        truncate_when=raw.get("truncate_when"),
        pre_hook=values.hook_statements(raw.get("pre_hook"), "pre_hook", origin),
        post_hook=values.hook_statements(raw.get("post_hook"), "post_hook", origin),
        schema=values.identifier(raw.get("schema"), "schema", origin),
        alias=values.identifier(raw.get("alias"), "alias", origin),
        persist_docs=values.persist_docs(raw.get("persist_docs"), origin),
        meta=values.meta(raw.get("meta"), origin),
        flow_into=values.identifier(raw.get("flow_into"), "flow_into", origin),
        once=bool(raw.get("once", False)),
        target_lag=None if raw.get("target_lag") is None else str(raw["target_lag"]),
        mode_by_lag="target_lag" in raw and "materialized" not in raw,
        static_checks=bool(raw.get("static_checks", True)),
        when_matched=clauses(raw.get("when_matched"), "when_matched", origin),
        when_not_matched_by_source=clauses(raw.get("when_not_matched_by_source"),
                                           "when_not_matched_by_source", origin),
        merge_update_columns=values.names(raw, "merge_update_columns", origin),
        merge_exclude_columns=values.names(raw, "merge_exclude_columns", origin),
        renamed_columns=values.renamed_columns(raw.get("renamed_columns"), origin),
        compaction=None if raw.get("materialized") == "view" else values.compaction(
            raw.get("compaction"), raw.get("optimize_after_files"),
            raw.get("target_lag") is not None, origin),
    )
    if config.target_lag not in (None, "downstream") and not interval_seconds(config.target_lag):
        raise ProjectError(f"config 'target_lag' is {config.target_lag!r}", path=origin,
                           hint="an interval such as '10 seconds', '5 minutes' or '1 day', or "
                                "'downstream' (as fresh as what reads it needs)")
    if not is_interval(config.tombstone_retention):
        raise ProjectError(f"config 'tombstone_retention' is {config.tombstone_retention!r}",
                           path=origin, hint="an interval such as '30 days' or '12 hours'")
    if config.trigger != "available_now" and not is_interval(config.trigger):
        raise ProjectError(f"config 'trigger' is {config.trigger!r}", path=origin,
                           hint="use 'available_now' or an interval such as '30 seconds'")
    if config.strategy == "merge" and not config.unique_key:
        raise ProjectError("strategy 'merge' needs a unique_key (one column or a list)",
                           path=origin, hint="add unique_key='id' to the model's config")
    if (config.except_columns or config.ignore_null_updates) and config.strategy != "merge":
        raise ProjectError("except_columns and ignore_null_updates are for strategy 'merge'",
                           path=origin, hint="they say how changes are applied by key")
    needed = set(config.except_columns) & set(config.unique_key + config.sequence_by)
    if needed:
        raise ProjectError(f"except_columns names {', '.join(sorted(needed))}, which the table "
                           "needs: keys and sequence_by order the changes to come", path=origin,
                           hint="leave keys and sequence_by columns in the table")
    tracking = config.track_history_columns or config.track_history_except_columns
    if tracking and config.scd_type != 2:
        raise ProjectError("track_history_columns and track_history_except_columns are for "
                           "scd_type 2", path=origin, hint="SCD1 keeps no history to track")
    if config.track_history_columns and config.track_history_except_columns:
        raise ProjectError("set track_history_columns or track_history_except_columns, not "
                           "both", path=origin, hint="name the tracked columns, or the others")
    if config.truncate_when and (config.strategy != "merge" or config.scd_type == 2
                                 or not config.sequence_by):
        raise ProjectError("truncate_when needs strategy 'merge' with scd_type 1 and "
                           "sequence_by", path=origin,
                           hint="sequence_by says which rows a truncate empties: those not "
                                "newer than it; SCD2 keeps history a truncate would erase")
    if config.cdc == "snapshot":
        config = _snapshots(config, origin)
    merging = [key for key in MERGE_CLAUSE_KEYS if getattr(config, key)]
    if merging and (config.strategy != "merge" or config.scd_type == 2):
        raise ProjectError(f"{merging[0]} is for strategy 'merge' with scd_type 1",
                           path=origin, hint="it says how a MERGE applies a batch's rows; "
                           "SCD2 keeps every version as it came")
    if config.merge_update_columns and config.merge_exclude_columns:
        raise ProjectError("set merge_update_columns or merge_exclude_columns, not both",
                           path=origin, hint="name the updated columns, or the others")
    if config.ignore_null_updates and config.scd_type == 2:
        raise ProjectError("ignore_null_updates is for scd_type 1", path=origin,
                           hint="SCD2 keeps every version as it came")
    if config.flow_into and (config.materialized != "streaming" or config.strategy != "append"):
        raise ProjectError("a flow appends its rows to another streaming table: flow_into "
                           "needs materialized 'streaming' and strategy 'append'", path=origin,
                           hint="add materialized='streaming' beside flow_into")
    if config.flow_into and config.on_schema_change == "sync_all_columns":
        raise ProjectError("a flow's rows are one of several into its table: sync_all_columns "
                           "would drop the columns the others write", path=origin,
                           hint="use append_new_columns on a flow")
    if config.once and not config.flow_into:
        raise ProjectError("once is for flows: a once-only backfill into a streaming table",
                           path=origin, hint="add flow_into='<the streaming model>' beside once")
    if config.incremental_by and config.materialized != "table":
        raise ProjectError("incremental_by is for models materialized as 'table'", path=origin,
                           hint="incremental and streaming models take only new rows already")
    if config.freshness and not config.event_time:
        raise ProjectError("freshness needs event_time: the column saying when each row's "
                           "event happened", path=origin,
                           hint="add event_time='order_ts' beside freshness")
    if config.cluster_by and (config.partition_by or config.zorder_by):
        raise ProjectError("cluster_by replaces partition_by and zorder_by: Delta clusters a "
                           "table by one of them only", path=origin,
                           hint="keep cluster_by (liquid clustering) or the others, not both")
    if config.cluster_by and (config.materialized == "view" or config.flow_into):
        raise ProjectError("cluster_by lays out a table: a view has none, and a flow's "
                           "rows go to its table, whose model says how it is clustered",
                           path=origin, hint="set cluster_by on the table's own model")
    if config.scd_type == 2 and (config.strategy != "merge" or not config.sequence_by):
        raise ProjectError("scd_type 2 needs strategy 'merge', a unique_key and sequence_by",
                           path=origin,
                           hint="history validity comes from sequence_by, not the wall clock")
    return with_null_key_rule(config)


def _snapshots(config: NodeConfig, origin: str) -> NodeConfig:
    """cdc: snapshot: its deletes are the keys a snapshot lacks, flagged in a column of their
    own, kept out of the table."""
    if config.delete_when != SNAPSHOT_VANISHED or config.truncate_when or \
            config.when_not_matched_by_source:
        raise ProjectError("cdc 'snapshot' deletes the keys a snapshot lacks: it takes no "
                           "delete_when, truncate_when or when_not_matched_by_source",
                           path=origin, hint="leave them out of the model's config")
    if not config.sequence_by or config.materialized not in ("incremental", "streaming"):
        raise ProjectError("cdc 'snapshot' needs materialized 'incremental' or 'streaming' "
                           "and sequence_by: the column that orders the snapshots",
                           path=origin, hint="e.g. sequence_by='snapshot_date', a column "
                           "each snapshot's rows share")
    return replace(config, except_columns=(*config.except_columns, SNAPSHOT_VANISHED))


def with_null_key_rule(config: NodeConfig) -> NodeConfig:
    """A MERGE model's rows without their key match nothing and could never be updated or
    deleted: they are kept apart and counted, as rows a drop rule rejects are, by a rule of
    its own, unless the model's own rules keep them out already (a truncate needs no key)."""
    if config.strategy != "merge" or config.materialized not in ("incremental", "streaming"):
        return config
    said = {" ".join(r["expect"].replace("`", "").lower().split())
            for r in config.expectations.values() if r["on_violation"] in ("drop", "fail")}
    if all(f"{c.lower()} is not null" in said for c in config.unique_key):
        return config
    keyed = " and ".join(f"`{c}` is not null" for c in config.unique_key)
    if config.truncate_when:
        keyed = f"({config.truncate_when}) or ({keyed})"
    return replace(config, expectations={
        NULL_KEY_RULE: {"expect": keyed, "on_violation": "drop"}, **config.expectations})
