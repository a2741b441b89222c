"""The analyst's loop in an editor: from saving a model with a misspelled column to its
diagnostic from `medallion lsp`, and from saving the fix to the diagnostic cleared, measured
with a language client (pytest-lsp's, as tests/test_lsp.py) on the sample and on a generated
project of many models (lag_project.py's shape). No JVM.

    python bench/editor_bench.py --models 500 --saves 10
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lag_project import write
from lsprotocol import types
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig

ROOT = Path(__file__).resolve().parent.parent
SERVER = [sys.executable, "-m", "medallion_cli.cli", "lsp"]


async def saves(project: Path, model: Path, count: int) -> tuple[list[float], list[float]]:
    """Seconds from each save to its diagnostic: of a typo, then of its fix."""
    client = await ClientServerConfig(server_command=SERVER).start()
    await client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities()))
    uri = from_fs_path(str(model))
    good = model.read_text()
    typo = re.sub(r"\bselect\b", "select amont,", good, count=1, flags=re.IGNORECASE)
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri, "sql", 0, good)))
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    timings: tuple[list[float], list[float]] = ([], [])
    for version in range(count):
        for text, seconds in ((typo, timings[0]), (good, timings[1])):
            model.write_text(text)
            began = time.perf_counter()
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=uri, version=version * 2 + 1),
                [types.TextDocumentContentChangeWholeDocument(text)]))
            client.text_document_did_save(types.DidSaveTextDocumentParams(
                types.TextDocumentIdentifier(uri), text))
            # the change's diagnostics come first (timed), then the save's
            await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
            seconds.append(time.perf_counter() - began)
            assert bool(client.diagnostics.get(uri)) == (text is typo), client.diagnostics
            await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    model.write_text(good)
    await client.shutdown_session()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=500)
    parser.add_argument("--saves", type=int, default=10)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="medallion-editor-"))
    sample = scratch / "sample"
    shutil.copytree(ROOT, sample, ignore=shutil.ignore_patterns(
        ".*", "warehouse", "target", "tests", "bench", "docs", "editors", "*.egg-info"))
    generated = scratch / "generated"
    write(generated, args.models)
    gold = sorted((generated / "models").rglob("*.sql"))[-1]
    daily = sample / "models/gold/gold_daily_revenue.sql"
    for label, project, model in (("sample", sample, daily),
                                  (f"generated ({args.models} models)", generated, gold)):
        typo, fix = asyncio.run(saves(project, model, args.saves))
        print(f"{label}: save to diagnostic {statistics.median(typo):.2f} s (median of "
              f"{args.saves}; max {max(typo):.2f}), save of the fix to cleared "
              f"{statistics.median(fix):.2f} s")


if __name__ == "__main__":
    main()
