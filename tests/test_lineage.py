"""OpenLineage: a build sends START and COMPLETE/FAIL run events per model to a real HTTP
receiver on loopback, valid against OpenLineage's published JSON schemas, with inputs, outputs,
schemas and column lineage."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import profile_for
from helpers import DOCS_MODELS
from referencing import Registry, Resource

from medallion_cli.report.eventlog import events_path

SPEC = Path(__file__).parent / "openlineage_spec"
CORE = "https://openlineage.io/spec/2-0-2/OpenLineage.json"


def registry() -> Registry:
    schemas = [json.loads(p.read_text()) for p in SPEC.glob("*.json")]
    return Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in schemas)


def validator(ref: str):
    # imported here: jsonschema's format checkers cost every worker's collection 1.1 s
    from jsonschema import Draft202012Validator

    return Draft202012Validator({"$ref": ref}, registry=registry(),
                                format_checker=Draft202012Validator.FORMAT_CHECKER)


def facets_of(event: dict):
    """Every facet in the event, wherever it sits."""
    yield from event["run"].get("facets", {}).values()
    yield from event["job"].get("facets", {}).values()
    for dataset in event.get("inputs", []) + event.get("outputs", []):
        for key in ("facets", "inputFacets", "outputFacets"):
            yield from dataset.get(key, {}).values()


def check_against_spec(event: dict) -> None:
    validator(CORE).validate(event)
    for facet in facets_of(event):
        validator(facet["_schemaURL"]).validate(facet)


@pytest.fixture
def receiver():
    """An HTTP server on loopback taking OpenLineage's POSTs; yields (url, events received)."""
    received = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, json.loads(body)))
            self.send_response(201)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", received
    server.shutdown()
    server.server_close()
    thread.join()


# The docs test's project (its column lineage is known), with a streaming bronze, a landed file
# and a model that fails.
FILES = {
    **{k: DOCS_MODELS[k] for k in ("models/sources.yml", "seeds/skus.csv",
                                   "models/silver/sales.sql")},
    "landing/sales/001.json": '{"sku": "A", "qty": 2, "price": 1.5}\n',
    "models/bronze/raw_sales.sql": "{{ config(materialized='streaming') }}"
                                   "select * from {{ source('landing', 'sales') }}",
    "models/gold/broken.sql": "select cast(raise_error('no such luck') as string) as x "
                              "from {{ ref('sales') }}",
}


@pytest.mark.one_engine("events are made from the run's results and the models' SQL, and sent "
                        "the same on both")
def test_a_build_sends_valid_lineage_events_over_http(project, build, engine_name, receiver):
    url, received = receiver
    profile = profile_for(engine_name) + f"""\
      lineage:
        namespace: shop
        transport: {{type: http, url: "{url}", endpoint: api/v1/lineage}}
"""
    root = project(FILES, profile=profile)
    results = build(root)
    assert results["broken"].failed and results["sales"].status == "success"

    assert {path for path, _ in received} == {"/api/v1/lineage"}
    events = [event for _, event in received]
    for event in events:
        check_against_spec(event)
    states = sorted((e["job"]["name"], e["eventType"]) for e in events)
    assert states == sorted([(f"test_project.{n}", s) for n in ("skus", "raw_sales", "sales")
                             for s in ("START", "COMPLETE")]
                            + [("test_project.broken", "START"), ("test_project.broken", "FAIL")])
    assert {e["job"]["namespace"] for e in events} == {"shop"}

    done = {e["job"]["name"].split(".")[1]: e for e in events if e["eventType"] != "START"}
    sales = done["sales"]
    warehouse = str(root / "warehouse")
    assert [(d["namespace"], d["name"]) for d in sales["inputs"]] == [
        ("file", f"{warehouse}/bronze/raw_sales"), ("file", f"{warehouse}/seeds/skus")]
    [output] = sales["outputs"]
    assert (output["namespace"], output["name"]) == ("file", f"{warehouse}/silver/sales")
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 1
    assert [f["name"] for f in output["facets"]["schema"]["fields"]] == ["sku", "label", "amount"]
    amount = output["facets"]["columnLineage"]["fields"]["amount"]["inputFields"]
    assert sorted((f["name"], f["field"]) for f in amount) == [
        (f"{warehouse}/bronze/raw_sales", "price"), (f"{warehouse}/bronze/raw_sales", "qty")]
    assert done["raw_sales"]["inputs"][0]["name"] == str(root / "landing/sales")
    assert done["raw_sales"]["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
    assert "no such luck" in done["broken"]["run"]["facets"]["errorMessage"]["message"]

    # Each model run names the command's run, the one in the event log, as its parent.
    from deltalake import DeltaTable

    [run_id] = set(DeltaTable(events_path(warehouse)).to_pyarrow_table()["run_id"].to_pylist())
    parents = {e["run"]["facets"]["parent"]["run"]["runId"].replace("-", "") for e in events}
    assert parents == {run_id}
    starts = {e["job"]["name"]: e["run"]["runId"] for e in events if e["eventType"] == "START"}
    assert all(starts[e["job"]["name"]] == e["run"]["runId"] for e in done.values())


@pytest.mark.unit
def test_the_spec_check_refuses_a_broken_event():
    event = {"eventType": "COMPLETE", "eventTime": "2026-01-01T00:00:00Z",
             "producer": "https://example.com/p", "schemaURL": CORE + "#/$defs/RunEvent",
             "run": {"runId": "0191b0a4-1f0e-7c3a-9d1e-2b8f4b0e6a11"},
             "job": {"namespace": "shop", "name": "x"}}
    check_against_spec(event)
    from jsonschema.exceptions import ValidationError

    with pytest.raises(ValidationError):
        check_against_spec({**event, "eventType": "FINISHED"})
    with pytest.raises(ValidationError):
        check_against_spec({k: v for k, v in event.items() if k != "job"})
    with pytest.raises(ValidationError):
        check_against_spec({**event, "eventTime": "yesterday"})


@pytest.mark.unit
def test_lineage_config_mistakes_name_the_profile(project):
    from medallion_cli.core.errors import ProjectError
    from medallion_cli.load.project import load_project

    root = project({}, profile=profile_for("embedded") + "      lineage: {transport: {}}\n")
    with pytest.raises(ProjectError, match="needs a transport with a type") as error:
        load_project(str(root))
    assert "profiles.yml" in str(error.value)


# Sending events touches no engine (the same thread and client on both): one engine.
@pytest.mark.parametrize("engine_name", ["embedded"])
def test_a_receiver_that_is_down_costs_a_warning_not_the_build(project, engine_name):
    from medallion_cli import commands

    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as closed:
        port = closed.server_address[1]  # bound, then closed: nothing listens there
    profile = profile_for(engine_name) + f"""\
      lineage:
        transport: {{type: http, url: "http://127.0.0.1:{port}", timeout: 2,
                     retry: {{connect: 1, backoff_factor: 0.1}}}}
"""  # (openlineage-python's own retries, a profile setting: 5 with backoff would take 18 s)
    root = project({"seeds/skus.csv": "sku\nA\n"}, profile=profile)
    warnings = []
    results = commands.build(commands.Invocation(project_dir=str(root)), "build",
                          report=commands.Reporter(warn=warnings.append))
    assert [r.status for r in results] == ["success"]
    assert len(warnings) == 1 and "OpenLineage events were not sent" in warnings[0]
