"""Files on the warehouse's store, local, S3 or over Spark Connect (README.md lists its modules)."""
