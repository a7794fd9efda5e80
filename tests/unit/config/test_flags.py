"""nats-server's command line: every flag form, overrides of file values, reload."""

from __future__ import annotations

import pytest

from natsd.config import reload_options
from natsd.config.flags import FlagError, build_options, parse_flags, usage, version_line
from natsd.config.lexer import ConfigError
from natsd.config.options import ServerOptions


def build(*argv):
    return build_options(list(argv))


@pytest.mark.parametrize(
    "argv",
    [
        ["-p", "4333"],
        ["--p", "4333"],
        ["-port", "4333"],
        ["--port", "4333"],
        ["-p=4333"],
        ["--port=4333"],
    ],
)
def test_port_forms(argv):
    assert build(*argv).port == 4333


def test_port_minus_one_is_a_value_not_a_flag():
    assert build("-p", "-1").port == -1
    assert build("-m", "-1").http_port == -1


@pytest.mark.parametrize(
    "argv,attr,value",
    [
        (["-a", "127.0.0.1"], "host", "127.0.0.1"),
        (["--addr", "::1"], "host", "::1"),
        (["-net=10.0.0.1"], "host", "10.0.0.1"),
        (["-m", "8222"], "http_port", 8222),
        (["--http_port=8223"], "http_port", 8223),
        (["-n", "srv"], "server_name", "srv"),
        (["--name", "srv2"], "server_name", "srv2"),
        (["--server_name", "srv3"], "server_name", "srv3"),
        (["-D"], "debug", True),
        (["--debug"], "debug", True),
        (["-V"], "trace", True),
        (["--trace"], "trace", True),
        (["-VV"], "trace", True),
        (["-l", "x.log"], "log_file", "x.log"),
        (["--log=y.log"], "log_file", "y.log"),
        (["-P", "n.pid"], "pid_file", "n.pid"),
        (["--pid", "m.pid"], "pid_file", "m.pid"),
        (["--ports_file_dir", "/tmp/pf"], "ports_file_dir", "/tmp/pf"),
        (["-ports_file_dir=/tmp/pg"], "ports_file_dir", "/tmp/pg"),
        (["--user", "u"], "username", "u"),
        (["--pass", "pw"], "password", "pw"),
        (["--auth", "tok"], "authorization", "tok"),
        (["-T=false"], "logtime", False),
        (["--logtime=0"], "logtime", False),
    ],
)
def test_flags(argv, attr, value):
    assert getattr(build(*argv), attr) == value


def test_debug_and_trace_combined():
    o = build("-DV")
    assert o.debug and o.trace
    o = build("-DVV")
    assert o.debug and o.trace
    o = build("-DV=false")
    assert not o.debug and not o.trace


@pytest.mark.parametrize("argv", [["-js"], ["--js"], ["-jetstream"], ["--jetstream"], ["-js=true"]])
def test_jetstream_flag(argv):
    assert build(*argv).jetstream.enabled


@pytest.mark.parametrize("argv", [["-sd", "/d"], ["-sd=/d"], ["--sd=/d"], ["--store_dir", "/d"], ["-store_dir=/d"]])
def test_store_dir_forms(argv):
    assert build(*argv).jetstream.store_dir == "/d"


def test_make_run_command_line():
    o = build("-p", "4222", "-m", "8222", "-js", "-sd", "./data")
    assert (o.port, o.http_port, o.jetstream.enabled, o.jetstream.store_dir) == (4222, 8222, True, "./data")


def test_controls():
    f = parse_flags(["-c", "x.conf", "-t"])
    assert f.config_file == "x.conf" and f.check_config
    assert parse_flags(["--config=y.conf"]).config_file == "y.conf"
    assert parse_flags(["-h"]).show_help and parse_flags(["--help"]).show_help
    assert parse_flags(["-v"]).show_version and parse_flags(["--version"]).show_version
    assert parse_flags(["version"]).show_version and parse_flags(["HELP"]).show_help
    assert parse_flags(["-sl", "reload=1"]).signal == "reload=1"


@pytest.mark.parametrize(
    "argv,msg",
    [
        (["-bogus"], "flag provided but not defined: -bogus"),
        (["--bogus=1"], "flag provided but not defined: -bogus"),
        (["-p"], "flag needs an argument: -p"),
        (["-p", "abc"], 'invalid value "abc" for flag -p: parse error'),
        (["-js=maybe"], 'invalid boolean value "maybe" for -js: parse error'),
        (["---p", "1"], "bad flag syntax: ---p"),
        (["-=x"], "bad flag syntax: -=x"),
        (["-p", "1", "extra"], 'unrecognized command: "extra"'),
        (["--help_tls"], "TLS help is not supported by natsd"),
        (["--routes", "nats://x:1"], "clustering is not supported by natsd"),
    ],
)
def test_flag_errors(argv, msg):
    with pytest.raises(FlagError) as ei:
        parse_flags(argv)
    assert msg in str(ei.value)


def test_parsing_stops_at_double_dash_and_non_flags():
    f = parse_flags(["-p", "1", "--", "version"])
    assert f.show_version and f.values == [("port", 1)]


def test_ignored_compat_flags_warn():
    o = build("--client_advertise", "x:1", "-p", "5", "--profile", "6060")
    assert o.port == 5
    assert o.config_warnings == []
    assert len(o.config_notices) == 2 and all("not supported" in w for w in o.config_notices)


def test_log_destination_flags():
    o = build(
        "--logtime_utc", "-s", "-r", "udp://127.0.0.1:514", "--log_size_limit", "1000", "--max_traced_msg_len", "8"
    )
    assert (o.logtime_utc, o.syslog, o.remote_syslog) == (True, True, "udp://127.0.0.1:514")
    assert (o.log_size_limit, o.max_traced_msg_len) == (1000, 8)
    assert o.config_notices == []


def test_flags_override_file(tmp_path):
    conf = tmp_path / "s.conf"
    conf.write_text(
        'port: 1111\nserver_name: file\ndebug: false\njetstream { store_dir: "/file" }\n'
        "authorization { user: fu, password: fp }\nhttp: 8111\n"
    )
    o = build("-c", str(conf), "-p", "2222", "-D", "-sd", "/flag")
    assert o.port == 2222 and o.debug and o.jetstream.store_dir == "/flag"
    assert o.jetstream.enabled  # from the file's jetstream block
    assert o.server_name == "file" and o.http_port == 8111  # not overridden
    assert (o.username, o.password) == ("fu", "fp")
    assert o.config_file == str(conf)
    # Flag order does not matter: -c may come last.
    o = build("-p", "2222", "--config", str(conf))
    assert o.port == 2222 and o.server_name == "file"
    o = build("--user", "x", "-c", str(conf))
    assert o.username == "x" and o.password == "fp"


def test_bad_config_propagates_located_error(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("port: 1\nmax_payload: nope\n")
    with pytest.raises(ConfigError) as ei:
        build("-c", str(conf))
    assert str(ei.value).startswith(f"{conf}:2:1: ")


def test_reload_rereads_file_and_reapplies_flags(tmp_path):
    conf = tmp_path / "r.conf"
    conf.write_text("port: 1\nauthorization { user: a, password: old }\nmax_payload: 1KB\n")
    o = build("-c", str(conf), "-p", "4333", "--pass", "flagpw")
    assert o.cli_flags == ["-c", str(conf), "-p", "4333", "--pass", "flagpw"]
    assert (o.port, o.password, o.max_payload) == (4333, "flagpw", 1024)
    conf.write_text("port: 2\nauthorization { user: b, password: new }\nmax_payload: 2KB\n")
    n = reload_options(o)
    assert n is not o
    assert (n.port, n.username, n.password, n.max_payload) == (4333, "b", "flagpw", 2048)
    assert n.cli_flags == o.cli_flags
    conf.write_text("port: [\n")
    with pytest.raises(ConfigError):
        reload_options(o)


def test_reload_of_embedded_options_with_a_file(tmp_path):
    conf = tmp_path / "e.conf"
    conf.write_text("port: 7\n")
    o = ServerOptions(config_file=str(conf))
    assert reload_options(o).port == 7


def test_usage_and_version_text():
    text = usage()
    assert text.startswith("\nUsage: natsd [options]\n")
    for needle in [
        "-p, --port <port>",
        "-a, --addr, --net <host>",
        "-m, --http_port <port>",
        "-c, --config <file>",
        "-js, --jetstream",
        "-sd, --store_dir <dir>",
        "--user <user>",
        "--pass <password>",
        "--auth <token>",
        "-DV",
        "-l, --log <file>",
        "-t ",
        "-v, --version",
        "-h, --help",
        "--ports_file_dir <dir>",
    ]:
        assert needle in text
    assert version_line().startswith("natsd: v2.")


def test_monitoring_host_follows_client_host(tmp_path):
    o = build("-a", "127.0.0.1", "-m", "8222")
    assert (o.http_host, o.http_port) == ("127.0.0.1", 8222)
    conf = tmp_path / "h.conf"
    conf.write_text('host: 10.1.1.1\nhttp: "0.0.0.0:8222"\n')
    o = build("-c", str(conf))
    assert (o.host, o.http_host) == ("10.1.1.1", "0.0.0.0")
    conf.write_text("host: 10.1.1.1\nhttp_port: 8222\n")
    assert build("-c", str(conf)).http_host == "10.1.1.1"
    conf.write_text("http: 8222\nhost: 10.1.1.2\n")  # port only: the client host, whatever the order
    assert build("-c", str(conf)).http_host == "10.1.1.2"
