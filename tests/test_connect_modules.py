"""The engine-contract, merge-semantics and streaming modules run again over Spark Connect: a
third way to reach Spark, beside a local driver (the rest of the suite) and the standalone
cluster (test_cluster.py). They run in a pytest of their own, with MEDALLION_TEST_SPARK_REMOTE
naming this run's server (conftest.py: their sessions, profiles and targets then reach it), as
pyspark's client cannot share a process with the suite's local Spark. The tests that need Spark
in their own process, the embedded engine's and S3's are left out there, each saying why, as
are those whose path over Connect another test there takes (marked same_path_over_connect:
eight, 3 of 8 minutes).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

MODULES = ("test_engine_contract.py", "test_merge_semantics.py", "test_streaming.py")


def test_the_engine_contract_merge_and_streaming_tests_pass_over_spark_connect(spark_connect):
    here = Path(__file__).parent
    env = {**os.environ, "MEDALLION_TEST_SPARK_REMOTE": spark_connect.url}
    try:
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:cacheprovider",
             "-v", *(str(here / module) for module in MODULES)],
            cwd=here.parent, env=env, capture_output=True, text=True, timeout=1500)
    except subprocess.TimeoutExpired as stuck:  # about 5 minutes on 2 cores
        said = stuck.stdout or b""
        said = said.decode(errors="replace") if isinstance(said, bytes) else said
        pytest.fail(f"the modules over Spark Connect did not finish in 25 minutes:\n"
                    f"{said[-6000:]}")
    tail = run.stdout[-8000:]
    assert run.returncode == 0, tail
    passed = re.search(r"(\d+) passed", tail)
    assert passed and int(passed.group(1)) >= 28, tail  # 28 when this was written
