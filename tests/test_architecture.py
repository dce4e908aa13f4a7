"""The one-way flow of STYLE.md: models -> persistence -> operations -> engine -> surfaces."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mgcp"

LAYERS = {  # a module in this layer may not import from these
    "models": ["mgcp.persistence", "mgcp.operations", "mgcp.engine", "mgcp.surfaces"],
    "schedule": ["mgcp."],
    "persistence": ["mgcp.operations", "mgcp.engine", "mgcp.surfaces"],
    "operations": ["mgcp.persistence", "mgcp.engine", "mgcp.surfaces"],
    "engine": ["mgcp.surfaces"],
}
ONLY_IN = {  # third-party or stdlib modules that belong to one place
    "mcp": ["surfaces/mcp_server.py"],
    "networkx": ["operations/"],
    "community": ["operations/"],
    "aiosqlite": ["persistence/"],
    "sqlite_utils": ["persistence/"],
    "sqlite3": ["persistence/"],
    "typer": ["surfaces/"],
}


def imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


MODULES = sorted(PACKAGE.rglob("*.py"))


def layer_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_flow_one_way(path):
    forbidden = LAYERS.get(layer_of(path), [])
    bad = [name for name in imports(path) for prefix in forbidden
           if name.startswith(prefix) and not name.startswith(f"mgcp.{layer_of(path)}")]
    assert not bad, f"{path.name} imports {bad}"


@pytest.mark.parametrize("module, allowed", ONLY_IN.items())
def test_libraries_live_in_their_layer(module, allowed):
    offenders = [str(p.relative_to(PACKAGE)) for p in MODULES
                 if any(n == module or n.startswith(module + ".") for n in imports(p))
                 and not any(str(p.relative_to(PACKAGE)).startswith(a) for a in allowed)]
    assert not offenders, f"{module} imported outside {allowed}: {offenders}"


def test_migrations_import_only_stdlib_and_sqlite_utils():
    for path in sorted((PACKAGE.parent / "migrations").glob("*.py")):
        assert not [n for n in imports(path) if n.startswith("mgcp")], path.name
