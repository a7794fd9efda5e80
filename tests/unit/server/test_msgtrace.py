"""Message tracing's header reading and account msg_trace config (natsd.server.msgtrace, issue 29)."""

from __future__ import annotations

import pytest

from natsd.config.options import ConfigErrors, options_from_tree
from natsd.config.parser import parse
from natsd.server.msgtrace import header_map

pytestmark = [pytest.mark.unit, pytest.mark.timeout(10)]


def test_trace_dest_lifts_all_headers_keeping_their_case():
    hdr = b"NATS/1.0\r\nNats-Trace-Dest: tr\r\nX-A: 1\r\nX-A: 2\r\nEmpty:\r\n\r\n"
    assert header_map(hdr) == ({"Nats-Trace-Dest": ["tr"], "X-A": ["1", "2"]}, False)


@pytest.mark.parametrize(
    ("value", "sampled"),
    [
        ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", True),
        ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", False),
        ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1", False),
        ("garbage", False),
    ],
)
def test_traceparent_only_when_sampled(value, sampled):
    hdrs, external = header_map(b"NATS/1.0\r\nTraceParent: " + value.encode() + b"\r\n\r\n")
    assert bool(hdrs) is sampled and external is sampled


def test_disabled_destination_and_no_trace_headers():
    assert header_map(b"NATS/1.0\r\nNats-Trace-Dest: trace disabled\r\n\r\n") == ({}, False)
    assert header_map(b"NATS/1.0\r\nX: 1\r\n\r\n") == ({}, False)
    assert header_map(b"nonsense") == ({}, False)


def test_account_msg_trace_config():
    o = options_from_tree(
        parse('accounts { A { msg_trace { dest: "t.a", sampling: "25%" } }, B { trace_dest: "t.b" } }')
    )
    a, b = o.accounts
    assert (a.trace_dest, a.trace_sampling) == ("t.a", 25)
    assert (b.trace_dest, b.trace_sampling) == ("t.b", 100)  # a destination alone samples everything
    o = options_from_tree(parse("accounts { A { msg_trace { sampling: 10 } } }"))
    assert o.accounts[0].trace_sampling == 0
    assert any("sampling ignored since no destination was set" in w for w in o.config_warnings)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{ dest: "a.*" }', 'Trace destination "a.*" is not valid'),
        ('{ dest: "a", sampling: 0 }', "Ttrace destination sampling value 0 is invalid, needs to be [1..100]"),
        ('{ dest: "a", sampling: "x%" }', 'Invalid trace destination sampling value "x%"'),
        ('{ dest: "a", bogus: 1 }', 'Unknown field "bogus" parsing account message trace map/struct "msg_trace"'),
        ("5", 'Expected account message trace "msg_trace" to be a string or a map/struct, got int'),
    ],
)
def test_account_msg_trace_errors(text, message):
    with pytest.raises(ConfigErrors) as e:
        options_from_tree(parse(f"accounts {{ A {{ msg_trace: {text} }} }}"))
    assert [err.message for err in e.value.errors] == [message]
