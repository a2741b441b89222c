"""`medallion docs`: the page's data (columns, lineage, tests, edges) and its DAG in Chromium."""

import re
import subprocess

import pytest
from helpers import CHROMIUM, page_data
from helpers import DOCS_MODELS as MODELS

from medallion_cli import commands


@pytest.mark.unit
def test_docs_describe_columns_lineage_tests_and_edges(project):
    root = project(MODELS)
    out = commands.docs(commands.Invocation(project_dir=str(root)))
    assert out == root / "target/docs/index.html"
    nodes = {n["name"]: n for n in page_data(out)["nodes"]}
    assert set(nodes) == {"skus", "raw_sales", "sales", "by_label"}
    sales = nodes["sales"]
    assert sales["upstream"] == ["raw_sales", "skus"] and sales["downstream"] == ["by_label"]
    assert sales["tests"] == ["not_null_sales_sku"]
    assert sales["description"] == "Priced sales."
    def lineage(name):
        return {c["name"]: [(h["node"], h["column"]) for h in c["lineage"]]
                for c in nodes[name]["columns"]}

    assert lineage("sales") == {"sku": [("raw_sales", "sku")], "label": [("skus", "label")],
                                "amount": [("raw_sales", "price"), ("raw_sales", "qty")]}
    assert lineage("by_label") == {"label": [("sales", "label")], "total": [("sales", "amount")]}
    # hop by hop back to the source: bronze's columns name the source's
    assert lineage("raw_sales")["price"] == [("landing.sales", "price")]
    assert nodes["raw_sales"]["upstream"] == ["landing.sales"]
    assert f"from delta.`{root / 'warehouse/bronze/raw_sales'}`" in sales["sql"]  # as compiled


@pytest.mark.unit
def test_docs_describe_sources_with_schema_freshness_and_tests(project):
    root = project(MODELS)
    assert commands.source_freshness(commands.Invocation(project_dir=str(root)))  # target/sources.json
    out = commands.docs(commands.Invocation(project_dir=str(root)))
    (source,) = page_data(out)["sources"]
    assert source["name"] == "landing.sales" and source["format"] == "json"
    assert source["description"] == "Sales as the tills send them."
    assert source["path"] == str(root / "landing/sales")
    assert [(c["name"], c["type"], c["description"]) for c in source["columns"]][:3] == [
        ("sku", "string", "The till's code"), ("qty", "int", ""), ("price", "double", "")]
    assert source["freshness"] == {"warn_after": 86400}
    assert source["last_check"]["status"] == "warn"  # no landing files yet: no load time
    assert source["tests"] == ["source_not_null_landing_sales_sku"]
    assert source["downstream"] == ["raw_sales"]


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install "
                                             "chromium); CI installs it")
def test_docs_page_renders_the_dag_in_headless_chromium(project, tmp_path):
    root = project(MODELS)
    out = commands.docs(commands.Invocation(project_dir=str(root)))
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
    assert ">raw_sales.price</a>, <a" in dom and ">raw_sales.qty</a>" in dom


def chromium(tmp_path, *args):
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={tmp_path / 'chrome'}", "--window-size=1400,900",
         *args], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed; CI installs it")
def test_docs_page_searches_focuses_and_shows_gold_at_1400_px(project, tmp_path):
    from PIL import Image

    root = project(MODELS)
    out = commands.docs(commands.Invocation(project_dir=str(root)))
    # search (?q= runs it at once): a column by its description, a test by its name
    dom = chromium(tmp_path, "--dump-dom", f"{out.as_uri()}?q=stock#sales").stdout
    hits = re.findall(r'<li class="hit"><span class="muted">(\w+)</span> <a[^>]*>([^<]+)</a>', dom)
    assert hits == [("column", "sales.sku")]
    dimmed = set(re.findall(r'<g class="node [^"]*dim[^"]*" data-name="([^"]+)"', dom))
    assert dimmed == {"landing.sales", "skus", "raw_sales", "by_label"}
    dom = chromium(tmp_path, "--dump-dom", f"{out.as_uri()}?q=not_null#sales").stdout
    assert re.findall(r'<span class="muted">test</span> <a[^>]*>([^<]+)</a>', dom) == [
        "source_not_null_landing_sales_sku", "not_null_sales_sku"]
    # focus: a node's up- and downstream stay lit, the rest is dimmed; edges have arrowheads
    dom = chromium(tmp_path, "--dump-dom", f"{out.as_uri()}#raw_sales").stdout
    dimmed = set(re.findall(r'<g class="node [^"]*dim[^"]*" data-name="([^"]+)"', dom))
    assert dimmed == {"skus"}
    assert '<marker id="arrow"' in dom
    # a column followed hop by hop: gold's total, from silver's amount, from bronze's price,
    # from the source's: each page lights the column and links the one it comes from
    for page, column, comes_from in (("by_label", "total", ["sales:amount"]),
                                     ("sales", "amount", ["raw_sales:price", "raw_sales:qty"]),
                                     ("raw_sales", "price", ["landing.sales:price"])):
        dom = chromium(tmp_path, "--dump-dom", f"{out.as_uri()}#{page}:{column}").stdout
        row = re.search(rf'<tr data-column="{column}" class="focus">(.*?)</tr>', dom, re.S)
        assert row, (page, column)
        assert re.findall(r'<a href="#([^"]+)"', row.group(1)) == comes_from
    # a source's page: where it is read from, its columns, freshness and tests
    dom = chromium(tmp_path, "--dump-dom", f"{out.as_uri()}#landing.sales:price").stdout
    assert '<h2 id="model-title">landing.sales</h2>' in dom
    assert '<tr data-column="price" class="focus">' in dom
    assert "Sales as the tills send them." in dom and "source_not_null_landing_sales_sku" in dom
    assert "warn_after 86400 s" in dom
    # at 1400 px the whole DAG is on screen, gold included: its nodes' colour is in the picture
    shot = tmp_path / "page.png"
    chromium(tmp_path, f"--screenshot={shot}", f"{out.as_uri()}#sales")
    image = Image.open(shot).convert("RGB")
    assert image.width == 1400
    colours = {colour for _, colour in image.getcolors(maxcolors=1 << 20)}
    for layer, colour in {"gold": (251, 239, 184), "silver": (230, 234, 240),
                          "bronze": (246, 227, 207)}.items():
        assert colour in colours, f"no {layer} node on screen"
    # the page opens on a node, outlined in blue: nothing failed, so nothing is red
    assert (37, 99, 235) in colours
    assert not colours & {(192, 50, 43), (208, 69, 47)}
