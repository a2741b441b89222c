"""Rows into a node's Delta table: replace, append, MERGE (with tombstones and SCD2 history)
(README.md lists every module)."""
