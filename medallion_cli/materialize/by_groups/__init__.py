"""The driver of tables kept per group (`incremental_by`, driver.py): the groups their inputs'
changes touch, recomputed or with the changes added (README.md lists every module)."""
