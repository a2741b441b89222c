"""Compaction as a policy (materialize/compaction.py): which thresholds a table's files pass,
what holds a compaction back (its rate limit, its model's lag), and the policy each model's
config gives. Unit tests, no JVM; the policy in a build is test_maintenance.py's, the engines'
optimize and file_layout test_engine_contract.py's (both engines, both stores)."""

import pytest

from medallion_cli.core.config import CompactionPolicy, size_bytes, size_text
from medallion_cli.core.errors import ProjectError
from medallion_cli.engines.base import FileLayout
from medallion_cli.load.model_config import resolve_config
from medallion_cli.materialize.compaction import Compacted, held_back, threshold_passed

pytestmark = pytest.mark.unit
MB = 2**20


@pytest.mark.parametrize("sizes, policy, said", [
    ([MB] * 10, CompactionPolicy(), "10 small files (at least 10)"),
    ([MB] * 9, CompactionPolicy(), ""),
    ([30 * MB] * 9, CompactionPolicy(), "270.0 MB in small files"),
    ([100 * MB, MB, MB], CompactionPolicy(min_mean_file_bytes=64 * MB), "mean file 34.0 MB"),
    ([100 * MB, 100 * MB, MB], CompactionPolicy(min_mean_file_bytes=64 * MB), ""),
    ([MB], CompactionPolicy(min_small_files=2, min_mean_file_bytes=64 * MB), ""),  # alone
    ([200 * MB] * 40, CompactionPolicy(), ""),  # many files, none small
])
def test_a_threshold_passed_is_said_and_one_small_file_is_never_compacted(sizes, policy, said):
    assert threshold_passed(policy, FileLayout.of_sizes(sizes, policy.small_file_bytes)) == said


def test_only_the_totals_count_every_file_small_when_their_mean_is():
    assert FileLayout.of_totals(4, 4 * MB, 32 * MB) == FileLayout(4, 4 * MB, 4, 4 * MB)
    assert FileLayout.of_totals(4, 400 * MB, 32 * MB).small_files == 0
    assert FileLayout.of_totals(0, 0, 32 * MB).mean_file_bytes == 0


def test_a_compaction_waits_its_interval_and_never_takes_over_half_its_models_lag():
    policy = CompactionPolicy(min_interval=60)
    assert held_back(policy, 10, None, now=0) == ""  # never compacted here: nothing to go by
    assert "min_interval" in held_back(policy, None, Compacted(at=100, seconds=1), now=130)
    assert held_back(policy, 10, Compacted(at=100, seconds=4), now=170) == ""
    slow = held_back(policy, 10, Compacted(at=100, seconds=6), now=170)
    assert slow.startswith("its last compaction took 6.0 s, over half its target lag")
    assert held_back(policy, None, Compacted(at=100, seconds=600), now=170) == ""  # no lag


def test_sizes_as_users_write_them():
    assert [size_bytes(v) for v in ("32 MB", "1GB", "512 kb", 4096, "10 B")] == [
        32 * MB, 2**30, 512 * 1024, 4096, 10]
    assert [size_bytes(v) for v in ("32 MiB", "big", -1, True, "1.5 GB")] == [None] * 5
    assert [size_text(v) for v in (300, 1536, 3 * MB, 5 * 2**40)] == [
        "300 B", "1.5 kB", "3.0 MB", "5.0 TB"]


def test_the_policy_each_config_gives():
    def policy(**raw):
        return resolve_config(raw, "models/m.sql").compaction

    assert policy() is None  # a table nothing asks to compact is left as its writes made it
    assert policy(target_lag="1 minute") == CompactionPolicy()
    assert policy(target_lag="1 minute", compaction=False) is None
    assert policy(materialized="view", target_lag="1 minute") is None
    assert policy(optimize_after_files=50) == CompactionPolicy(min_small_files=51)
    assert policy(compaction={"small_file_size": "64 MB", "min_small_bytes": None,
                              "min_mean_file_size": "16 MB", "min_interval": "5 minutes"}) == \
        CompactionPolicy(small_file_bytes=64 * MB, min_small_bytes=None,
                         min_mean_file_bytes=16 * MB, min_interval=300)
    assert resolve_config({"compaction": {"min_small_files": 4}}, "m").as_dict()[
        "compaction"]["min_small_files"] == 4  # the manifest's JSON


@pytest.mark.parametrize("value, said, hint", [
    ({"min_files": 3}, "config 'compaction' is {'min_files': 3}", "min_small_files"),
    ("yes", "config 'compaction' is 'yes'", "false, or thresholds"),
    ({"small_file_size": "huge"}, "compaction small_file_size is 'huge'", "'32 MB'"),
    ({"min_interval": "often"}, "compaction min_interval is 'often'", "'1 minute'"),
    ({"min_small_files": 1}, "config 'compaction min_small_files' is 1", None),
])
def test_a_bad_policy_is_refused_naming_the_file(value, said, hint):
    with pytest.raises(ProjectError) as raised:
        resolve_config({"compaction": value}, "models/m.sql")
    assert raised.value.path == "models/m.sql" and said in str(raised.value)
    assert hint is None or hint in raised.value.hint


def test_a_compaction_runs_once_past_its_threshold_then_waits_and_a_failed_one_loses_nothing():
    """The policy's wiring around an engine (its optimize and file_layout are the engine
    contract's, on both engines): a stand-in engine whose optimize can fail."""
    from types import SimpleNamespace

    from medallion_cli.core.config import NodeConfig
    from medallion_cli.materialize.compaction import COMPACTED, compact_if_due
    from medallion_cli.materialize.context import Phases

    calls = []

    def optimize(path, zorder_by, cluster_by):
        calls.append(path)
        if path.endswith("refused"):
            raise OSError("the store refused the commit")
        return {"files_removed": 12, "files_added": 1}

    engine = SimpleNamespace(table_exists=lambda path: True, optimize=optimize,
                             file_layout=lambda path, small: FileLayout.of_sizes([MB] * 12, small))
    ctx = SimpleNamespace(engine=engine, phases=Phases(), project=SimpleNamespace(
        table_path=lambda file: f"/wh/{file.name}"))

    def node(name, policy=CompactionPolicy(min_interval=3600)):
        return SimpleNamespace(file=SimpleNamespace(name=name),
                               config=NodeConfig(compaction=policy, target_lag="10 seconds"))

    assert compact_if_due(ctx, node("t")) == "compacted 12 files into 1 (12 small files (at " \
        "least 10))"
    assert compact_if_due(ctx, node("t")) == ""  # within its min_interval
    assert compact_if_due(ctx, node("none", None)) == ""  # no policy: never looked at
    said = compact_if_due(ctx, node("refused"))
    assert said.startswith("not compacted (the store refused the commit): the table is as "
                           "written")
    assert compact_if_due(ctx, node("refused")) == ""  # the rate limit holds after a failure
    assert calls == ["/wh/t", "/wh/refused"]
    assert (COMPACTED["/wh/t"].count, COMPACTED["/wh/t"].files_removed) == (1, 12)
    assert COMPACTED["/wh/refused"].count == 0
    assert "compaction" in ctx.phases.seconds
