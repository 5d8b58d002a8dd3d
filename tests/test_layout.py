"""The package's shape: no import cycle (deferred and typing-only imports counted), a few modules
at the top, a data model that imports nothing but the standard library, the measuring package
apart from the gate and the reports, and a plugin that loads without torch (see also
test_fixtures)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "pytest_cnnperf"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> set[str]:
    """The package's modules that ``path`` imports anywhere: at the top, inside functions and
    under ``TYPE_CHECKING`` alike."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("pytest_cnnperf"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if not target.startswith("pytest_cnnperf"):
                continue
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.add(candidate if candidate in MODULES else target)
    return {m for m in found if m in MODULES and m != name}


MODULES = {module_name(p) for p in PACKAGE.rglob("*.py")}
GRAPH = {module_name(p): imports(p) for p in PACKAGE.rglob("*.py")}


def test_no_import_cycle() -> None:
    visiting: list[str] = []
    done: set[str] = set()

    def visit(module: str) -> None:
        if module in done:
            return
        assert module not in visiting, " -> ".join([*visiting[visiting.index(module) :], module])
        visiting.append(module)
        for imported in sorted(GRAPH[module]):
            if not imported.endswith("__init__") and imported in GRAPH:
                visit(imported)
        visiting.pop()
        done.add(module)

    for module in sorted(GRAPH):
        visit(module)


def test_at_most_ten_modules_at_the_top_of_the_package() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 10, top


def test_the_data_model_imports_only_itself_and_the_standard_library() -> None:
    allowed = {"__future__", "dataclasses", "enum", "functools", "math", "pathlib", "statistics"}
    allowed |= {"collections", "typing"}
    for path in (PACKAGE / "model").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            assert {n.split(".")[0] for n in names} <= allowed, (path.name, names)


def test_the_measuring_package_imports_only_itself_and_plain_data() -> None:
    plain = {
        "pytest_cnnperf.gate.policy",
        "pytest_cnnperf.settings",
        "pytest_cnnperf.benchmark",
    }
    for module, imported in GRAPH.items():
        if module.startswith("pytest_cnnperf.measuring"):
            outside = {
                m
                for m in imported
                if not m.startswith(("pytest_cnnperf.measuring", "pytest_cnnperf.model"))
                and m not in plain
            }
            assert outside == set(), module


def test_the_plugin_module_imports_only_the_settings_tables_when_it_loads() -> None:
    tree = ast.parse((PACKAGE / "plugin.py").read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    ours = [ast.unparse(n) for n in top if isinstance(n, ast.ImportFrom) and n.level]
    assert ours == ["from . import settings, zoo"]
