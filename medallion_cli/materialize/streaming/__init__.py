"""The streaming driver (driver.py): one Structured Streaming query per model, its
micro-batches (here or on a Spark Connect server), their tally and what a query keeps beside
its checkpoint (README.md lists every module)."""
