"""The one-way flow of STYLE.md: models -> persistence -> operations -> engine -> surfaces.

Every top-level module and package of mgcp has a rule naming the mgcp layers it may import (its own
layer is always allowed); a new module fails `test_every_layer_has_a_rule` until it is given one.
Imports are read from the AST, function-local ones included.
"""

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "mgcp"

RULES = {  # layer -> the other mgcp layers it may import
    "__init__": set(),
    "errors": set(),
    "schedule": set(),  # stdlib only: the SessionStart hook imports it
    "text": set(),
    "collector": set(),  # stdlib only
    "reinforcement": set(),  # pure rules shared by pattern reinforcement and ranking
    "resources": set(),
    "models": set(),
    "validation": {"errors"},
    "shown": set(),  # stdlib only: JSON safe to show in a terminal, for files and surfaces
    "files": set(),  # stdlib only: a file replaced whole
    "config": {"errors", "schedule", "ranking", "reinforcement"},  # reinforcement: min_count's range
    "quality": set(),  # stdlib only: the SessionStart hook imports it
    "ranking": {"quality", "reinforcement"},  # stdlib only: the SessionStart hook imports it
    "recall": {"config", "quality", "ranking", "validation"},  # stdlib only, for the hook
    "export": {"models"},
    "persistence": {"errors", "config", "models", "validation", "text", "resources", "quality", "ranking",
                    "reinforcement", "collector", "shown", "files"},
    "operations": {"models", "text", "reinforcement", "collector"},
    "engine": {"__init__", "errors", "config", "schedule", "models", "validation", "persistence", "operations",
               "quality", "ranking", "recall", "reinforcement", "collector", "text"},
    "surfaces": {"__init__", "errors", "config", "schedule", "models", "resources", "export",
                 "persistence", "engine", "quality", "ranking", "recall", "validation", "shown", "files"},
    "__main__": {"surfaces"},
}
# `records`: the plain (stdlib-only) part of the data model, used wherever models are.
RULES["records"] = set()
for _layer in ("models", "persistence", "engine", "surfaces"):
    RULES[_layer] = RULES[_layer] | {"records"}

ONLY_IN = {  # third-party or stdlib modules that belong to one place
    "mcp": ["surfaces/mcp_server.py"],
    "networkx": ["operations/"],
    "community": ["operations/"],
    "numpy": ["operations/"],
    "model2vec": ["operations/semantic.py"],  # the optional `semantic` extra, imported lazily
    "aiosqlite": ["persistence/"],
    "sqlite_utils": ["persistence/"],
    "sqlite3": ["persistence/"],
    "typer": ["surfaces/cli/"],
    "uvicorn": ["surfaces/mcp_server.py"],  # `mgcp serve --http` only
    "starlette": ["surfaces/mcp_server.py"],
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
MIGRATIONS = sorted((ROOT / "migrations").glob("*.py"))


def layer_of(module: str) -> str:
    return module.split(".")[1] if "." in module else "__init__"


def raw_imports(path: Path) -> set[str]:
    """Imported names as written; relative ones keep their leading dots."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add("." * node.level + (node.module or ""))
    return names


def mgcp_imports(path: Path) -> set[str]:
    """The mgcp modules a file imports; `from a import b` means module a.b when b is a module."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
    return {n for n in found if n == "mgcp" or n.startswith("mgcp.")}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done, stack = set(), []

    def visit(node):
        if node in stack:
            return stack[stack.index(node):] + [node]
        if node in done:
            return None
        stack.append(node)
        for child in sorted(graph[node]):
            if cycle := visit(child):
                return cycle
        stack.pop()
        done.add(node)
        return None

    return next((c for c in map(visit, sorted(graph)) if c), None)


def test_every_layer_has_a_rule():
    layers = {layer_of(m) for m in MODULES}
    assert layers == set(RULES), f"no rule for {layers - set(RULES)}; stale rules {set(RULES) - layers}"


def test_only_main_imports_surfaces():
    assert [layer for layer, allowed in RULES.items() if "surfaces" in allowed] == ["__main__"]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.removeprefix("mgcp."))
def test_imports_follow_the_rules(module):
    own = layer_of(module)
    bad = sorted(n for n in mgcp_imports(MODULES[module]) if layer_of(n) not in RULES[own] | {own})
    assert not bad, f"{module} ({own}) may import only {sorted(RULES[own])}, but imports {bad}"


def test_no_import_cycles():
    graph = {m: mgcp_imports(p) & MODULES.keys() for m, p in MODULES.items()}
    cycle = find_cycle(graph)
    assert not cycle, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize("module, allowed", ONLY_IN.items())
def test_libraries_live_in_their_layer(module, allowed):
    offenders = [rel for p in MODULES.values() if (rel := p.relative_to(PACKAGE).as_posix())
                 and any(n == module or n.startswith(module + ".") for n in raw_imports(p))
                 and not rel.startswith(tuple(allowed))]
    assert not offenders, f"{module} imported outside {allowed}: {offenders}"


@pytest.mark.parametrize("path", MIGRATIONS, ids=lambda p: p.name)
def test_migrations_import_only_stdlib_and_sqlite_utils(path):
    bad = sorted(n for n in raw_imports(path)
                 if n.split(".")[0] not in sys.stdlib_module_names | {"sqlite_utils"})
    assert not bad, f"{path.name} imports {bad}"
