"""The architecture's rules, read from the source: which package may import which,
no import cycle (imports under TYPE_CHECKING and inside functions included), no module
over 500 lines. docs/architecture.md explains them."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "hivemind"
MAX_LINES = 500

# package -> the packages it must not import (None: anything but itself and the top)
FORBIDDEN = {
    "fs": {"hive", "memory", "ltm", "llm", "mcp", "tools", "agent", "daemon", "cli"},
    "hive": {"memory", "ltm", "llm", "mcp", "tools", "agent", "daemon", "cli"},
    "memory": {"hive", "llm", "agent", "daemon", "cli"},
    "llm": {"hive", "agent", "daemon", "cli"},
    "mcp": {"hive", "memory", "ltm", "llm", "tools", "agent", "daemon", "cli"},
    "ltm": {"agent", "daemon", "cli"},
    "tools": {"agent", "daemon", "cli"},
    "agent": {"daemon", "cli"},
    "daemon": {"cli"},
}
ENTRY_POINTS = {"hivemind.__main__"}  # `python -m hivemind` runs the CLI


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> Iterator[str]:
    """Every hivemind module `name` imports, wherever the import statement is."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            # `from pkg import mod` imports the module pkg.mod
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        yield from (t for t in targets if t.split(".")[0] == "hivemind")


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: set(_imports(name, path, known)) - {name} for name, path in modules.items()}


def _area(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in FORBIDDEN) else ""


def test_packages_import_only_downwards() -> None:
    broken = sorted(
        f"{mod} imports {dep}"
        for mod, deps in _graph().items()
        for dep in deps
        if _area(dep) in FORBIDDEN.get(_area(mod), set())
    )
    assert broken == []


def test_only_the_cli_imports_the_cli() -> None:
    broken = sorted(
        f"{mod} imports {dep}"
        for mod, deps in _graph().items()
        for dep in deps
        if _area(dep) == "cli" and _area(mod) != "cli" and mod not in ENTRY_POINTS
    )
    assert broken == []


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the modules along it, or None (iterative DFS)."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    for start in sorted(graph):
        if start in state:
            continue
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        state[start] = 1
        while stack:
            node, deps = stack[-1]
            for dep in deps:
                if state.get(dep) == 1:
                    path = [n for n, _ in stack]
                    return [*path[path.index(dep):], dep]
                if dep not in state and dep in graph:
                    state[dep] = 1
                    stack.append((dep, iter(sorted(graph[dep]))))
                    break
            else:
                state[node] = 2
                stack.pop()
    return None


def test_no_import_cycle() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=_module_name)
def test_no_module_over_500_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.name} has {lines} lines"


def test_the_architecture_page_names_every_package_and_top_module() -> None:
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    names = [f"{p.name}/" for p in PACKAGE.iterdir() if (p / "__init__.py").exists()]
    names += [p.name for p in PACKAGE.glob("*.py") if not p.name.startswith("__")]
    assert [n for n in sorted(names) if n not in page] == []
