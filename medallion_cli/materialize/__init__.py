"""Building one node, in the order the data goes through it: its inputs (sources/), its rows
(rows.py), its checks (checks.py), its write (writing/), what is kept between builds (state.py),
and the drivers that run these steps, picked by the table of build strategies (strategies.py):
batch.py (views, seeds, tables, incremental tables), by_groups/ (tables kept per group) and
streaming/ (one Structured Streaming query per model). README.md lists every module.

Imports go one way: the drivers call the steps, the steps call the engine (engines/); context.py
holds what they all share.
"""
