"""Building one node, in the order the data goes through it: its inputs (inputs.py,
landing.py), its rows (rows.py), its checks (checks.py), its write (writes.py, scd2.py), what is
kept between builds (state.py), and the drivers that run these steps: batch.py (views, tables,
incremental tables and seeds, by_groups.py for tables kept per group) and streaming.py (one
Structured Streaming query per model). README.md lists every module.

Imports go one way: the drivers call the steps, the steps call the engine (engines/); context.py
holds what they all share.
"""
