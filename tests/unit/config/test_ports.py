"""Out-of-range ports: config values are located errors (the check and the start refuse them),
and every listener's nats-server [FTL] text for values set past the config (flags, embedding)."""

from __future__ import annotations

import pytest

from natsd.config.lexer import ConfigError
from natsd.config.options import ConfigErrors, ServerOptions, options_from_tree
from natsd.config.parser import parse
from natsd.config.ports import listen_problems, port_in_range

pytestmark = [pytest.mark.unit, pytest.mark.timeout(10)]


def errors_of(text: str) -> list[ConfigError]:
    with pytest.raises(ConfigError) as ei:
        options_from_tree(parse(text, "t.conf", env={}))
    e = ei.value
    return e.errors if isinstance(e, ConfigErrors) else [e]


@pytest.mark.parametrize(
    "text,where,port",
    [
        ("listen: 127.0.0.1:99999", "t.conf:1:1", 99999),
        ("port: 82000", "t.conf:1:1", 82000),
        ("port: -5", "t.conf:1:1", -5),
        ("http: 99999", "t.conf:1:1", 99999),
        ("http_port: 70000", "t.conf:1:1", 70000),
        ("monitor_port: 70000", "t.conf:1:1", 70000),
        ('https: "0.0.0.0:70000"', "t.conf:1:1", 70000),
        ("leafnodes {\n  port: 70000\n}", "t.conf:2:3", 70000),
        ('leafnodes {\n  listen: "[::1]:70000"\n}', "t.conf:2:3", 70000),
        ("websocket {\n  port: 70000\n  no_tls: true\n}", "t.conf:2:3", 70000),
        ("cluster {\n  port: 70000\n}", "t.conf:2:3", 70000),
        ("gateway {\n  listen: 0.0.0.0:70000\n}", "t.conf:2:3", 70000),
        ("mqtt {\n  port: 65536\n}", "t.conf:2:3", 65536),
    ],
)
def test_out_of_range_port_is_a_located_error(text, where, port):
    errs = [e for e in errors_of(text) if "invalid port" in str(e)]
    assert len(errs) == 1
    assert str(errs[0]) == (
        f"{where}: invalid port {port} (ports are 0-65535, -1 for a random port): "
        f"listen tcp: address {port}: invalid port"
    )


@pytest.mark.parametrize(
    "text", ["port: -1", "port: 0", "port: 65535", "listen: 127.0.0.1:4222", "leafnodes { port: -1 }", "http: 8222"]
)
def test_ports_in_range_pass(text):
    options_from_tree(parse(text, "t.conf", env={}))


def test_range_edges():
    assert port_in_range(-1) and port_in_range(0) and port_in_range(65535)
    assert not port_in_range(-2) and not port_in_range(65536)


def test_listen_problems_in_nats_server_wording():
    o = ServerOptions()
    assert listen_problems(o) == []
    o.port, o.http_port, o.websocket.port = 82000, 99999, 70000
    assert listen_problems(o) == [
        'Error listening on port: 0.0.0.0:82000, "listen tcp: address 82000: invalid port"',
        "Can't start monitoring: can't listen to the monitor port: listen tcp: address 99999: invalid port",
        "Unable to listen for websocket connections: listen tcp: address 70000: invalid port",
    ]
    o = options_from_tree(parse("leafnodes { port: 7422 }", "t.conf", env={}))
    o.host, o.leafnodes.port = "127.0.0.1", 70000
    assert listen_problems(o) == ["Error listening on leafnode port: 70000 - listen tcp: address 70000: invalid port"]


def test_a_flag_replaces_an_out_of_range_config_port(tmp_path):
    from natsd.config.flags import build_options

    conf = tmp_path / "p.conf"
    conf.write_text("listen: 127.0.0.1:99999\nhttp: 70000\nleafnodes { port: 70001 }\n")
    with pytest.raises(ConfigErrors) as ei:
        build_options(["-c", str(conf), "-p", "4333", "-m", "8333"])
    # the flags replace the client and monitoring ports; the leafnodes one has no flag
    assert [e.line for e in ei.value.errors] == [3]
    conf.write_text("listen: 127.0.0.1:99999\nhttp: 70000\n")
    o = build_options(["-c", str(conf), "-p", "4333", "-m", "8333"])
    assert (o.host, o.port, o.http_port) == ("127.0.0.1", 4333, 8333)
    with pytest.raises(ConfigErrors):
        build_options(["-c", str(conf), "-p", "4333"])  # http: 70000 stays
