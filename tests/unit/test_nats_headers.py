"""The ``Nats-*`` header names are spelled once (natsd/nats_headers.py): the table holds each
name once, and no other module of src/natsd defines a constant holding a ``Nats-*`` literal."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from natsd import nats_headers

pytestmark = pytest.mark.unit

SRC = Path(__file__).resolve().parents[2] / "src" / "natsd"


def test_the_table_holds_each_name_once_as_nats_server_spells_it() -> None:
    names = {k: getattr(nats_headers, k) for k in nats_headers.__all__}
    # (traceparent: the W3C trace context header message tracing samples, spelled as the W3C does)
    assert all(isinstance(v, bytes) and (v.startswith(b"Nats-") or v == b"traceparent") for v in names.values())
    assert len(set(names.values())) == len(names)
    assert b":" not in b"".join(names.values()) and b" " not in b"".join(names.values())
    # a few names exactly as nats-server's headers (server/stream.go, jetstream_versioning.go)
    assert nats_headers.MSG_ID == b"Nats-Msg-Id"
    assert nats_headers.EXPECTED_LAST_SUBJ_SEQ_SUBJ == b"Nats-Expected-Last-Subject-Sequence-Subject"
    assert nats_headers.REQUIRED_API_LEVEL == b"Nats-Required-Api-Level"
    assert nats_headers.TIME_STAMP == b"Nats-Time-Stamp"


def _nats_literal(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (str, bytes))
        and (node.value.startswith("Nats-") if isinstance(node.value, str) else node.value.startswith(b"Nats-"))
    )


def test_no_module_defines_its_own_header_name_constant() -> None:
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "nats_headers.py" and path.parent == SRC:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in tree.body:  # module-level constants
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                vals = node.value.elts if isinstance(node.value, (ast.Tuple, ast.List)) else [node.value]
                if any(_nats_literal(v) for v in vals):
                    bad.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not bad, "Nats-* names belong in natsd/nats_headers.py:\n" + "\n".join(bad)
