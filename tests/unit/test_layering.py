"""The package layering of DEVELOPERS.md, enforced by reading every module's imports.

server -> jetstream -> store -> subjects/clock; protocol and config are leaves only the server
(and main) import; protocol, store, jetstream, subjects and config never touch sockets or
asyncio; cli and spark are clients that import nothing of the server side.

Inside JetStream, ``jetstream.api`` is a leaf: it parses requests, calls the domain and renders
replies; the domain never imports it. An import inside a function body is how a circle hides
(the module graph has the cycle, Python just never sees it at import time), so the runtime
import graph of ``natsd.jetstream`` -- top-level and function-level imports alike -- must have
no cycle, and function-level ``natsd`` imports in the package are listed, each with its reason.

Every package is covered (the server may import anything but the clients; the helper modules
directly in ``natsd/`` import no package). In ``server/``, the rooms (``leaf/``, ``transport/``,
``auth/``, ``monitoring/``) and the connections see the server through
``natsd.server.context.ServerContext``: nothing but the package itself and ``main`` imports
``server.server``, and the per-message path loads no optional room.

Ratchets, numbers that may only go down (recorded below, the failure names the new number): the
function-local imports of each package, and the modules in import circles once TYPE_CHECKING
imports count (all of them, and those in circles across folders, the goal being none). ``Any`` at
a seam between packages is refused (the rule and its allowlist are at ``ANY_AT_SEAMS_ALLOWED``).

The graph can be printed (module -> the natsd modules it imports; ``[fn]`` marks an import made
inside a function, ``[tc]`` one under ``if TYPE_CHECKING:``), followed by its cycles (runtime,
then counting TYPE_CHECKING imports) and its function-level imports::

    python -m tests.unit.test_layering --graph jetstream [--src DIR]
    python -m tests.unit.test_layering --graph server
"""

from __future__ import annotations

import ast
import functools
import re
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
    # the server may use every layer below it; the clients are not part of it
    "server": {"cli", "spark"},
    # the test harness sits on top of the server; the clients are not its business
    "testing": {"cli", "spark"},
}
# the helper modules directly in natsd/ (clock, gotime, nuid, s2, varint, atomicfile, _compiled) are
# below every package: they import no natsd package (``__main__`` is the entry point, exempt)
TOP_LEVEL_EXEMPT = {"__init__.py", "__main__.py"}
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
    assert packages == set(FORBIDDEN)


def test_top_level_helpers_import_no_package():
    packages = set(FORBIDDEN)
    bad = []
    for path in sorted(SRC.glob("*.py")):
        if path.name in TOP_LEVEL_EXEMPT:
            continue
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] == "natsd" and len(parts) > 1 and parts[1] in packages:
                bad.append(f"{path.name} imports {name}")
    assert not bad, "\n".join(bad)


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
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


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
                targets = [
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in paths else node.module for a in node.names
                ]
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
    adj = {
        m: [t for t, k in graph[m].items() if k in kinds and t in graph and (t == within or t.startswith(within + "."))]
        for m in nodes
    }
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
    tc, across = type_only_cycles(root, src)
    lines.append("")
    lines.append(
        f"# modules in cycles counting TYPE_CHECKING imports: {sum(map(len, tc))} "
        f"(in cycles across folders: {sum(map(len, across))})"
    )
    for comp in tc:
        lines.append(f"  {len(comp)} modules: " + ", ".join(comp))
    fl = function_level_imports(src, package)
    lines.append("")
    lines.append(
        f"# function-level natsd imports in {package}/: {len(fl)} "
        f"(function-local imports of any module: {function_local_import_counts(src).get(package, 0)})"
    )
    lines.extend("  " + f for f in fl)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Inside JetStream: the API is a leaf, and no circle hides in a function body

# Function-level natsd imports allowed in jetstream/, each with its reason. None may hide a
# circle (test_jetstream_has_no_import_cycle treats them as top-level imports).
FUNCTION_LEVEL_ALLOWED: set[tuple[str, str]] = {
    # issue 26 (start-up time): the API's handler table (and through it the stream, consumer and
    # snapshot layers) loads with the first $JS.API request, not at JetStream's start
    ("jetstream/api/__init__.py", "natsd.jetstream.api.routes"),
    ("jetstream/api/__init__.py", "natsd.jetstream.api.streams"),
    ("jetstream/api/__init__.py", "natsd.jetstream.api"),  # (direct gets: with the first stream allowing them)
    # issue 26: the stream and consumer layers load with the first stream created or recovered,
    # the snapshot layer when an account directory exists, the feature list with the first /jsz
    ("jetstream/manager.py", "natsd.jetstream.stream.core"),
    ("jetstream/manager.py", "natsd.jetstream.stream.consumers"),  # (_is_direct: the stream layer's)
    ("jetstream/manager.py", "natsd.jetstream.snapshot"),
    ("jetstream/manager.py", "natsd.jetstream"),  # (consumer_registry, at recovery)
    ("jetstream/manager.py", "natsd.jetstream.features.metadata"),
    # issue 26, second step: a -js start on an empty store loads neither the API's dispatcher, error
    # table and request decoder (first $JS.API request), nor the config models, their checks and
    # the store's seam types (first stream or template): they were a third of such a start
    ("jetstream/api/__init__.py", "natsd.jetstream.api.router"),
    ("jetstream/api/__init__.py", "natsd.jetstream.advisories"),
    ("jetstream/api/__init__.py", "natsd.jetstream.errors"),
    ("jetstream/manager.py", "natsd.jetstream.errors"),
    ("jetstream/manager.py", "natsd.jetstream.config.models"),
    ("jetstream/manager.py", "natsd.store.base"),
    ("jetstream/templates.py", "natsd.jetstream.errors"),
    ("jetstream/templates.py", "natsd.jetstream.advisories"),
    ("jetstream/templates.py", "natsd.jetstream.config.models"),
    ("jetstream/templates.py", "natsd.jetstream.config.stream_checks"),
    ("jetstream/wire.py", "natsd.jetstream.errors"),
    # issue 31 (restart time): the consumer and snapshot handlers (and layers) load with their
    # first request, the consumer layer with the first stream that has consumers
    ("jetstream/api/routes.py", "natsd.jetstream.api"),
    ("jetstream/dormant.py", "natsd.jetstream"),
    # issue 31 (restart time): the schedule layer (with datetime) loads with the first stream allowing
    # schedules or the first schedule header, message tracing's stream side with the first traced message
    ("jetstream/stream/core.py", "natsd.jetstream.stream.schedules"),
    ("jetstream/stream/ingest.py", "natsd.jetstream.stream.schedules"),
    ("jetstream/stream/core.py", "natsd.jetstream.stream.tracing"),
    # issue 31 (first STREAM.CREATE / CONSUMER.CREATE): the layers of features a plain stream or
    # consumer does not use load with the first that does: sourcing (a mirror or sources), atomic
    # and fast batches, counters, schemas, the partition key parser, dead letters
    ("jetstream/stream/core.py", "natsd.jetstream.stream.sourcing"),
    ("jetstream/stream/core.py", "natsd.jetstream.stream.batch"),
    ("jetstream/stream/core.py", "natsd.jetstream.features.schemas"),
    ("jetstream/stream/ingest.py", "natsd.jetstream.stream.batch"),
    ("jetstream/stream/ingest.py", "natsd.jetstream.stream.fastbatch"),
    ("jetstream/stream/ingest.py", "natsd.jetstream.stream.counters"),
    ("jetstream/features/metadata.py", "natsd.jetstream.features.schemas"),
    ("jetstream/features/metadata.py", "natsd.jetstream.features.keyspec"),
    ("jetstream/consumer/core.py", "natsd.jetstream.consumer.deadletter"),
    ("jetstream/consumer/core.py", "natsd.jetstream.consumer.partition"),
}


def test_jetstream_domain_never_imports_the_api():
    """``jetstream.api`` parses, calls the domain and renders: the domain must not know it
    (not even for type checking: the engine sees the API through ``manager.ApiSurface``)."""
    graph = module_graph()
    bad = [
        f"{mod} imports {target}"
        for mod, edges in sorted(graph.items())
        if mod.startswith("natsd.jetstream") and not mod.startswith("natsd.jetstream.api")
        for target in edges
        if target == "natsd.jetstream.api" or target.startswith("natsd.jetstream.api.")
    ]
    assert not bad, "\n".join(bad)


def test_store_never_imports_jetstream_at_any_level():
    graph = module_graph()
    bad = [
        f"{mod} imports {target}"
        for mod, edges in sorted(graph.items())
        if mod.startswith("natsd.store")
        for target in edges
        if target.startswith("natsd.jetstream")
    ]
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
    assert not where, (
        "function-level natsd imports (move them to the top, or list them with a "
        "reason in FUNCTION_LEVEL_ALLOWED):\n" + "\n".join(where)
    )


def test_the_cycle_finder_finds_a_circle_hidden_in_a_function(tmp_path):
    # a.py imports b at the top; b.py imports a inside a function: one circle of two modules
    pkg = tmp_path / "natsd" / "jetstream"
    pkg.mkdir(parents=True)
    (tmp_path / "natsd" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from natsd.jetstream import b\n")
    (pkg / "b.py").write_text("def f():\n    from natsd.jetstream.a import x\n    return x\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from natsd.jetstream import a\n"
    )
    graph = module_graph(tmp_path / "natsd")
    assert graph["natsd.jetstream.b"] == {"natsd.jetstream.a": FUNCTION}
    assert graph["natsd.jetstream.c"] == {"natsd.jetstream.a": TYPE_ONLY}
    assert cycles(graph, "natsd.jetstream") == [["natsd.jetstream.a", "natsd.jetstream.b"]]
    assert function_level_imports(tmp_path / "natsd") == ["jetstream/b.py:2 natsd.jetstream.a"]
    assert "natsd.jetstream.b\n    -> natsd.jetstream.a [fn]" in render_graph("jetstream", tmp_path / "natsd")


# ---------------------------------------------------------------------------------------------
# The server's rooms: leaf/, transport/, auth/, monitoring/ see the server through a protocol

# the modules allowed to import natsd.server.server (the package re-exports Server; main runs it)
# and the embedding/testing API, which starts one (natsd.Server is its lazy attribute)
SERVER_IMPORTERS = {"natsd.server", "natsd.server.main", "natsd", "natsd.testing.server", "natsd.testing.faults"}
# the per-message path of a client connection: no room that only some servers load
PER_MESSAGE_CORE = (
    "natsd.server.connection",
    "natsd.server.router",
    "natsd.server.writer",
    "natsd.server.subscription",
)
OPTIONAL_ROOMS = ("natsd.server.leaf", "natsd.server.monitoring")


def test_rooms_see_the_server_through_its_context_protocol():
    """``server.server`` imports its rooms; the rooms (and the connections) type the server as
    ``natsd.server.context.ServerContext``, so none of them imports ``server.server`` at any level
    (a TYPE_CHECKING import of it is how the 11-module circle of issue 24 was made)."""
    graph = module_graph()
    bad = [
        f"{mod} imports natsd.server.server"
        for mod, edges in sorted(graph.items())
        if "natsd.server.server" in edges and mod not in SERVER_IMPORTERS
    ]
    assert not bad, "\n".join(bad)


def test_the_per_message_path_loads_no_optional_room():
    graph = module_graph()
    bad = [
        f"{mod} imports {target}"
        for mod in PER_MESSAGE_CORE
        for target in graph[mod]
        if any(target == r or target.startswith(r + ".") for r in OPTIONAL_ROOMS)
    ]
    assert not bad, "\n".join(bad)


# ---------------------------------------------------------------------------------------------
# Ratchets: numbers that may only go down. When one goes down, write the new number here (the
# failure says which); when one would go up, fix the code instead.

# Import statements inside function bodies (any module), per package ("(top)": the modules
# directly in natsd/). The remaining ones defer optional, heavy modules (TLS, WebSocket, leafnodes,
# monitoring, JetStream, prometheus_client, pyarrow, ...) for start-up time and memory (issue 26)
# and say so where they stand; one made to dodge an import circle is a defect (it hides the circle).
FUNCTION_LOCAL_IMPORTS = {
    "(top)": 7 + 2 + 3 - 1,
    "cli": 22,
    "config": 9 + 3 + 2 + 3 + 6,
    "jetstream": 5 + 1 - 1 + 11 + 5 + 25 + 3 + 3 + 4 + 2 + 14,
    "server": 23 + 3 + 4 + 2 - 1 + 1 + 7,
    "spark": 15,
    "store": 6 + 2 + 3 + 1 + 1 + 1 + 3 + 2,
    "subjects": 2,
    "testing": 18,
}
# issue 31, start-up time (ADR 0015): the stdlib modules a plain start does not use load with their first
# use: (top) +3 (secrets with the first NUID, datetime with a time outside the fast path or parsed), config +6
# (json/hashlib/datetime for a config file's digest, json for a feature-flag error, datetime for a datetime
# value, json with the first JWT), server +7 (hmac/hashlib with the first password, random with a sampled
# trace or a leaf link's queue member, hashlib for pinned certs and the JetStream node name), subjects +2
# (random with the first mapping or transform), jetstream +3 (zoneinfo with the first schedule time zone,
# secrets with the first sourced stream), store +3 (shutil, with bz2/lzma, with the first delete).
# issue 26, -js start-up: jetstream +11 (the API's handler table, the stream/consumer/snapshot layers and
# the feature list load on first use: FUNCTION_LEVEL_ALLOWED), (top) +2 and config +2 (pathlib, with
# urllib.parse, only for a compiled build or a config file), server +1 (natsd.server.Server on first use:
# `natsd -v` and the command line load without the server).
# jetstream +5: natsd.jetstream.dormant (sleeping streams, issue 31) loads with the first stream, like the stream
# layer (recover, stop, the consumer count, a stray restart file), with the store error type.
# jetstream +25, store +3 (issue 26, second step): the API's dispatcher and error table, the config
# models and checks, the store's seam types and memory store, tempfile and shutil load with the first
# request / stream / template, not at a -js start (FUNCTION_LEVEL_ALLOWED).
# jetstream -1, server -1: sourcing's and MQTT's copies of getHash imported hashlib lazily; natsd.gohash now.
# server +2: the auth callout (nkeys/PyNaCl) and the log-file/syslog handlers load only when configured (issue 29).
# jetstream +3 (issue 31, restart time): the consumer and snapshot handlers load with their first request,
# the consumer layer with the first stream that has consumers (natsd.jetstream.dormant.recover_consumers);
# config +3: the mqtt block's module with an mqtt {} block, the typed JWT claims with trust keys.
# store +1: ctypes (syncfs) only at a clean stop (issue 31).
# store +1: ctypes (malloc_trim) only after a large index was built (natsd.store.memtrim, issue 31).
# store +1: natsd.store.file.peek, loaded only by a restart after a kill -9 (issue 31, ADR 0009).
# jetstream +4 (issue 31, KV restart): the schedule layer and datetime (2 in ingest, 1 in the stream's set-up)
# and the stream side of message tracing (1) load with their first use, not with the stream layer; jetstream +2:
# random with the first ephemeral consumer's name (natsd.jetstream.consumer.helpers), not with JetStream.
# store +2: encryption (cryptography) loaded only when a key is configured (issue 29).
# server +4: the mqtt room, loaded only with an mqtt {} block (issue 28).
# jetstream +1: fastjsonschema, loaded by the first stream with a natsd.schema.* key (issue 27).
# issue 31 (first STREAM.CREATE / CONSUMER.CREATE): jetstream +14, the layers a plain stream or consumer does
# not use load with the first that does (sourcing, batches, counters, schemas, the partition key parser, dead
# letters, random for a consumer's inactivity jitter; FUNCTION_LEVEL_ALLOWED), store +2 (the consumer state
# layer with a stream's first consumer); (top) -1: NUIDs draw from os.urandom, without secrets.
# (top) +6, config +3, server +3 (and the JetStream banner, which loads jetstream types), testing:
# issue 26's start-up time (natsd.Server, nkeys/PyNaCl only for JWT configurations, the compiled-build
# loader, natsd.testing loading the server only when a test starts one)
# Modules in import circles when TYPE_CHECKING imports count too (natsd-wide), and those of them in a
# circle spanning more than one folder (the goal: none; a circle inside one folder is a package's
# own business). Issue 24 started at 44 / 36; 32 / 0 after it; issue 27 added two consumer parts to the
# consumer's own circle and the features' metadata/schemas pair, issue 28 the mqtt room's three, issue 29
# the store's encryption/keyfiles pair (all inside their folders).
TYPE_ONLY_CYCLE_MODULES = 41
TYPE_ONLY_CYCLE_MODULES_ACROSS_FOLDERS = 0


def _package_of(path: Path, src: Path = SRC) -> str:
    rel = path.relative_to(src).parts
    return rel[0] if len(rel) > 1 else "(top)"


def function_local_import_counts(src: Path = SRC) -> dict[str, int]:
    counts: dict[str, int] = {}
    for path in sorted(src.rglob("*.py")):
        pkg = _package_of(path, src)
        for _node, kind in _import_sites(ast.parse(path.read_text(), str(path))):
            if kind == FUNCTION:
                counts[pkg] = counts.get(pkg, 0) + 1
    return counts


def _folder(module: str, src: Path = SRC) -> str:
    path = src.parent / Path(*module.split("."))
    return module if path.is_dir() else module.rsplit(".", 1)[0]


def type_only_cycles(within: str = "natsd", src: Path = SRC) -> tuple[list[list[str]], list[list[str]]]:
    """(every circle counting TYPE_CHECKING imports, the ones spanning more than one folder)."""
    comps = cycles(module_graph(src), within, kinds=(TOP, FUNCTION, TYPE_ONLY))
    return comps, [c for c in comps if len({_folder(m, src) for m in c}) > 1]


def _ratchet(name: str, now: int, recorded: int) -> str | None:
    if now > recorded:
        return f"{name}: {now}, more than the {recorded} recorded in tests/unit/test_layering.py"
    if now < recorded:
        return f"{name}: {now}, down from {recorded}: record {now} in tests/unit/test_layering.py"
    return None


def test_function_local_imports_only_go_down():
    counts = function_local_import_counts()
    bad = [
        m
        for pkg in sorted(set(counts) | set(FUNCTION_LOCAL_IMPORTS))
        if (m := _ratchet(f"function-local imports in {pkg}", counts.get(pkg, 0), FUNCTION_LOCAL_IMPORTS.get(pkg, 0)))
    ]
    assert not bad, "\n".join(bad) + "\n(list them: python -m tests.unit.test_layering --graph PACKAGE)"


def test_modules_in_type_only_cycles_only_go_down():
    comps, across = type_only_cycles()
    bad = [
        m
        for m in (
            _ratchet(
                "modules in import circles counting TYPE_CHECKING imports",
                sum(map(len, comps)),
                TYPE_ONLY_CYCLE_MODULES,
            ),
            _ratchet(
                "... of them in circles across folders", sum(map(len, across)), TYPE_ONLY_CYCLE_MODULES_ACROSS_FOLDERS
            ),
        )
        if m
    ]
    assert not bad, "\n".join(bad) + "\n" + "\n".join(f"  {len(c)}: " + ", ".join(c) for c in comps)


def test_no_type_only_cycle_in_the_server_crosses_a_folder():
    _comps, across = type_only_cycles("natsd.server")
    assert not across, "\n".join(", ".join(c) for c in across)


# ---------------------------------------------------------------------------------------------
# No `Any` at a seam between packages
#
# The rule, mechanical: a parameter or an annotated attribute (TYPE_CHECKING declarations of a
# mixin included) typed ``Any`` / ``Any | None`` whose name -- leading underscores dropped, whole
# or its last ``_`` word -- is the name of a class of another natsd package (snake_case, whole or
# its last word: ``StreamStore`` -> ``stream_store``, ``store``; ``Timer`` -> ``timer``) and of no
# class of its own package, holds that package's object: type it by that package's class or
# protocol (``Timer``, ``StreamStore``, ``ServerContext``, ...). The clients (cli, spark) are
# exempt: they import nothing of the server side, their objects of such names are nats-py's.

ANY_SEAM_EXEMPT_PACKAGES = {"cli", "spark"}
# (path under natsd/, name) -> why it stays Any for now
ANY_AT_SEAMS_ALLOWED: dict[tuple[str, str], str] = {
    **{
        (path, name): "jetstream's seams are issue 24 item 2 (lane a24js): typed with the consumer's "
        "and the stream's protocols"
        for path, name in (
            ("jetstream/consumer/acks.py", "timer"),
            ("jetstream/consumer/delivery.py", "msgs"),
            ("jetstream/consumer/delivery.py", "kick_timer"),
            ("jetstream/consumer/durable.py", "timer"),
            ("jetstream/consumer/priority.py", "timer"),
            ("jetstream/consumer/pull.py", "timer"),
            ("jetstream/consumer/push.py", "hb_timer"),
            ("jetstream/manager.py", "_sync_timer"),
            ("jetstream/snapshot/restore.py", "_store"),
            ("jetstream/snapshot/transfer.py", "_ack_timer"),
            ("jetstream/snapshot/transfer.py", "_wait_timer"),
        )
    },
}


def _is_any(node: ast.expr | None) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return False
    if isinstance(node, ast.Name):
        return node.id == "Any"
    if isinstance(node, ast.Attribute):
        return node.attr == "Any"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        sides = (node.left, node.right)
        return any(_is_any(s) for s in sides) and all(
            _is_any(s) or (isinstance(s, ast.Constant) and s.value is None) for s in sides
        )
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Optional":
        return _is_any(node.slice)
    return False


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _words(name: str) -> set[str]:
    name = name.lstrip("_")
    return {name, name.rsplit("_", 1)[-1]}


def any_at_seams(src: Path = SRC) -> list[tuple[str, int, str, str]]:
    """(path, line, name, the other package) for every ``Any`` the rule above refuses."""
    trees = {path: ast.parse(path.read_text(), str(path)) for path in sorted(src.rglob("*.py"))}
    owners: dict[str, set[str]] = {}  # class-name word -> packages with such a class
    for path, tree in trees.items():
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                for w in _words(_snake(node.name)):
                    owners.setdefault(w, set()).add(_package_of(path, src))
    found = []
    for path, tree in trees.items():
        pkg = _package_of(path, src)
        if pkg in ANY_SEAM_EXEMPT_PACKAGES:
            continue
        typed: list[tuple[int, str]] = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                typed += [
                    (node.lineno, arg.arg) for arg in a.posonlyargs + a.args + a.kwonlyargs if _is_any(arg.annotation)
                ]
            elif isinstance(node, ast.AnnAssign) and _is_any(node.annotation):
                target = node.target
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                typed.append((node.lineno, name))
        for line, name in typed:
            pkgs = set().union(*(owners.get(w, set()) for w in _words(name)))
            if pkgs and pkg not in pkgs:
                found.append((str(path.relative_to(src)), line, name, ", ".join(sorted(pkgs))))
    return found


def test_no_any_at_seams_between_packages():
    found = any_at_seams()
    bad = [
        f"{path}:{line} {name}: Any (an object of natsd.{other}?)"
        for path, line, name, other in found
        if (path, name) not in ANY_AT_SEAMS_ALLOWED
    ]
    stale = sorted(set(ANY_AT_SEAMS_ALLOWED) - {(path, name) for path, _line, name, _o in found})
    assert not bad, "Any at a seam between packages (type it, or allow it with a reason):\n" + "\n".join(bad)
    assert not stale, f"allowed but no longer found (drop them from ANY_AT_SEAMS_ALLOWED): {stale}"


def test_the_any_rule_finds_a_seam(tmp_path):
    root = tmp_path / "natsd"
    for pkg in ("clock_pkg", "jetstream"):
        (root / pkg).mkdir(parents=True)
        (root / pkg / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "clock_pkg" / "timers.py").write_text("class Timer:\n    pass\nclass StreamStore:\n    pass\n")
    (root / "jetstream" / "c.py").write_text(
        "from typing import Any\n"
        "class Consumer:\n"
        "    kick_timer: Any\n"  # a Timer of another package: refused
        "    value: Any\n"  # no class of that name: fine
        "    def __init__(self, store: 'Any | None', consumer: Any, n: int) -> None:\n"  # store refused
        "        self.consumer = consumer\n"
    )  # Consumer is jetstream's own: fine
    assert [(p, n) for p, _l, n, _o in any_at_seams(root)] == [
        ("jetstream/c.py", "kick_timer"),
        ("jetstream/c.py", "store"),
    ]


if __name__ == "__main__":  # python -m tests.unit.test_layering --graph jetstream [--src DIR]
    import argparse

    ap = argparse.ArgumentParser(description="print the import graph of a natsd package")
    ap.add_argument("--graph", default="jetstream", metavar="PACKAGE")
    ap.add_argument("--src", type=Path, default=SRC, help="the natsd package directory (default: this tree)")
    args = ap.parse_args()
    src = args.src if args.src.name == "natsd" else args.src / "natsd"
    sys.stdout.write(render_graph(args.graph, src))
