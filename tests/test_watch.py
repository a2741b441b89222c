"""`medallion build --watch`: streaming models keep running, gold follows, Ctrl-C stops cleanly."""

import signal
import subprocess
import sys
import threading
import time

from conftest import read_delta
from test_streaming import MODELS, land

WATCHED = {**MODELS, "models/gold/order_count.sql": """\
    select status, count(*) as n from {{ ref('silver_orders') }} group by status
"""}
PROJECT = "name: w\nprofile: test\nmodels:\n  trigger: 1 second\n"


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_watch_keeps_gold_fresh_and_stops_cleanly_on_ctrl_c(project, engine_name):
    root = project(WATCHED, project_yml=PROJECT)
    land(root, "001.json", [{"order_id": 1, "status": "placed", "op": "I", "seq": 1}])
    proc = subprocess.Popen(
        [sys.executable, "-m", "medallion_cli.cli", "build", "--watch", "--project-dir", str(root)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")))
    reader.start()
    try:
        wait_for(lambda: any("3 of 3" in line for line in lines), 180, "the first pass")
        gold = root / "warehouse/gold/order_count"
        assert read_delta(gold) == [{"status": "placed", "n": 1}]
        land(root, "002.json", [{"order_id": 1, "status": "paid", "op": "U", "seq": 2},
                                {"order_id": 2, "status": "placed", "op": "I", "seq": 1}])
        wait_for(lambda: read_delta(gold) == [{"status": "paid", "n": 1},
                                              {"status": "placed", "n": 1}], 120, "gold to update")
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)
        reader.join()
    output = "".join(lines)
    assert code == 0, output
    assert "STREAM     silver_orders batch 1" in output
    assert "(watch)  OK         model order_count" in output
    assert "Done." in output
