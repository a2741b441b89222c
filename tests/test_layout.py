"""The code's shape, checked: packages by layer importing strictly one way (down), no circle of
imports anywhere (inside functions and package faces included), small modules, and a README
in each package saying what it holds and what it may import."""

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parent.parent / "medallion_cli"
# Top to bottom: a package imports only packages below it (and its own modules). The command
# line and the pytest plugin (testing) are both on top: nothing imports them.
LAYERS = (("cli", "testing", "integrations"), "editor", "commands", "report", "run", "materialize",
          "engines", "storage", "spark", "dag", "load", "core")
LEAVES = ("serve",)  # apart from the layers: the served-command protocol imports only core
RANK = {name: rank for rank, layer in enumerate(LAYERS)
        for name in (layer if isinstance(layer, tuple) else (layer,))}
ENGINES = ("engines.embedded", "engines.delta_spark")  # neither imports the other
LONGEST = 300  # lines
AT_THE_ROOT = 10  # modules directly under medallion_cli/


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    """Module -> the medallion_cli modules it imports (at module level or inside functions)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "medallion_cli"):
                target = node.module
            else:
                continue
            named = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules]
            found |= set(named) or ({target} & set(modules))
        graph[name] = found - {name}
    return graph


def package_of(module: str) -> str:
    """The layer or leaf a module belongs to ('' for the package's own top modules)."""
    parts = module.split(".")[1:]
    return parts[0] if parts and parts[0] in (*RANK, *LEAVES) else ""


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt]
            if nxt not in state and (found := visit(nxt, path + [nxt])):
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def test_no_import_circle_anywhere():
    found = cycle(imports())
    assert found is None, " -> ".join(found)


def test_packages_import_strictly_downward():
    wrong = []
    for module, deps in imports().items():
        here = package_of(module)
        for dep in deps:
            there = package_of(dep)
            if there == here or not there:
                continue
            if here in LEAVES:
                ok = there == "core"
            elif there in LEAVES:
                ok = here in ("cli", "commands")  # the commands start a server and forward
            else:
                ok = RANK[there] > RANK[here]
            if not ok:
                wrong.append(f"{module} imports {dep}")
    assert not wrong, "\n".join(sorted(wrong))


def test_an_engine_never_imports_the_other():
    wrong = [f"{m} imports {d}" for m, deps in imports().items() for d in deps
             for a, b in (ENGINES, ENGINES[::-1])
             if m.startswith(f"medallion_cli.{a}") and d.startswith(f"medallion_cli.{b}")]
    assert not wrong, wrong


def test_modules_stay_small_and_the_root_stays_short():
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > LONGEST}
    assert not long, long
    at_root = [p.name for p in PACKAGE.iterdir() if p.is_file() and p.suffix == ".py"]
    assert len(at_root) <= AT_THE_ROOT, at_root
    assert not (PACKAGE / "build").exists()  # named like build output, which tools skip


def test_each_package_says_what_it_holds_and_what_it_may_import():
    for package in [PACKAGE / "__init__.py", *PACKAGE.rglob("*/__init__.py")]:
        folder = package.parent
        readme = folder / "README.md"
        assert readme.is_file(), f"no README.md in {folder.relative_to(PACKAGE.parent)}"
        text = readme.read_text()
        assert "may import" in text, f"{readme} does not say what its package may import"
        unnamed = [p.name for p in folder.glob("*.py")
                   if p.name not in ("__init__.py", "__main__.py") and f"`{p.name}`" not in text]
        assert not unnamed, f"{readme} does not name {unnamed}"


def test_every_file_name_the_package_writes_in_its_docstrings_and_readmes_exists():
    """A module's docstring or comment, or a package's README, that names a file (`lease.py`,
    `run/lease.py`) names one that exists: after a move or a rename the trail still holds."""
    root = PACKAGE.parent
    known = [p.relative_to(root).as_posix() for folder in ("medallion_cli", "tests", "bench",
                                                           "examples", "hooks")
             for p in (root / folder).rglob("*.py")] + ["setup.py"]
    stale = {}
    for path in [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("README.md")]:
        for name in re.findall(r"(?<![\w./-])((?:[\w-]+/)*[a-z_][a-z0-9_]*\.py)\b",
                               path.read_text()):
            if not any(k == name or k.endswith("/" + name) for k in known):
                stale.setdefault(name, []).append(path.relative_to(root).as_posix())
    assert not stale


@pytest.mark.unit
def test_every_dotted_name_of_the_package_in_tests_docs_and_bench_exists():
    """Tests, docs, benchmarks and examples name modules and their members as text too (in a
    subprocess's script, a monkeypatch target, a page): after a move each still resolves."""
    import importlib

    root = Path(__file__).resolve().parent.parent
    texts = [p for folder in ("tests", "docs", "bench", "examples", "hooks")
             for p in (root / folder).rglob("*") if p.suffix in (".py", ".md")]
    names = set()
    for text in (p.read_text(errors="replace") for p in [*texts, root / "README.md"]):
        names |= set(re.findall(r"medallion_cli(?:\.[a-z_][a-z0-9_]*)+", text))
        for module, imported in re.findall(r"from (medallion_cli[\w.]*) import ([\w, ]+)", text):
            names |= {f"{module}.{n.split(' as ')[0].strip()}" for n in imported.split(",")
                      if n.strip()}
    missing = []
    for name in sorted(names):
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                found = importlib.import_module(".".join(parts[:cut]))
                break
            except ImportError:
                continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute, None)
        if found is None:
            missing.append(name)
    assert not missing


def test_build_steps_never_import_the_drivers_and_only_the_strategy_table_picks_one():
    """materialize/: the steps (sources/, writing/) import no driver and not each other; the
    drivers are imported by the strategy table (strategies.py), which alone picks one, and by
    each other's helpers, never from outside materialize/ but for --watch's streaming queries."""
    here = "medallion_cli.materialize"
    drivers = tuple(f"{here}.{d}" for d in ("batch", "empty", "strategies", "streaming",
                                             "by_groups"))
    steps = {f"{here}.sources": f"{here}.writing", f"{here}.writing": f"{here}.sources"}
    wrong = []
    for module, deps in imports().items():
        for dep in deps:
            step = next((s for s in steps if module.startswith(s)), None)
            if step and (dep.startswith(drivers) or dep.startswith(steps[step])):
                wrong.append(f"{module} imports {dep}")
            builds = dep.startswith((f"{here}.batch", f"{here}.by_groups.driver"))
            if builds and module != f"{here}.strategies":
                wrong.append(f"{module} imports {dep}: only strategies.py picks a driver")
    assert not wrong, "\n".join(sorted(wrong))


def test_engines_differ_by_capabilities_never_by_name_or_transport():
    """Outside engines/, no module compares an engine's name (or keys a table by one), and
    none outside spark/ and engines/ asks whether Spark is a Spark Connect client: what engines
    differ in is declared (engines/base.py Capabilities) and consulted. (storage/ reaches
    files over Spark Connect with pyarrow: the transport is its subject.)"""
    names = {"embedded", "delta-spark"}
    wrong = []
    for path in PACKAGE.rglob("*.py"):
        module = module_name(path)
        if module.startswith("medallion_cli.engines"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
            elif isinstance(node, ast.Dict):
                sides = list(node.keys)
            else:
                sides = []
            if any(isinstance(s, ast.Constant) and s.value in names for s in sides):
                wrong.append(f"{module}:{node.lineno} decides by an engine's name")
            transport = (isinstance(node, ast.Name) and node.id == "is_connect"
                         and package_of(module) not in ("spark", "storage"))
            if transport:
                wrong.append(f"{module}:{node.lineno} decides by the transport (is_connect)")
    assert not wrong, "\n".join(sorted(set(wrong)))
