"""The package layering of DEVELOPERS.md, enforced by reading every module's imports.

server -> jetstream -> store -> subjects/clock; protocol and config are leaves only the server
(and main) import; protocol, store, jetstream, subjects and config never touch sockets or
asyncio; cli and spark are clients that import nothing of the server side.

Inside JetStream, ``jetstream.api`` is a leaf: it parses requests, calls the domain and renders
replies; the domain never imports it. An import inside a function body is how a circle hides
(the module graph has the cycle, Python just never sees it at import time), so the runtime
import graph of ``natsd.jetstream`` -- top-level and function-level imports alike -- must have
no cycle, and function-level ``natsd`` imports in the package are listed, each with its reason.

The graph can be printed (module -> the natsd modules it imports; ``[fn]`` marks an import made
inside a function, ``[tc]`` one under ``if TYPE_CHECKING:``), followed by its cycles::

    python -m tests.unit.test_layering --graph jetstream [--src DIR]
"""

from __future__ import annotations

import ast
import functools
import sys
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
    # the test harness sits on top of the server; the clients are not its business
    "testing": {"cli", "spark"},
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



# ---------------------------------------------------------------------------------------------
# The module graph (edges between natsd modules, with where the import statement sits)

TOP, FUNCTION, TYPE_ONLY = "top", "fn", "tc"


def _module_name(path: Path, src: Path) -> str:
    rel = path.relative_to(src.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_sites(tree: ast.Module):
    """Yield (import node, kind) for every import statement, kind TOP/FUNCTION/TYPE_ONLY."""

    def visit(node: ast.AST, kind: str):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, kind
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from visit(child, FUNCTION if kind == TOP else kind)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for sub in child.body:
                    yield from visit(ast.Module(body=[sub], type_ignores=[]), TYPE_ONLY if kind == TOP else kind)
                for sub in child.orelse:
                    yield from visit(ast.Module(body=[sub], type_ignores=[]), kind)
            else:
                yield from visit(child, kind)

    yield from visit(tree, TOP)


def module_graph(src: Path = SRC) -> dict[str, dict[str, str]]:
    """module -> {imported natsd module: kind}; the strongest kind wins (top > fn > tc)."""
    return {m: dict(e) for m, e in _module_graph(src).items()}


@functools.lru_cache(maxsize=4)
def _module_graph(src: Path) -> dict[str, dict[str, str]]:
    paths = {_module_name(p, src): p for p in sorted(src.rglob("*.py"))}
    rank = {TOP: 0, FUNCTION: 1, TYPE_ONLY: 2}
    graph: dict[str, dict[str, str]] = {}
    for mod, path in paths.items():
        edges: dict[str, str] = {}
        tree = ast.parse(path.read_text(), str(path))
        for node, kind in _import_sites(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif node.level == 0 and node.module:
                # "from pkg import sub" imports the submodule when there is one
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in paths else node.module
                           for a in node.names]
            for t in targets:
                while t not in paths and "." in t:
                    t = t.rsplit(".", 1)[0]
                # importing a.b.c runs a/b/__init__.py too: the parent packages are edges as
                # well, except the importer's own ancestors (already initialised or initialising)
                while t.startswith("natsd.") and not mod.startswith(t + "."):
                    if t in paths and t != mod and (t not in edges or rank[kind] < rank[edges[t]]):
                        edges[t] = kind
                    t = t.rsplit(".", 1)[0]
        graph[mod] = edges
    return graph


def cycles(graph: dict[str, dict[str, str]], within: str, kinds=(TOP, FUNCTION)) -> list[list[str]]:
    """Strongly connected components (size > 1) of the runtime import graph under ``within``."""
    nodes = [m for m in graph if m == within or m.startswith(within + ".")]
    adj = {m: [t for t, k in graph[m].items() if k in kinds and t in graph
               and (t == within or t.startswith(within + "."))] for m in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:  # Tarjan; the package is small, recursion depth is fine
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in adj[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in nodes:
        if v not in index:
            strong(v)
    return sorted(out)


def function_level_imports(src: Path = SRC, package: str = "jetstream") -> list[str]:
    """Every import of a natsd module made inside a function body in ``package``."""
    found = []
    for path in sorted((src / package).rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node, kind in _import_sites(tree):
            if kind != FUNCTION:
                continue
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                if name.startswith("natsd"):
                    found.append(f"{path.relative_to(src)}:{node.lineno} {name}")
    return found


def render_graph(package: str, src: Path = SRC) -> str:
    graph = module_graph(src)
    root = f"natsd.{package}"
    lines = [f"# import graph of {root} ({src}); [fn] = inside a function, [tc] = TYPE_CHECKING only"]
    for mod in sorted(m for m in graph if m == root or m.startswith(root + ".")):
        edges = graph[mod]
        shown = [t + ("" if k == TOP else f" [{k}]") for t, k in sorted(edges.items())]
        lines.append(f"{mod}")
        lines.extend(f"    -> {e}" for e in shown)
    comps = cycles(graph, root)
    lines.append("")
    lines.append(f"# cycles (runtime imports, top-level and function-level): {len(comps)}")
    for comp in comps:
        lines.append(f"  {len(comp)} modules: " + ", ".join(comp))
    fl = function_level_imports(src, package)
    lines.append("")
    lines.append(f"# function-level natsd imports in {package}/: {len(fl)}")
    lines.extend("  " + f for f in fl)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Inside JetStream: the API is a leaf, and no circle hides in a function body

# Function-level natsd imports allowed in jetstream/, each with its reason. None may hide a
# circle (test_jetstream_has_no_import_cycle treats them as top-level imports).
FUNCTION_LEVEL_ALLOWED: set[tuple[str, str]] = set()


def test_jetstream_domain_never_imports_the_api():
    """``jetstream.api`` parses, calls the domain and renders: the domain must not know it
    (not even for type checking: the engine sees the API through ``manager.ApiSurface``)."""
    graph = module_graph()
    bad = [f"{mod} imports {target}" for mod, edges in sorted(graph.items())
           if mod.startswith("natsd.jetstream") and not mod.startswith("natsd.jetstream.api")
           for target in edges if target == "natsd.jetstream.api" or target.startswith("natsd.jetstream.api.")]
    assert not bad, "\n".join(bad)


def test_store_never_imports_jetstream_at_any_level():
    graph = module_graph()
    bad = [f"{mod} imports {target}" for mod, edges in sorted(graph.items()) if mod.startswith("natsd.store")
           for target in edges if target.startswith("natsd.jetstream")]
    assert not bad, "\n".join(bad)


def test_jetstream_has_no_import_cycle():
    """An import moved into a function body to dodge a circle still makes one: the runtime
    graph (top-level and function-level imports) of natsd.jetstream must be acyclic."""
    comps = cycles(module_graph(), "natsd.jetstream")
    assert not comps, "import cycles in natsd.jetstream:\n" + "\n".join(", ".join(c) for c in comps)


def test_function_level_imports_in_jetstream_are_listed():
    found = set()
    where = []
    for entry in function_level_imports():
        path, name = entry.split(":", 1)[0], entry.split(" ", 1)[1]
        found.add((path, name))
        if (path, name) not in FUNCTION_LEVEL_ALLOWED:
            where.append(entry)
    assert not where, ("function-level natsd imports (move them to the top, or list them with a "
                       "reason in FUNCTION_LEVEL_ALLOWED):\n" + "\n".join(where))


def test_the_cycle_finder_finds_a_circle_hidden_in_a_function(tmp_path):
    # a.py imports b at the top; b.py imports a inside a function: one circle of two modules
    pkg = tmp_path / "natsd" / "jetstream"
    pkg.mkdir(parents=True)
    (tmp_path / "natsd" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from natsd.jetstream import b\n")
    (pkg / "b.py").write_text("def f():\n    from natsd.jetstream.a import x\n    return x\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from natsd.jetstream import a\n")
    graph = module_graph(tmp_path / "natsd")
    assert graph["natsd.jetstream.b"] == {"natsd.jetstream.a": FUNCTION}
    assert graph["natsd.jetstream.c"] == {"natsd.jetstream.a": TYPE_ONLY}
    assert cycles(graph, "natsd.jetstream") == [["natsd.jetstream.a", "natsd.jetstream.b"]]
    assert function_level_imports(tmp_path / "natsd") == ["jetstream/b.py:2 natsd.jetstream.a"]
    assert "natsd.jetstream.b\n    -> natsd.jetstream.a [fn]" in render_graph("jetstream", tmp_path / "natsd")


if __name__ == "__main__":  # python -m tests.unit.test_layering --graph jetstream [--src DIR]
    import argparse

    ap = argparse.ArgumentParser(description="print the import graph of a natsd package")
    ap.add_argument("--graph", default="jetstream", metavar="PACKAGE")
    ap.add_argument("--src", type=Path, default=SRC, help="the natsd package directory (default: this tree)")
    args = ap.parse_args()
    src = args.src if args.src.name == "natsd" else args.src / "natsd"
    sys.stdout.write(render_graph(args.graph, src))
