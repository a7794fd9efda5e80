"""natsctl helpers for issue 16: payload rendering, subject checks, ack-reply metadata, event lines, contexts."""

from __future__ import annotations

import base64

import pytest

from natsd.cli.common import UsageError, check_subject, payload_json, text_of


def test_payload_json_is_text_when_utf8_else_base64():
    assert payload_json(b"hello \xc3\xa9") == {"data": "hello é"}
    assert payload_json(None) == {"data": ""}
    d = payload_json(b"\xff\x00")
    assert d["encoding"] == "base64" and base64.b64decode(d["data"]) == b"\xff\x00"
    assert text_of(b"\xff") == "\ufffd"


@pytest.mark.parametrize(
    "subject, wildcards, ok",
    [
        ("a.b", False, True),
        ("a.*", True, True),
        ("a.>", True, True),
        ("a.*", False, False),
        ("a..b", False, False),
        ("", False, False),
        ("a b", True, False),
        (".a", True, False),
        ("a.>.b", True, False),
        ("a.b*", True, False),
        ("a\r\n", False, False),
    ],
)
def test_check_subject(subject, wildcards, ok):
    if ok:
        assert check_subject(subject, wildcards=wildcards) == subject
    else:
        with pytest.raises(UsageError, match=r"invalid subject"):
            check_subject(subject, wildcards=wildcards)


def test_reply_meta_v1_and_v2_ack_subjects():
    from natsd.cli.views import _reply_meta

    assert _reply_meta("$JS.ACK.ORDERS.C.1.42.7.1700000000000000000.3")["stream_seq"] == 42
    assert _reply_meta("$JS.ACK.hub.ACCHASH.ORDERS.C.1.42.7.1700000000000000000.3.tok")["stream_seq"] == 42
    assert _reply_meta("_INBOX.x") == {} and _reply_meta(None) == {}


def test_event_line_names_what_it_is_about():
    from natsd.cli.views import event_line

    line = event_line(
        "$JS.EVENT.ADVISORY.STREAM.CREATED.X",
        {
            "type": "io.nats.jetstream.advisory.v1.stream_action",
            "timestamp": "2026-11-24T06:00:01.5Z",
            "stream": "X",
            "action": "create",
            "client": {"user": "bob"},
        },
    )
    assert line == "[06:00:01] stream_action stream=X action=create user=bob"


def test_context_files_live_where_natscli_keeps_them(tmp_path, monkeypatch):
    from natsd.cli import contexts

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert contexts.config_dir() == tmp_path / "nats"
    assert contexts.context_path("a.b") == tmp_path / "nats" / "context" / "a.b.json"
    for bad in ("", "../x", "a/b"):
        with pytest.raises(UsageError):
            contexts.context_path(bad)
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert contexts.config_dir() == tmp_path / "home" / ".config" / "nats"
    assert contexts.active(None) == ("", {})
