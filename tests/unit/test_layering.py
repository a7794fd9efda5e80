"""The package layering of DEVELOPERS.md, enforced by reading every module's imports.

server -> jetstream -> store -> subjects/clock; protocol and config are leaves only the server
(and main) import; protocol, store, jetstream, subjects and config never touch sockets or
asyncio; cli and spark are clients that import nothing of the server side.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "natsd"

# package -> natsd packages it must not import
FORBIDDEN = {
    "protocol": {"server", "jetstream", "store", "config", "cli", "spark"},
    "subjects": {"server", "jetstream", "store", "protocol", "config", "cli", "spark"},
    "store": {"server", "jetstream", "protocol", "config", "cli", "spark"},
    "jetstream": {"server", "cli", "spark"},
    "config": {"jetstream", "store", "protocol", "cli", "spark"},
    "cli": {"server", "jetstream", "store", "protocol", "config", "subjects"},
    "spark": {"server", "jetstream", "store", "protocol", "config", "subjects", "cli"},
}
# packages that must stay sans-IO (no event loop, no sockets)
SANS_IO = {"protocol", "subjects", "store", "jetstream", "config"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _modules(package: str):
    return sorted((SRC / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_follow_the_layering(package):
    bad = []
    for path in _modules(package):
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] == "natsd" and len(parts) > 1 and parts[1] in FORBIDDEN[package]:
                bad.append(f"{path.relative_to(SRC)} imports {name}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("package", sorted(SANS_IO))
def test_sans_io_packages_do_not_touch_sockets_or_the_loop(package):
    # main.py of config is not in config/; server/main.py owns the process.
    bad = []
    for path in _modules(package):
        for name in _imports(path):
            if name.split(".")[0] in {"asyncio", "socket", "uvloop", "selectors"}:
                bad.append(f"{path.relative_to(SRC)} imports {name}")
    assert not bad, "\n".join(bad)


def test_every_package_is_checked():
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages - {"server"} <= set(FORBIDDEN)
