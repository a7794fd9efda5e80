"""natsd._compiled: a compiled build is used only when it matches the sources, else pure Python.

These run in both passes of ``make test``: against pure Python, and (``make test-compiled``) with
``NATSD_COMPILED`` naming a fresh build, where the hot modules must really come from it.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

from natsd import _compiled

EXT = EXTENSION_SUFFIXES[0]


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def fake_build(tmp_path: Path) -> tuple[Path, Path]:
    """A source root with one module and a build directory whose manifest matches it."""
    root = tmp_path / "root"
    (root / "natsd").mkdir(parents=True)
    src = root / "natsd" / "hot.py"
    src.write_text("X = 1\n")
    build = tmp_path / "build"
    build.mkdir()
    (build / ("natsd.hot" + EXT)).write_bytes(b"not really an extension")
    (build / ("abc__mypyc" + EXT)).write_bytes(b"")
    manifest = {
        "format": _compiled.FORMAT,
        "cache_tag": sys.implementation.cache_tag,
        "ext_suffix": EXT,
        "modules": {"natsd.hot": "natsd.hot" + EXT},
        "shared": {"abc__mypyc": "abc__mypyc" + EXT},
        "sources": {"natsd/hot.py": _sha(src)},
    }
    (build / _compiled.MANIFEST).write_text(json.dumps(manifest))
    return root, build


def test_matching_build_is_accepted(tmp_path):
    root, build = fake_build(tmp_path)
    files, reason = _compiled.check(build, root)
    assert reason == ""
    assert files == {"natsd.hot": str(build / ("natsd.hot" + EXT)), "abc__mypyc": str(build / ("abc__mypyc" + EXT))}


def test_edited_source_disables_the_build(tmp_path):
    root, build = fake_build(tmp_path)
    (root / "natsd" / "hot.py").write_text("X = 2\n")
    files, reason = _compiled.check(build, root)
    assert files is None
    assert "natsd/hot.py changed since the build" in reason


def test_missing_source_extension_or_manifest_disables_the_build(tmp_path):
    root, build = fake_build(tmp_path)
    (build / ("natsd.hot" + EXT)).unlink()
    assert _compiled.check(build, root)[0] is None
    root, build = fake_build(tmp_path / "b")
    (root / "natsd" / "hot.py").unlink()
    assert "missing" in _compiled.check(build, root)[1]
    assert "no manifest.json" in _compiled.check(tmp_path / "nowhere", root)[1]


def test_other_interpreter_or_format_disables_the_build(tmp_path):
    root, build = fake_build(tmp_path)
    m = json.loads((build / _compiled.MANIFEST).read_text())
    (build / _compiled.MANIFEST).write_text(json.dumps({**m, "cache_tag": "cpython-27"}))
    assert "rebuild" in _compiled.check(build, root)[1]
    (build / _compiled.MANIFEST).write_text(json.dumps({**m, "format": _compiled.FORMAT + 1}))
    assert _compiled.check(build, root)[0] is None
    (build / _compiled.MANIFEST).write_text("{")
    assert "unreadable" in _compiled.check(build, root)[1]


def test_not_requested_means_pure_python():
    assert _compiled.install({}) is _compiled.STATUS["active"]
    assert _compiled.install({_compiled.ENV: "0"}) is _compiled.STATUS["active"]


def test_stale_build_falls_back_to_the_sources_in_a_fresh_interpreter(tmp_path):
    # A build directory that claims parser.py had other contents: natsd must import the .py.
    root = _compiled.source_root()
    build = tmp_path / "build"
    build.mkdir()
    (build / ("natsd.protocol.parser" + EXT)).write_bytes(b"garbage: must never be loaded")
    manifest = {
        "format": _compiled.FORMAT,
        "cache_tag": sys.implementation.cache_tag,
        "ext_suffix": EXT,
        "modules": {"natsd.protocol.parser": "natsd.protocol.parser" + EXT},
        "shared": {},
        "sources": {"natsd/protocol/parser.py": "0" * 64},
    }
    (build / _compiled.MANIFEST).write_text(json.dumps(manifest))
    env = {**os.environ, _compiled.ENV: str(build), "PYTHONPATH": str(root)}
    code = (
        "import natsd._compiled as c, natsd.protocol.parser as p; "
        "print(c.STATUS['active'], c.STATUS['reason'], p.__file__, sep='|')"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    active, reason, file = out.stdout.strip().split("|")
    assert active == "False"
    assert "natsd/protocol/parser.py changed since the build" in reason
    assert file == str(root / "natsd" / "protocol" / "parser.py")


def test_status_line_and_varz_field_follow_the_status(monkeypatch):
    import logging

    monkeypatch.setitem(_compiled.STATUS, "requested", True)
    monkeypatch.setitem(_compiled.STATUS, "active", False)
    monkeypatch.setitem(_compiled.STATUS, "reason", "natsd/protocol/parser.py changed since the build")
    level, text = _compiled.status_line()
    assert level == logging.WARNING and "running pure Python" in text and "parser.py changed" in text
    monkeypatch.setitem(_compiled.STATUS, "active", True)
    monkeypatch.setitem(_compiled.STATUS, "modules", ["natsd.protocol.parser"])
    assert _compiled.status_line()[0] == logging.INFO


def test_hot_modules_come_from_where_the_status_says():
    """In the compiled pass every module of the build is its extension; otherwise every one is
    its .py file (a stray extension in src/ would fail here)."""
    for name in _compiled.MODULES:
        mod = importlib.import_module(name)
        if _compiled.STATUS["active"]:
            # (mypyc names __file__ after the package layout under the build directory)
            assert mod.__file__.endswith(EXT) and mod.__file__.startswith(_compiled.STATUS["directory"] + os.sep)
            assert mod.__spec__.origin.endswith(EXT) and not mod.__spec__.origin.startswith(
                str(_compiled.source_root())
            )
        else:
            assert mod.__file__.endswith(".py"), mod.__file__


@pytest.mark.skipif(not _compiled.STATUS["active"], reason="needs NATSD_COMPILED (make test-compiled)")
def test_the_real_build_rejects_an_edited_copy_of_its_sources(tmp_path):
    root = tmp_path / "root"
    shutil.copytree(_compiled.source_root() / "natsd", root / "natsd")
    build = Path(_compiled.STATUS["directory"])
    # unchanged sources: only refused because this interpreter already imported the modules
    assert "was imported before the build could be installed" in _compiled.check(build, root)[1]
    p = root / "natsd" / "protocol" / "parser.py"
    p.write_text(p.read_text() + "\n# edited\n")
    files, reason = _compiled.check(build, root)
    assert files is None and "natsd/protocol/parser.py changed since the build" in reason
