"""`medallion lsp`: a language server over stdio (pygls) for editors. It publishes the static
checks' findings as diagnostics whenever a project file is opened, edited or saved (checked
with the editor's unsaved text), goes to the definition of ref(), source() and macros,
completes model, source and column names, and shows a column's type, description and
lineage on hover. The work is workspace.py's and navigation.py's; this only speaks LSP.
"""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from .. import __version__
from .navigation import completions, definition, hover
from .workspace import Snapshot, look, problems, project_root

KINDS = {"model": types.CompletionItemKind.Module, "seed": types.CompletionItemKind.File,
         "source": types.CompletionItemKind.Folder, "table": types.CompletionItemKind.Class,
         "column": types.CompletionItemKind.Field}
WATCHED = (".sql", ".yml", ".yaml", ".csv")  # the files a project is made of


class MedallionServer(LanguageServer):
    """The server, with the diagnostics it last published per project (to clear fixed ones)
    and its last look at each project (what completion, hover and definition ask of until
    an open file's text changes or one is saved)."""

    def __init__(self) -> None:
        super().__init__("medallion", __version__)
        self.published: dict[Path, set[str]] = {}  # project root -> file URIs with problems
        self.looked: dict[Path, Snapshot] = {}


def _path(uri: str) -> Path | None:
    path = to_fs_path(uri)
    return Path(path) if path else None


def _look(server: MedallionServer, root: Path, texts: dict[str, str], fresh: bool) -> Snapshot:
    """The project with these texts: the last look at it while they are unchanged, unless
    fresh (a save: files not open may have changed on disk too)."""
    last = server.looked.get(root)
    if fresh or last is None or last.texts != texts:
        last = server.looked[root] = look(root, texts)
    return last


def _snapshot(server: MedallionServer, uri: str, loaded: bool = False, fresh: bool = False
              ) -> tuple[Snapshot, str] | None:
    """The project the file is in, with every open file's unsaved text, and the file's path
    relative to it. loaded: one that loads, with the file as saved if its text, half typed,
    does not (completion and navigation are asked mid-way)."""
    path = _path(uri)
    root = project_root(path.parent) if path else None
    if path is None or root is None or path.suffix not in WATCHED:
        return None
    texts = {}
    for open_uri, document in server.workspace.text_documents.items():
        open_path = _path(open_uri)
        if open_path is not None and open_path.is_relative_to(root):
            texts[str(open_path.relative_to(root))] = document.source
    rel = str(path.relative_to(root))
    snapshot = _look(server, root, texts, fresh)
    if loaded and snapshot.loaded is None and rel in texts:
        snapshot = look(root, {p: text for p, text in texts.items() if p != rel})
    return snapshot, rel


def publish(server: MedallionServer, uri: str, fresh: bool = False) -> None:
    """Check the file's project and publish every file's diagnostics, clearing fixed ones."""
    looked = _snapshot(server, uri, fresh=fresh)
    if looked is None:
        return
    snapshot = looked[0]
    by_file: dict[str, list[types.Diagnostic]] = {}
    for problem in problems(snapshot):
        span = types.Range(types.Position(problem.line, problem.start),
                           types.Position(problem.line, problem.end))
        by_file.setdefault(from_fs_path(str(snapshot.root / problem.path)) or "", []).append(
            types.Diagnostic(span, problem.message, types.DiagnosticSeverity.Error,
                             source="medallion"))
    for stale in server.published.get(snapshot.root, set()) | {uri}:
        by_file.setdefault(stale, [])  # fixed since, or the file edited: said to be clean
    for file_uri, diagnostics in by_file.items():
        server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=file_uri, diagnostics=diagnostics))
    server.published[snapshot.root] = {u for u, found in by_file.items() if found}


def make_server() -> MedallionServer:
    server = MedallionServer()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: MedallionServer, params: types.DidOpenTextDocumentParams) -> None:
        publish(ls, params.text_document.uri, fresh=True)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: MedallionServer, params: types.DidChangeTextDocumentParams) -> None:
        publish(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: MedallionServer, params: types.DidSaveTextDocumentParams) -> None:
        publish(ls, params.text_document.uri, fresh=True)

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    def goto(ls: MedallionServer, params: types.DefinitionParams) -> types.Location | None:
        looked = _snapshot(ls, params.text_document.uri, loaded=True)
        if looked is None:
            return None
        text = ls.workspace.get_text_document(params.text_document.uri).source
        place = definition(looked[0], text, params.position.line, params.position.character)
        if place is None:
            return None
        start = types.Position(place.line, 0)
        return types.Location(from_fs_path(str(place.path)) or "", types.Range(start, start))

    @server.feature(types.TEXT_DOCUMENT_COMPLETION,
                    types.CompletionOptions(trigger_characters=["'", '"', " ", ","]))
    def complete(ls: MedallionServer, params: types.CompletionParams) -> types.CompletionList:
        looked = _snapshot(ls, params.text_document.uri, loaded=True)
        items = []
        if looked is not None:
            text = ls.workspace.get_text_document(params.text_document.uri).source
            items = [types.CompletionItem(item.label, kind=KINDS[item.kind], detail=item.detail)
                     for item in completions(*looked, text, params.position.line,
                                             params.position.character)]
        return types.CompletionList(is_incomplete=False, items=items)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def show(ls: MedallionServer, params: types.HoverParams) -> types.Hover | None:
        looked = _snapshot(ls, params.text_document.uri, loaded=True)
        if looked is None:
            return None
        text = ls.workspace.get_text_document(params.text_document.uri).source
        said = hover(*looked, text, params.position.line, params.position.character)
        return types.Hover(types.MarkupContent(types.MarkupKind.Markdown, said)) if said else None

    return server


def serve_stdio() -> None:
    make_server().start_io()
