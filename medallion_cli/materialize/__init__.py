"""Building one node, in the order the data goes through it.

    inputs.py     the relations its SQL names: refs, sources (landing files, Delta tables) and
                  `this`, as tables or as streams, registered as temp views of its own session
    landing.py    landing files read with nothing lost: rescued fields, checked CSV headers,
                  escaped bad bytes, every file however old, files changed after a read
    rows.py       its rows: its SQL over those inputs; a seed's CSV; a micro-batch's new rows
    checks.py     its expectations, and the quarantine for rows a `drop` rule rejects
    writes.py     into its Delta table: replace, append, MERGE (latest wins, deletes, SCD2)
    history.py    SCD2 versions recomputed from each touched key's timeline
    state.py      what is kept between builds: fingerprints, and streaming checkpoints' records
    incremental.py  tables kept per group (incremental_by): which groups the inputs' changes touch
    aggregates.py   ... and their sums and counts brought up to date from those changes alone
    batch.py      the batch driver: view, table, incremental and seed
    by_groups.py  its part for tables kept per group: add the changes, recompute groups, or all
    streaming.py  the streaming driver: one Structured Streaming query per model

Imports go one way: the drivers call the steps, the steps call the engine (engines/); context.py
holds what they all share.
"""
