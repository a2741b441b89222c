"""Medallion: a SQL-first medallion lakehouse runner for Spark and Delta Lake."""

__version__ = "0.1.0"
