"""Markers for tests that look inside the pure-Python modules (``make test-compiled`` runs some of
the same files against the mypyc build, natsd/_compiled.py)."""

from __future__ import annotations

import pytest

from natsd import _compiled

#: A test that counts calls by replacing a module's function or subclassing one of its classes: the
#: compiled build binds its calls at build time and refuses Python subclasses of compiled classes,
#: so such a test measures nothing there. The behaviour it guards is tested by the other tests of
#: its file, which run against both builds.
python_only = pytest.mark.skipif(
    _compiled.STATUS["active"], reason="instruments the pure-Python modules (the compiled build is in use)"
)
