"""`medallion docs`: the page's data (columns, lineage, tests, edges) and its DAG in Chromium."""

import json
import re
import shutil
import subprocess

import pytest

from medallion_cli import tasks

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

MODELS = {
    "models/sources.yml": """\
        sources:
          - name: landing
            path: landing
            tables:
              - {name: sales, format: json, schema: "sku string, qty int, price double"}
    """,
    "seeds/skus.csv": "sku,label\nA,Apples\n",
    "models/bronze/raw_sales.sql": "select * from {{ source('landing', 'sales') }}",
    "models/silver/sales.sql": "select s.sku, k.label, s.qty * s.price as amount "
                               "from {{ ref('raw_sales') }} s join {{ ref('skus') }} k "
                               "on k.sku = s.sku",
    "models/gold/by_label.sql": "select label, sum(amount) as total from {{ ref('sales') }} "
                                "group by label",
    "models/props.yml": """\
        models:
          - name: sales
            description: Priced sales.
            columns:
              - {name: sku, description: Stock keeping unit, tests: [not_null]}
    """,
}


def page_data(path):
    text = path.read_text()
    raw = re.search(r'<script id="project-data" type="application/json">(.*?)</script>', text,
                    re.S).group(1)
    return json.loads(raw.replace("<\\/", "</"))


def test_docs_describe_columns_lineage_tests_and_edges(project):
    root = project(MODELS)
    out = tasks.docs(tasks.Invocation(project_dir=str(root)))
    assert out == root / "target/docs/index.html"
    nodes = {n["name"]: n for n in page_data(out)["nodes"]}
    assert set(nodes) == {"skus", "raw_sales", "sales", "by_label"}
    sales = nodes["sales"]
    assert sales["upstream"] == ["raw_sales", "skus"] and sales["downstream"] == ["by_label"]
    assert sales["tests"] == ["not_null_sales_sku"]
    assert sales["description"] == "Priced sales."
    lineage = {c["name"]: c["lineage"] for c in sales["columns"]}
    assert lineage == {"sku": ["raw_sales.sku"], "label": ["skus.label"],
                       "amount": ["raw_sales.price", "raw_sales.qty"]}
    assert {c["name"]: c["lineage"] for c in nodes["by_label"]["columns"]} == {
        "label": ["sales.label"], "total": ["sales.amount"]}
    assert nodes["raw_sales"]["upstream"] == ["landing.sales"]
    assert "from `raw_sales`" in sales["sql"]


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install "
                                             "chromium); CI installs it")
def test_docs_page_renders_the_dag_in_headless_chromium(project, tmp_path):
    root = project(MODELS)
    out = tasks.docs(tasks.Invocation(project_dir=str(root)))
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={tmp_path / 'chrome'}", "--dump-dom",
         f"{out.as_uri()}#sales"], capture_output=True, text=True, timeout=120).stdout
    drawn = set(re.findall(r'<g class="node [^"]*" data-name="([^"]+)"', dom))
    assert drawn == {"landing.sales", "skus", "raw_sales", "sales", "by_label"}
    edges = set(re.findall(r'class="edge" data-from="([^"]+)" data-to="([^"]+)"', dom))
    assert edges == {("landing.sales", "raw_sales"), ("raw_sales", "sales"), ("skus", "sales"),
                     ("sales", "by_label")}
    assert '<h2 id="model-title">sales</h2>' in dom  # the detail panel follows the URL
    assert "raw_sales.price, raw_sales.qty" in dom
