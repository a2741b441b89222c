"""The code's shape, checked: imports go one way with no circle, and the modules on the build
path stay small enough to read in one sitting."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "medallion_cli"
BUILD_STEPS = {"inputs", "landing", "json_values", "debezium", "kafka", "rows", "checks", "writes",
               "state", "checkpoints", "throughput", "incremental", "aggregates", "history",
               "tally", "catalog", "execute", "tombstones"}
BUILD_DRIVERS = {"batch", "by_groups", "streaming", "empty"}


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
                candidates = [target] + [f"{target}.{a.name}" for a in node.names]
                found |= {c for c in candidates if c in modules}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("medallion_cli"):
                found |= {c for c in [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                          if c in modules}
        graph[name] = found - {name}
    return graph


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


def test_no_module_imports_itself_back_in_a_circle():
    # a package __init__ importing its own submodules is not a circle of the code's design
    graph = {m: {d for d in deps if not m.endswith(".__init__") and not d.startswith(m + ".")}
             for m, deps in imports().items()}
    assert cycle(graph) is None, " -> ".join(cycle(graph))


def test_building_a_node_goes_drivers_then_steps_then_engines():
    graph = imports()
    build = {m.rsplit(".", 1)[1]: deps for m, deps in graph.items()
             if m.startswith("medallion_cli.materialize.")}
    above = {"medallion_cli." + m for m in ("runner", "tasks", "cli", "watch", "maintenance",
                                            "progress", "docs")}
    for module, deps in build.items():
        assert not deps & above, f"build.{module} imports {deps & above}"
        imported = {d.rsplit(".", 1)[1] for d in deps if d.startswith("medallion_cli.materialize.")}
        if module in BUILD_STEPS | {"context"}:
            assert not imported & BUILD_DRIVERS, f"step {module} imports a driver"
        if module == "context":
            assert not imported, "context imports no step"
    assert not any(d.startswith("medallion_cli.materialize") for m, deps in graph.items()
                   if m.startswith("medallion_cli.engines") for d in deps)


def test_modules_on_the_build_path_stay_small():
    path = [PACKAGE / "build" / f"{m}.py" for m in sorted(BUILD_STEPS | BUILD_DRIVERS)]
    long = {p.name: n for p in path if (n := len(p.read_text().splitlines())) > 260}
    assert not long, long
