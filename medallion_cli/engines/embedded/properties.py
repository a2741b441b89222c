"""Which Delta table properties the embedded engine keeps: those delta-rs, which writes its
log, keeps and under which its reads (Spark's Parquet reader over a snapshot's files) stay
correct."""

from __future__ import annotations

EMBEDDED_PROPERTIES = (
    "delta.appendOnly", "delta.enableChangeDataFeed", "delta.checkpointInterval",
    "delta.logRetentionDuration", "delta.deletedFileRetentionDuration",
    "delta.enableExpiredLogCleanup", "delta.dataSkippingNumIndexedCols",
    "delta.dataSkippingStatsColumns", "delta.targetFileSize",
    "delta.checkpoint.writeStatsAsJson", "delta.checkpoint.writeStatsAsStruct")
EMBEDDED_REFUSED = {
    "delta.enableDeletionVectors": "its reads cannot apply deletion vectors (rows a vector "
                                   "deletes would come back)",
    "delta.columnMapping.mode": "its reads find columns by their names in the data files, "
                                "which column mapping renames",
}


def property_problem(key: str, value: str) -> str | None:
    """Why the embedded engine cannot keep a table property, or None when it can."""
    if key in EMBEDDED_PROPERTIES:
        return None
    why = EMBEDDED_REFUSED.get(key, "delta-rs, which keeps this engine's Delta log, does "
                               "not know it")
    return (f"the embedded engine cannot keep table property {key}: {why}. It keeps "
            + ", ".join(EMBEDDED_PROPERTIES) + "; the delta-spark engine keeps any")
