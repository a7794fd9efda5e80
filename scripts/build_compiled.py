"""Build the opt-in compiled (mypyc) modules of natsd into a directory of their own.

    .venv/bin/python scripts/build_compiled.py [--src src] [--out build/compiled] [MODULE ...]
    NATSD_COMPILED=build/compiled natsd ...        # use it (see natsd/_compiled.py)

The sources are copied to a temporary directory and compiled there (mypyc writes its extension
modules next to the sources it compiles; they must never land in ``src/``, where Python would
prefer them to the ``.py`` files and silently run stale code after an edit). The extension files
and ``manifest.json`` (format: ``natsd._compiled.FORMAT``; written last, so a half-finished build is
never used) then replace ``--out`` as a whole. The manifest records the SHA-256 of every source the
build depends on: the compiled modules, the ``natsd`` modules they import directly (including
imports under ``TYPE_CHECKING``: mypyc compiled against their types) and ``natsd/_compiled.py``.
At import, natsd uses the build only when all of them still match.

Needs mypy (which ships mypyc; the ``test`` extra) and a C compiler with the Python headers.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def module_file(root: Path, name: str) -> Path:
    p = root.joinpath(*name.split("."))
    return p / "__init__.py" if p.is_dir() else p.with_suffix(".py")


def natsd_imports(root: Path, name: str) -> set[str]:
    """The ``natsd`` modules ``name`` imports (any import statement in the file), as module names."""
    path = module_file(root, name)
    tree = ast.parse(path.read_text(), str(path))
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)  # `from pkg import module`
    out = set()
    for m in found:
        if m == "natsd" or m.startswith("natsd."):
            # a name imported from a module is not a module: keep only what exists as a file
            if module_file(root, m).is_file():
                out.add(m)
    return out


def dependencies(root: Path, modules: list[str]) -> list[str]:
    """``modules`` and the natsd modules they import directly: what mypyc compiled them against
    (their signatures, their constants). Not transitively: a change further away cannot make the
    compiled code run stale code (only the compiled modules' own code is compiled), and following
    package ``__init__``s would pull in the whole server, so that any edit anywhere would disable
    the build. CI builds afresh and runs the tests against it, which checks the rest."""
    out = set(modules)
    for m in modules:
        out |= natsd_imports(root, m)
    return sorted(out)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(src: Path, out: Path, modules: list[str], verbose: bool = False) -> dict:
    ext = sysconfig.get_config_var("EXT_SUFFIX")
    deps = dependencies(src, modules + ["natsd._compiled"])
    with tempfile.TemporaryDirectory(prefix="natsd-mypyc-") as tmp:
        work = Path(tmp)
        shutil.copytree(src / "natsd", work / "natsd",
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd", "*.c"))
        # Hash what is compiled (the copy), not what src/ may have become meanwhile.
        sources = {str(module_file(work, m).relative_to(work)): sha256(module_file(work, m)) for m in deps}
        # The project's mypy settings (pyproject.toml: per-module strictness, untyped third-party
        # modules), not mypy's defaults: the copy has no config of its own. (Its note on override
        # sections no module used is off: mypyc fails on any message.)
        cmd = [sys.executable, "-m", "mypyc", "--config-file", str(ROOT / "pyproject.toml"), "--no-warn-unused-configs",
               *(str(module_file(work, m).relative_to(work)) for m in modules)]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=work, capture_output=not verbose, text=True)
        if proc.returncode != 0:
            sys.stderr.write((proc.stdout or "")[-6000:] + (proc.stderr or "")[-4000:])
            raise SystemExit(f"mypyc failed (exit {proc.returncode})")
        staging = out.with_name(out.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        files = {}
        for m in modules:
            so = module_file(work, m).with_suffix("").with_suffix(ext)
            if not so.is_file():
                raise SystemExit(f"mypyc produced no {so.name} for {m}")
            shutil.copy2(so, staging / (m + ext))
            files[m] = m + ext
        shared = {}
        for so in work.glob("*__mypyc" + ext):  # mypyc's shared runtime of a multi-module build
            name = so.name[:-len(ext)]
            shutil.copy2(so, staging / so.name)
            shared[name] = so.name
        from mypy.version import __version__ as mypy_version
        manifest = {
            "format": 1,  # natsd._compiled.FORMAT
            "cache_tag": sys.implementation.cache_tag,
            "ext_suffix": ext,
            "compiler": f"mypyc {mypy_version}",
            "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "build_seconds": round(time.monotonic() - t0, 1),
            "modules": files,
            "shared": shared,
            "sources": sources,
        }
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        shutil.rmtree(out, ignore_errors=True)
        os.replace(staging, out)
    return manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("modules", nargs="*", help="modules to compile (default: natsd._compiled.MODULES)")
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="the tree holding the natsd package")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "compiled", help="build directory")
    ap.add_argument("-v", "--verbose", action="store_true", help="show mypyc's output")
    a = ap.parse_args(argv)
    src = a.src.resolve()
    out = a.out.resolve()
    if src == out or src in out.parents:
        ap.error("--out must be outside the source tree (an extension there would shadow the sources)")
    modules = a.modules
    if not modules:
        # MODULES is data in the package; read it without importing natsd (its __init__ would
        # try to install a build).
        tree = ast.parse((src / "natsd" / "_compiled.py").read_text())
        for node in tree.body:
            if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "MODULES":
                modules = list(ast.literal_eval(node.value))
    manifest = build(src, out, modules, a.verbose)
    print(f"compiled {len(manifest['modules'])} modules into {out} in {manifest['build_seconds']} s "
          f"({manifest['compiler']}); use them with NATSD_COMPILED={out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
