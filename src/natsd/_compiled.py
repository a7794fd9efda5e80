"""Optional compiled (mypyc) builds of the hottest modules, with their sources as the fallback.

natsd is pure Python; ``scripts/build_compiled.py`` (``make compiled``) compiles the modules in
:data:`MODULES` with mypyc into a directory of its own (``build/compiled`` by default), never next
to the sources: Python prefers an extension module over the ``.py`` beside it, so a stale ``.so``
in ``src/`` would silently run old code after an edit. A server uses the build only when asked,
``NATSD_COMPILED=<directory>`` in its environment, and only when the build still matches the
sources it was made from:

* ``<directory>/manifest.json`` (written last by the build, format :data:`FORMAT`) records the
  interpreter's ``cache_tag`` and extension suffix, the compiled modules with their files, mypyc's
  shared runtime module, and the SHA-256 of every source the build depended on (the compiled
  modules, the ``natsd`` modules they import directly, and this file);
* :func:`install` (called by ``natsd/__init__.py``, before any of them can be imported) hashes
  those sources as they are now; if all match, it puts a finder first on ``sys.meta_path`` that
  loads exactly these modules from the build. Any difference (an edited source, another Python,
  a missing file, a module already imported) uses none of them: compiled modules call each other
  natively, so a mix of compiled and edited pure modules is never run. The reason is logged at
  debug level and kept in :data:`STATUS`, which the server logs at startup and shows in ``/varz``
  (``natsd_compiled``).

What the compiled code changes (why the test suite runs against the build too, ``make test``):
native classes have no ``__dict__`` and ignore monkeypatching of their methods, calls between
functions of compiled modules ignore module attributes patched at run time, and a variable mypy
narrowed to a fixed-shape tuple is unboxed, so ``is`` on tuples it held compares fresh objects
(``natsd.protocol.parser`` declares such variables ``Any`` for that reason). Declared types are
checked at run time: a value of the wrong type raises ``TypeError`` where pure Python would run on.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, Any, Sequence

# hashlib, json, pathlib and importlib's machinery are imported only when a build is asked for: this module
# is imported by every `import natsd`, and importlib.abc alone pulls in importlib.resources (a
# visible share of `natsd`'s start-up, issue 26).
if TYPE_CHECKING:  # pragma: no cover
    from importlib.machinery import ModuleSpec
    from pathlib import Path

__all__ = ["ENV", "MODULES", "FORMAT", "MANIFEST", "STATUS", "install", "check", "source_root", "status_line"]

#: The environment variable naming the build directory.
ENV = "NATSD_COMPILED"
#: Version of the manifest's layout (bumped when it changes: older builds are then ignored).
FORMAT = 1
MANIFEST = "manifest.json"

#: The modules the build compiles: the per-message path of core NATS (parse, match, route, frame).
#: They compile without changes beyond annotations; see bench/bench_compiled.py for what each pays.
MODULES: tuple[str, ...] = (
    "natsd.protocol.events",
    "natsd.protocol.encoder",
    "natsd.protocol.parser",
    "natsd.subjects.tokens",
    "natsd.subjects.sublist",
    "natsd.server.router",
)

log = logging.getLogger("natsd")

#: What :func:`install` decided: ``requested`` (the variable was set), ``active`` (the finder is
#: installed), ``directory``, ``modules`` (loaded from the build when active) and ``reason``.
STATUS: dict[str, Any] = {
    "requested": False,
    "active": False,
    "directory": "",
    "modules": [],
    "reason": f"{ENV} not set",
}


def source_root() -> Path:
    """The directory holding the ``natsd`` package (sources are named relative to it)."""
    from pathlib import Path  # (with urllib.parse) only when a build is asked for: issue 26's start-up time

    return Path(__file__).resolve().parent.parent


def sha256_file(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


class _Finder:  # a sys.meta_path finder (the protocol is find_spec; no importlib.abc base needed)
    """Loads exactly the modules of a verified build from their extension files."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: object = None) -> ModuleSpec | None:
        file = self.files.get(fullname)
        if file is None:
            return None
        from importlib.machinery import ExtensionFileLoader
        from importlib.util import spec_from_file_location

        return spec_from_file_location(fullname, file, loader=ExtensionFileLoader(fullname, file))


def check(directory: Path, root: Path | None = None) -> tuple[dict[str, str] | None, str]:
    """``(files, reason)``: the module name -> extension file map of the build in ``directory``
    when it matches the sources under ``root`` (default :func:`source_root`) and this interpreter,
    else ``(None, why not)``."""
    import json
    from importlib.machinery import EXTENSION_SUFFIXES

    root = source_root() if root is None else root
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
    except FileNotFoundError:
        return None, f"no {MANIFEST} in {directory} (run `make compiled`)"
    except (OSError, ValueError) as e:
        return None, f"unreadable {directory / MANIFEST}: {e}"
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return None, f"{directory / MANIFEST} is not a format {FORMAT} manifest (rebuild)"
    if (
        manifest.get("cache_tag") != sys.implementation.cache_tag
        or manifest.get("ext_suffix") not in EXTENSION_SUFFIXES
    ):
        return None, (
            f"built for {manifest.get('cache_tag')} {manifest.get('ext_suffix')}, this is "
            f"{sys.implementation.cache_tag} (rebuild)"
        )
    sources = manifest.get("sources") or {}
    for rel, digest in sorted(sources.items()):
        try:
            now = sha256_file(root / rel)
        except OSError:
            return None, f"{rel} (a source of the build) is missing"
        if now != digest:
            return None, f"{rel} changed since the build (rebuild with `make compiled`)"
    files: dict[str, str] = {}
    modules = manifest.get("modules") or {}
    shared = manifest.get("shared") or {}
    for name, rel in [*modules.items(), *shared.items()]:
        path = directory / rel
        if not path.is_file():
            return None, f"{path} is missing"
        files[name] = str(path)
    if not modules:
        return None, f"{directory / MANIFEST} lists no modules"
    for name in modules:
        if name in sys.modules:
            return None, f"{name} was imported before the build could be installed"
    return files, ""


def install(environ: dict[str, str] | None = None) -> bool:
    """Use the build named by ``$NATSD_COMPILED`` when it matches the sources; see the module
    docstring. Returns whether compiled modules are active; idempotent."""
    if STATUS["active"]:
        return True
    env = os.environ if environ is None else environ
    where = env.get(ENV, "")
    if not where or where == "0":
        return False
    from pathlib import Path  # (with urllib.parse) only when a build is asked for: issue 26's start-up time

    directory = Path(where).resolve()
    STATUS.update(requested=True, directory=str(directory))
    files, reason = check(directory)
    if files is None:
        STATUS["reason"] = reason
        log.debug("compiled modules not used: %s", reason)
        return False
    sys.meta_path.insert(0, _Finder(files))
    modules = [m for m in files if m.startswith("natsd.")]
    STATUS.update(active=True, modules=modules, reason="")
    log.debug("compiled modules from %s: %s", directory, ", ".join(modules))
    return True


def status_line() -> tuple[int, str]:
    """The startup log line (level, text) describing :data:`STATUS`."""
    if STATUS["active"]:
        return logging.INFO, f"Compiled modules active ({len(STATUS['modules'])} from {STATUS['directory']})"
    if STATUS["requested"]:
        return logging.WARNING, f"Compiled modules not used, running pure Python: {STATUS['reason']}"
    return logging.DEBUG, "Compiled modules off (pure Python)"
