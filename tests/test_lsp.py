"""`medallion lsp` driven by a language client (pytest-lsp) as an editor drives it, over stdio:
diagnostics from the static checks on the editor's unsaved text, cleared once fixed; the
definition of ref(), source() and a macro; completion of models, sources and columns; a
column's type, description and lineage on hover. No JVM: the unit tier."""

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.uris import from_fs_path, to_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient
from static_check_corpus import MISTAKES, corpus_files

pytestmark = pytest.mark.unit

SOURCES = """\
sources:
  - name: landing
    path: landing
    tables:
      - name: orders
        format: json
        schema: "order_id bigint, customer_id bigint, amount double"
        columns:
          - {name: amount, description: "What the customer paid, in euros."}
"""
GOLD = "select o.order_id, {{ cents('o.amount') }} as cents\nfrom {{ ref('orders') }} as o\n"
FILES = {
    "models/sources.yml": SOURCES,
    "macros/money.sql": "{% macro cents(column) %}cast({{ column }} * 100 as bigint){% endmacro %}",
    "models/bronze/orders.sql": "select order_id, customer_id, amount\n"
                                "from {{ source('landing', 'orders') }}",
    "models/gold/revenue.sql": GOLD,
}


@pytest_lsp.fixture(config=ClientServerConfig(
    server_command=[sys.executable, "-m", "medallion_cli.cli", "lsp"]))
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities()))
    yield
    await lsp_client.shutdown_session()


def opened(client, root, rel, text):
    uri = from_fs_path(str(root / rel))
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri, "sql", 1, text)))
    return uri


def at(uri, line, character):
    return types.TextDocumentIdentifier(uri), types.Position(line, character)


@pytest.mark.asyncio(loop_scope="function")
async def test_a_typo_is_a_diagnostic_as_typed_and_cleared_once_fixed(client, project):
    root = project(FILES)
    typo = GOLD.replace("o.order_id", "o.order_ud")
    uri = opened(client, root, "models/gold/revenue.sql", typo)  # unsaved: the disk has GOLD
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    [diagnostic] = client.diagnostics[uri]
    assert diagnostic.message == ("'o' (orders) has no column 'order_ud'; did you mean "
                                  "'order_id'?")
    assert (diagnostic.range.start.line, diagnostic.range.start.character,
            diagnostic.range.end.character) == (0, 9, 17)
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        [types.TextDocumentContentChangeWholeDocument(GOLD)]))
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert list(client.diagnostics[uri]) == []
    # an error the project cannot load past is a diagnostic on its file too
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=3),
        [types.TextDocumentContentChangeWholeDocument(GOLD.replace("'orders'", "'order'"))]))
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    [unknown] = client.diagnostics[uri]
    assert "order" in unknown.message and "did you mean 'orders'" in unknown.message


@pytest.mark.asyncio(loop_scope="function")
async def test_definitions_completions_and_hover(client, project):
    root = project(FILES)
    uri = opened(client, root, "models/gold/revenue.sql", GOLD)
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)

    async def goes_to(line, character):
        found = await client.text_document_definition_async(
            types.DefinitionParams(*at(uri, line, character)))
        return to_fs_path(found.uri), found.range.start.line

    assert await goes_to(1, 12) == (str(root / "models/bronze/orders.sql"), 0)  # ref('orders')
    assert await goes_to(0, 25) == (str(root / "macros/money.sql"), 0)  # cents(
    bronze = opened(client, root, "models/bronze/orders.sql", FILES["models/bronze/orders.sql"])
    found = await client.text_document_definition_async(
        types.DefinitionParams(*at(bronze, 1, 12)))
    assert (to_fs_path(found.uri), found.range.start.line) == (str(root / "models/sources.yml"),
                                                                4)

    async def completed(text, line, character, of=uri):
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=of, version=9),
            [types.TextDocumentContentChangeWholeDocument(text)]))
        done = await client.text_document_completion_async(
            types.CompletionParams(*at(of, line, character)))
        return {item.label: item.detail for item in done.items}

    assert set(await completed("select * from {{ ref('", 0, 22)) == {"orders", "revenue"}
    assert await completed("select * from {{ source('", 0, 25) == {
        "landing": "source with 1 table(s)"}
    assert list(await completed("select * from {{ source('landing', '", 0, 36)) == ["orders"]
    columns = await completed(GOLD.replace("o.order_id,", "o.order_id, "), 0, 19)
    assert columns == {"order_id": "bigint · orders", "customer_id": "bigint · orders",
                       "amount": "double · orders"}

    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=10),
        [types.TextDocumentContentChangeWholeDocument(GOLD)]))

    async def hovered(line, character, of=uri):
        said = await client.text_document_hover_async(types.HoverParams(*at(of, line, character)))
        return said.contents.value if said else None

    assert await hovered(0, GOLD.index("order_id")) == ("**revenue.order_id** `bigint`\n\n"
                                                         "from orders.order_id")
    assert await hovered(0, GOLD.index("as cents") + 4) == ("**revenue.cents** `bigint`\n\n"
                                                             "from orders.amount")
    filtered = GOLD + "where o.customer_id > 0\n"
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=11),
        [types.TextDocumentContentChangeWholeDocument(filtered)]))
    assert await hovered(2, 10) == "**orders.customer_id** `bigint`"  # an input's column
    assert await hovered(1, 0, bronze) is None  # a keyword, no column
    said = await hovered(0, 31, bronze)
    # its own column, described where it comes from
    assert said == ("**orders.amount** `double`\n\nWhat the customer paid, in euros.\n\n"
                    "from landing.orders.amount"), said


@pytest.mark.asyncio(loop_scope="function")
async def test_every_mistake_of_the_corpus_is_a_diagnostic_at_its_place(client, project):
    # the corpus Spark refuses (test_static_check_corpus.py), opened file by file as typed
    root = project(corpus_files())
    for mistake in MISTAKES:
        rel = f"models/gold/{mistake.name}.sql"
        uri = opened(client, root, rel, (root / rel).read_text())
        while not client.diagnostics.get(uri):  # every file's are published, in turn
            await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        first = client.diagnostics[uri][0]
        said = f"{first.range.start.line + 1}:{first.range.start.character + 1}: {first.message}"
        assert (said.startswith(mistake.said) if mistake.said[0].isdigit()
                else mistake.said in said), (mistake.name, said)


VSCODE = Path(__file__).resolve().parent.parent / "editors/vscode"


def test_the_vs_code_extension_starts_the_server_its_manifest_names():
    manifest = json.loads((VSCODE / "package.json").read_text())
    assert {"name", "publisher", "version", "engines", "main"} <= set(manifest)
    assert manifest["engines"]["vscode"].startswith("^1.")
    assert manifest["activationEvents"] == ["workspaceContains:**/medallion_project.yml"]
    setting = manifest["contributes"]["configuration"]["properties"]["medallion.command"]
    assert setting["default"] == ["medallion", "lsp"]
    assert "vscode-languageclient" in manifest["dependencies"]
    client = VSCODE / manifest["main"]
    assert 'getConfiguration("medallion")' in client.read_text()


# The README's test command needs Python and Java alone; CI's machines have Node.js too.
NO_NODE = pytest.mark.skipif(shutil.which("npm") is None, reason="Node.js and npm are not "
                             "installed here: the VS Code extension's client is not checked")


@NO_NODE
def test_the_vs_code_extension_s_client_is_valid_javascript():
    checked = subprocess.run(["node", "--check", str(VSCODE / "extension.js")],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


@NO_NODE
@pytest.mark.slow("installs the extension's packages from the npm registry (about 30 s)")
def test_vs_code_s_own_packager_accepts_the_extension(tmp_path):
    folder = tmp_path / "vscode"
    shutil.copytree(VSCODE, folder, ignore=shutil.ignore_patterns("node_modules", "*.vsix"))
    for command in (["npm", "ci", "--no-audit", "--no-fund"],
                    ["npx", "vsce", "package", "--skip-license", "--out", "m.vsix"]):
        done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
    with zipfile.ZipFile(folder / "m.vsix") as vsix:
        names = set(vsix.namelist())
    assert {"extension/package.json", "extension/extension.js"} <= names
    assert any(n.startswith("extension/node_modules/vscode-languageclient/") for n in names)
