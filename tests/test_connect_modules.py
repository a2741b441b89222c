"""The engine-contract module, and the streaming tests of what a server's Python workers do
with a build killed (batches replayed, a first batch recorded once), run again over Spark
Connect: a third way to reach Spark, beside a local driver (the rest of the suite) and the
standalone cluster (test_cluster.py). They run in a pytest of their own, with
MEDALLION_TEST_SPARK_REMOTE naming this run's server (conftest.py: their sessions, profiles and
targets then reach it), as pyspark's client cannot share a process with the suite's local Spark.
The tests that need Spark in their own process, the embedded engine's and S3's are left out
there, each saying why, as are those whose path over Connect another test there takes (marked
same_path_over_connect).

Not run again, as the path over Connect is one the sample's builds over Connect take
(test_connect_builds.py: every table equal to a local build's, malformed rows kept as locally,
and a build continued from its checkpoints on a new server): the rest of test_streaming.py
(landing more and building again, malformed rows, schema changes, a full refresh, Parquet and
mixed inputs, a merged input refused) and test_merge_semantics.py, whose MERGEs run in the
server's batches as the sample's silver models' do (3 and 3.5 of the 14 minutes these took on a
slow machine; landing more and malformed rows, 72 of 325 s).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# 6-11 minutes of a fresh pytest over a server: the default tier's Connect tests
# (test_connect.py, test_connect_builds.py) already build over Spark Connect
pytestmark = pytest.mark.slow("whole modules rerun over Spark Connect")

MODULES = ("test_engine_contract.py",
           *(f"test_streaming.py::{name}" for name in (
               "test_kill_mid_batch_then_rebuild_equals_uninterrupted_run",
               "test_a_new_querys_first_batch_killed_before_the_log_had_it_is_recorded_once")))


def test_the_engine_contract_and_streaming_tests_pass_over_spark_connect(spark_connect):
    here = Path(__file__).parent
    env = {**os.environ, "MEDALLION_TEST_SPARK_REMOTE": spark_connect.url}
    try:
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:cacheprovider",
             "-m", "slow or not slow",
             "-v", *(str(here / module) for module in MODULES)],
            cwd=here.parent, env=env, capture_output=True, text=True, timeout=1500)
    except subprocess.TimeoutExpired as stuck:  # 5-11 minutes on 2 cores
        said = stuck.stdout or b""
        said = said.decode(errors="replace") if isinstance(said, bytes) else said
        pytest.fail(f"the modules over Spark Connect did not finish in 25 minutes:\n"
                    f"{said[-6000:]}")
    tail = run.stdout[-8000:]
    assert run.returncode == 0, tail
    passed = re.search(r"(\d+) passed", tail)
    assert passed and int(passed.group(1)) >= 16, tail  # 16 when this was written
