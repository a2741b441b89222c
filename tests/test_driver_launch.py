"""A local driver's JVM is started with the java command spark-submit worked out the first time
(spark/launch.py). One engine only: both engines start the driver with the same start_spark()."""

import json
import os
import subprocess
import sys

import pytest

START = """
import json, sys, threading
from medallion_cli.core.project import Target
importers = []  # the thread that imports what pyspark's first call into the JVM needs


class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark.testing.utils":
            importers.append(threading.current_thread().name)


sys.meta_path.insert(0, Watch())
from medallion_cli.spark.start import start_spark
# (no class archive: its options differ between the JVM that records it and later ones)
target = Target("t", "embedded", sys.argv[1], "local[1]",
                {"spark.driver.extraJavaOptions": "-Xshare:auto"}, 1)
spark = start_spark(target)
print(json.dumps({"started": spark.sparkContext._gateway.proc.args[0],
                  "rows": spark.range(3).count(),
                  "scala": spark.sparkContext._jvm.java.lang.System.getenv("SPARK_SCALA_VERSION"),
                  "importers": importers}))
"""


def started(tmp_path, records) -> dict:
    out = subprocess.run([sys.executable, "-c", START, str(tmp_path / "warehouse")],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={**os.environ, "MEDALLION_LAUNCH_DIR": str(records),
                              "AWS_SECRET_ACCESS_KEY": "not-to-be-written"})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow("three fresh JVMs for how fast a JVM starts; every process the default tier "
                  "starts goes through the same launch")
def test_the_driver_starts_with_spark_submits_recorded_command_from_the_second_start(tmp_path):
    records = tmp_path / "launch"
    first = started(tmp_path, records)
    assert first["started"].endswith("/bin/spark-submit") and first["rows"] == 3
    # imported while the JVM started, not after it, by pyspark's first call on this thread
    assert first["importers"] == ["import pyspark.testing.utils"]
    record, = records.glob("*.json")
    recorded = json.loads(record.read_text())
    assert recorded["argv"][0].endswith("/java")
    assert "not-to-be-written" not in record.read_text()  # only what the scripts added

    second = started(tmp_path, records)
    assert second["started"] == recorded["argv"][0] and second["rows"] == 3
    assert second["scala"] == first["scala"] == "2.13"  # the scripts' environment, as before
    assert second["importers"] == first["importers"]

    # a recorded command that no longer starts a JVM: spark-submit again, and a new record
    main = recorded["argv"].index("org.apache.spark.deploy.SparkSubmit")
    record.write_text(json.dumps({**recorded, "argv": [
        *recorded["argv"][:main], "org.apache.spark.deploy.NoSuchMain",
        *recorded["argv"][main + 1:]]}))
    third = started(tmp_path, records)
    assert third["started"].endswith("/bin/spark-submit") and third["rows"] == 3
    assert json.loads(record.read_text()) == recorded


@pytest.mark.unit
def test_a_record_that_cannot_be_read_starts_nothing_and_is_left_to_spark_submit(tmp_path):
    from medallion_cli.spark.launch import _started_directly

    for text in ("not json", json.dumps({"argv": ["/no/such/java"], "added": {},
                                          "removed": []}), json.dumps({"argv": []})):
        record = tmp_path / "record.json"
        record.write_text(text)
        assert _started_directly(record, {}) is None


@pytest.mark.unit
def test_a_module_imported_meanwhile_that_cannot_be_imported_is_left_to_its_next_importer():
    from medallion_cli.spark.pyspark_api import import_meanwhile

    importing = import_meanwhile("medallion_no_such_module")
    importing.join(timeout=60)
    assert not importing.is_alive()
    with pytest.raises(ImportError):
        import medallion_no_such_module  # noqa: F401
