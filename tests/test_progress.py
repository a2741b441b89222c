"""A streaming query's progress reports reach Python as plain dicts, cheaply (spark/progress.py)."""

import json
import subprocess
import sys
import textwrap
import time

import pyspark.errors.exceptions.captured as captured

from medallion_cli.spark.progress import follow_progress


def test_each_progress_report_arrives_as_its_json_without_a_java_exception(spark, monkeypatch):
    """Engine-free: the reports are the Spark session's, whichever engine keeps the tables.
    pyspark's own listener turned each report into objects over py4j, and each of a report's
    maps ended with a Java exception that pyspark converted (170 ms a report under --watch)."""
    converted = []
    convert = captured.convert_exception
    monkeypatch.setattr(captured, "convert_exception",
                        lambda error: converted.append(error) or convert(error))
    reports: list[dict] = []
    query = (spark.readStream.format("rate").option("rowsPerSecond", 5).load()
             .writeStream.foreachBatch(lambda batch, batch_id: None)
             .trigger(processingTime="200 milliseconds").queryName("progress_followed").start())
    other = (spark.readStream.format("rate").load().writeStream
             .foreachBatch(lambda batch, batch_id: None)
             .trigger(processingTime="200 milliseconds").queryName("not_followed").start())
    stop = follow_progress(spark, "progress_followed", reports.append)
    try:
        deadline = time.monotonic() + 60
        while len(reports) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop()
        query.stop()
        other.stop()
    assert len(reports) >= 3
    assert {r["name"] for r in reports} == {"progress_followed"}
    assert all(isinstance(r["batchId"], int) and "triggerExecution" in r["durationMs"]
               for r in reports)
    assert reports[-1]["sources"][0]["description"].startswith("RateStreamV2")
    assert converted == []
    stopped_at = len(reports)
    time.sleep(1)
    assert len(reports) == stopped_at  # stop() removed the listener


def test_over_spark_connect_the_followed_querys_reports_arrive_and_stopping_never_hangs(
        spark_connect):
    """Engine-free, as above; in a process of its own: a Connect client switches pyspark to
    Connect there. Following stops ten times while other queries' reports keep coming: pyspark's
    Connect listener bus deadlocked there (SPARK-59623; CI hung on it, and here at the 2nd stop
    of 100 before the fix). A hang dumps the probe's threads to its stderr, then ends it."""
    probe = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""\
        import faulthandler, json, random, sys, time
        from medallion_cli.core.project import Target
        from medallion_cli.spark.connect import client_session
        from medallion_cli.spark.progress import follow_progress
        faulthandler.dump_traceback_later(120, exit=True)
        spark = client_session(Target("connect", "delta-spark", "w", "local[1]", {{}}, 1,
                                      spark_remote={spark_connect.url!r}))
        def started(name):  # a batch after another, each with its report
            return (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 10)
                    .load().writeStream.format("noop").trigger(processingTime="0 seconds")
                    .queryName(name).start())
        queries = [started("progress_followed"), started("not_followed")]
        followed = []
        for _ in range(10):
            reports = []
            stop = follow_progress(spark, "progress_followed", reports.append)
            deadline = time.monotonic() + 60
            while not reports and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(random.random() * 0.3)
            stop()
            followed.append([[r["name"], r["batchId"]] for r in reports])
        for query in queries:
            query.stop()
        print(json.dumps(followed))
        """)], capture_output=True, text=True, timeout=200)
    assert probe.returncode == 0, probe.stderr[-5000:]
    followed = json.loads(probe.stdout.strip().splitlines()[-1])
    assert all(followed), followed  # each time, reports came
    assert {name for reports in followed for name, _ in reports} == {"progress_followed"}
    batches = [batch for reports in followed for _, batch in reports]
    assert all(isinstance(batch, int) for batch in batches)
    assert all(len(set(reports)) == len(reports) for reports in map(
        lambda reports: [batch for _, batch in reports], followed))  # none passed on twice
