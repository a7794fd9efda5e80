"""Config tree -> ServerOptions: every supported key, aliases, and located errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from natsd.config.lexer import ConfigError
from natsd.config.options import (
    SECOND_NS,
    ConfigErrors,
    ServerOptions,
    config_digest,
    options_from_file,
    options_from_tree,
    parse_duration,
)
from natsd.config.parser import parse

DATA = Path(__file__).resolve().parents[2] / "data" / "conf"


def opts(text: str, env=None, **kw) -> ServerOptions:
    return options_from_tree(parse(text, "t.conf", env={} if env is None else env), **kw)


def errors_of(text: str, **kw) -> list[ConfigError]:
    with pytest.raises(ConfigError) as ei:
        opts(text, **kw)
    e = ei.value
    return e.errors if isinstance(e, ConfigErrors) else [e]


# -- durations -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,ns",
    [
        ("0", 0),
        ("1ns", 1),
        ("1us", 1000),
        ("1µs", 1000),
        ("500ms", 500_000_000),
        ("30s", 30 * SECOND_NS),
        ("2m", 120 * SECOND_NS),
        ("1h", 3600 * SECOND_NS),
        ("1h30m", 5400 * SECOND_NS),
        ("1.5s", 1_500_000_000),
        (".5s", 500_000_000),
        ("-1s", -SECOND_NS),
        ("+2s", 2 * SECOND_NS),
        ("1m30.5s", 90_500_000_000),
    ],
)
def test_parse_duration(text, ns):
    assert parse_duration(text) == ns


@pytest.mark.parametrize(
    "text,msg",
    [
        ("", 'time: invalid duration ""'),
        ("abc", 'time: invalid duration "abc"'),
        ("30", 'time: missing unit in duration "30"'),
        ("3x", 'time: unknown unit "x" in duration "3x"'),
        ("1s2", 'time: missing unit in duration "1s2"'),
        ("-", 'time: invalid duration "-"'),
    ],
)
def test_parse_duration_errors(text, msg):
    with pytest.raises(ValueError) as ei:
        parse_duration(text)
    assert str(ei.value) == msg


# -- defaults and the full example -----------------------------------------------------------


def test_defaults_untouched_by_empty_config():
    o = opts("")
    d = ServerOptions()
    assert (o.port, o.host, o.max_payload, o.ping_interval_ns) == (d.port, d.host, d.max_payload, d.ping_interval_ns)
    assert any("config has no values or is empty" in w for w in o.config_warnings)


def test_full_config_file():
    o = options_from_file(str(DATA / "full.conf"))
    assert o.config_warnings == []
    assert (o.host, o.port) == ("127.0.0.1", 4333)
    assert (o.http_host, o.http_port) == ("127.0.0.1", 8333)
    assert o.server_name == "natsd-test"
    assert o.max_payload == 2 * 1024 * 1024
    assert o.max_connections == 100
    assert o.max_control_line == 2048
    assert o.max_pending == 32 * 1024 * 1024
    assert o.max_subscriptions == 1000
    assert o.ping_interval_ns == 30 * SECOND_NS
    assert o.ping_max == 3
    assert o.write_deadline_ns == 5 * SECOND_NS
    assert o.lame_duck_duration_ns == 60 * SECOND_NS
    assert o.lame_duck_grace_period_ns == 2 * SECOND_NS
    assert (o.debug, o.trace, o.logtime) == (True, False, False)
    assert (o.log_file, o.pid_file, o.ports_file_dir) == ("/tmp/natsd-test.log", "/tmp/natsd-test.pid", "/tmp")
    assert o.system_account == "SYS" and o.no_auth_user == "alice"
    js = o.jetstream
    assert js.enabled and js.store_dir == "/tmp/natsd-js"
    assert js.max_memory_store == 1_000_000_000  # unquoted 1G: decimal, as the reference lexes it
    assert js.max_file_store == 10 * 1024**3  # "10G" string: binary, as getStorageSize
    assert js.domain == "hub" and js.sync_always
    accs = {a.name: a for a in o.accounts}
    assert set(accs) == {"SYS", "APP", "LIMITED"}
    assert accs["SYS"].jetstream is None
    assert accs["APP"].jetstream is not None and accs["APP"].jetstream.max_memory == -1
    lim = accs["LIMITED"].jetstream
    assert (lim.max_memory, lim.max_storage, lim.max_streams, lim.max_consumers) == (10_000_000, 1_000_000_000, 5, 20)
    users = {u.user: u for u in o.users}
    assert set(users) == {"sys", "alice", "bob"}
    assert users["alice"].account == "APP" and users["alice"].password == "a1"
    assert users["alice"].permissions.publish.allow == ["app.>"]
    assert users["alice"].permissions.subscribe.allow == ["app.>", "_INBOX.>"]
    bob = users["bob"]
    assert bob.password == "b2"  # from the $BOB_PASS variable
    assert bob.permissions.publish.allow == ["app.in.*"] and bob.permissions.publish.deny == ["app.in.secret"]
    assert bob.permissions.subscribe.deny == [">"] and bob.permissions.subscribe.allow == []
    assert bob.permissions.allow_responses is True
    assert accs["APP"].users == [users["alice"], users["bob"]]
    assert o.origins["max_payload"] == f"{DATA / 'full.conf'}:6:1"
    assert o.config_digest.startswith("sha256:")


def test_includes():
    o = options_from_file(str(DATA / "include_main.conf"))
    assert o.port == 4444
    assert o.server_name == "from_include"
    assert o.max_payload == 512 * 1024
    assert (o.username, o.password) == ("included_user", "included_pass")


# -- individual keys -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,attr,value",
    [
        ("port: 4333", "port", 4333),
        ("port: -1", "port", -1),
        ("host: 127.0.0.1", "host", "127.0.0.1"),
        ("net: ::1", "host", "::1"),
        ("server_name: srv", "server_name", "srv"),
        ("http_port: 8222", "http_port", 8222),
        ("monitor_port: 8223", "http_port", 8223),
        ("max_payload: 64KB", "max_payload", 65536),
        ("max_connections: 10", "max_connections", 10),
        ("max_conn: 0", "max_connections", -1),
        ("max_control_line: 1024", "max_control_line", 1024),
        ("max_pending: 1MB", "max_pending", 1 << 20),
        ("max_subscriptions: 5", "max_subscriptions", 5),
        ("max_subs: 6", "max_subscriptions", 6),
        ('ping_interval: "2m"', "ping_interval_ns", 120 * SECOND_NS),
        ("ping_interval: 30", "ping_interval_ns", 30 * SECOND_NS),
        ("ping_max: 5", "ping_max", 5),
        ('write_deadline: "3s"', "write_deadline_ns", 3 * SECOND_NS),
        ('lame_duck_duration: "45s"', "lame_duck_duration_ns", 45 * SECOND_NS),
        ('lame_duck_grace_period: "0s"', "lame_duck_grace_period_ns", 0),
        ("debug: true", "debug", True),
        ("trace: on", "trace", True),
        ("trace_verbose: yes", "trace", True),
        ("logtime: false", "logtime", False),
        ("log_file: /var/log/n.log", "log_file", "/var/log/n.log"),
        ("logfile: a.log", "log_file", "a.log"),
        ("logtime_utc: true", "logtime_utc", True),
        ("logfile_size_limit: 1MB", "log_size_limit", 1024 * 1024),
        ("log_size_limit: 100", "log_size_limit", 100),
        ("logfile_max_num: 3", "log_max_num", 3),
        ("log_max_num: 4", "log_max_num", 4),
        ("syslog: true", "syslog", True),
        ('remote_syslog: "udp://127.0.0.1:5514"', "remote_syslog", "udp://127.0.0.1:5514"),
        ("max_traced_msg_len: 16", "max_traced_msg_len", 16),
        ("pid_file: p.pid", "pid_file", "p.pid"),
        ("pidfile: q.pid", "pid_file", "q.pid"),
        ("ports_file_dir: /tmp/p", "ports_file_dir", "/tmp/p"),
        ("system_account: SYS\naccounts { SYS {} }", "system_account", "SYS"),
        ("system: SYS\naccounts { SYS {} }", "system_account", "SYS"),
        ("disable_sublist_cache: true", "no_sublist_cache", True),
        ('busy_poll: "50us"', "busy_poll_ns", 50_000),  # natsd only (natsd.server.transport.busypoll)
        ('busy_poll: "0s"', "busy_poll_ns", 0),
        ("busy_poll: false", "busy_poll_ns", 0),
        ("busy_poll: true", "busy_poll_ns", -1),
        ("port: 1", "busy_poll_ns", -1),  # the default: decided at start from the CPUs available
        ("PORT: 1234\nport: $PORT", "port", 1234),
        ("Port: 5", "port", 5),  # keys are case-insensitive
    ],
)
def test_scalar_keys(text, attr, value):
    assert getattr(opts(text), attr) == value


@pytest.mark.parametrize(
    "text,msg",
    [
        ('busy_poll: "-1ms"', "t.conf:1:1: invalid busy_poll, needs to be positive"),
        ("busy_poll: 5", "t.conf:1:1: busy_poll: expected a duration string, got int 5"),
    ],
)
def test_busy_poll_errors(text, msg):
    assert [str(e) for e in errors_of(text)] == [msg]


def test_ping_interval_as_integer_warns():
    o = opts("ping_interval: 30")
    assert o.config_warnings == [
        't.conf:1:1: invalid use of field "ping_interval": ping_interval should be converted to a duration'
    ]


@pytest.mark.parametrize(
    "text,host,port",
    [
        ('listen: "127.0.0.1:4333"', "127.0.0.1", 4333),
        ("listen: 127.0.0.1:4333", "127.0.0.1", 4333),
        ('listen: "[::1]:4333"', "::1", 4333),
        ('listen: ":4333"', "0.0.0.0", 4333),
        ("listen: 4333", "0.0.0.0", 4333),
        ('listen: "localhost:-1"', "localhost", -1),
    ],
)
def test_listen(text, host, port):
    o = opts(text)
    assert (o.host, o.port) == (host, port)


def test_http_host_port_and_port_only():
    o = opts('http: "127.0.0.1:-1"')
    assert (o.http_host, o.http_port) == ("127.0.0.1", -1)
    o = opts("http: 8222\nhost: 10.0.0.1")
    assert (o.http_host, o.http_port) == ("10.0.0.1", 8222)


def test_authorization_single_user():
    o = opts('authorization { user: derek, password: "s3cr3t", timeout: 1.5 }')
    assert (o.username, o.password) == ("derek", "s3cr3t")
    assert o.auth_timeout_ns == 1_500_000_000


def test_authorization_token_and_duration_timeout():
    o = opts('authorization { token: "abc", timeout: "3s" }')
    assert o.authorization == "abc" and o.auth_timeout_ns == 3 * SECOND_NS


def test_authorization_bcrypt_unquoted():
    h = "$2a$11$W2zko751KUvVy59mUTWmpOdWjpEm5qhcCZRd05GjI/sSOT.xtiHyG"
    o = opts(f"authorization {{ user: a, password: {h} }}")
    assert o.password == h


def test_authorization_users_and_permission_forms():
    o = opts("""
authorization {
  default_permissions { subscribe: "public.>" }
  users = [
    {user: a, password: pa, permissions: {publish: "x", subscribe: ["y", "z q"]}}
    {user: b, pass: pb, permissions: {pub: {allow: ["a.*"], deny: ["a.b"]}, sub: {deny: ">"}}}
    {username: c, password: 1234, permissions: {publish_allow_responses: {max: 5, expires: "1m"}}}
    {user: d, password: pd}
  ]
}
""")
    users = {u.user: u for u in o.users}
    assert all(u.account == "$G" for u in o.users)
    a = users["a"].permissions
    assert a.publish.allow == ["x"] and a.subscribe.allow == ["y", "z q"]
    b = users["b"].permissions
    assert (b.publish.allow, b.publish.deny, b.subscribe.deny) == (["a.*"], ["a.b"], [">"])
    c = users["c"]
    assert c.password == "1234"
    assert c.permissions.allow_responses and c.permissions.responses_max == 5
    assert c.permissions.responses_expires_ns == 60 * SECOND_NS
    assert c.permissions.publish is not None and c.permissions.publish.allow == []
    assert users["d"].permissions.subscribe.allow == ["public.>"]  # default_permissions


def test_accounts_as_list_of_names():
    o = opts("accounts: [A, B]")
    assert [a.name for a in o.accounts] == ["A", "B"]


@pytest.mark.parametrize(
    "value,enabled", [("true", True), ("enabled", True), ("enable", True), ("false", False), ("disabled", False)]
)
def test_jetstream_scalar_forms(value, enabled):
    assert opts(f"jetstream: {value}").jetstream.enabled is enabled


def test_jetstream_block_forms():
    o = opts('jetstream { store: "/d", max_mem: 1MB, max_file: "2G", sync: "10s", unique_tag: AZ }')
    js = o.jetstream
    assert js.enabled and js.store_dir == "/d" and js.max_memory_store == 1 << 20
    assert js.max_file_store == 2 << 30 and js.sync_interval_ns == 10 * SECOND_NS and not js.sync_always
    assert js.unique_tag == "az"
    assert opts("jetstream { enabled: false, store_dir: x }").jetstream.enabled is False
    o = opts("store_dir: /top\njetstream: enabled")
    assert o.jetstream.store_dir == "/top" and o.jetstream.enabled


def test_account_jetstream_forms():
    o = opts(
        "accounts { A { jetstream: true }, B { jetstream: disabled }, "
        "C { jetstream: { max_memory: 5, max_store: 6, max_bytes_required: true } } }"
    )
    accs = {a.name: a for a in o.accounts}
    assert accs["A"].jetstream is not None and accs["B"].jetstream is None
    c = accs["C"].jetstream
    assert (c.max_memory, c.max_storage, c.max_bytes_required) == (5, 6, True)


# -- unknown and unsupported keys -------------------------------------------------------------


def test_unknown_key_warns_with_position():
    o = opts("port: 1\n  bogus_key: 2\n")
    assert o.config_warnings == ['t.conf:2:3: unknown field "bogus_key"']


def test_unknown_key_is_an_error_when_pedantic():
    errs = errors_of("port: 1\nbogus_key: 2\n", pedantic=True)
    assert str(errs[0]) == 't.conf:2:1: unknown field "bogus_key"'
    o = ServerOptions(pedantic_config=True)
    with pytest.raises(ConfigError):
        options_from_tree(parse("bogus: 1", "t.conf", env={}), o)


def test_unknown_nested_keys_warn():
    o = opts("authorization {\n  user: a\n  bogus: 1\n}\njetstream { nope: 1 }\n")
    assert 't.conf:3:3: unknown field "bogus"' in o.config_warnings
    assert 't.conf:5:13: unknown field "nope"' in o.config_warnings


def test_variables_are_not_unknown_fields():
    o = opts('TOKEN: "abc"\nauthorization { token: $TOKEN }')
    assert o.config_warnings == [] and o.authorization == "abc"


def test_reference_features_natsd_lacks_are_notices():
    o = opts("cluster { port: 6222 }\ngateway { port: 7222 }\nport: 1")
    assert o.port == 1 and o.config_warnings == []
    assert o.config_notices == [
        't.conf:1:1: field "cluster" is not supported by natsd and is ignored',
        't.conf:2:1: field "gateway" is not supported by natsd and is ignored',
    ]


def test_incomplete_tls_block_is_an_error():
    # (tls {} itself is tested in test_tls_options.py)
    errs = errors_of("tls { cert_file: a }")
    assert errs[0].message == "missing 'key_file' in TLS configuration"


# -- semantic errors name file:line:column ------------------------------------------------------


@pytest.mark.parametrize(
    "text,loc,fragment",
    [
        ('port: "abc"', "t.conf:1:1", "port: expected an integer, got string"),
        ("a: 1\nmax_payload: true", "t.conf:2:1", "max_payload: expected an integer, got bool"),
        ("max_payload: 4GB", "t.conf:1:1", "max_payload value is too big"),
        ('server_name: "has space"', "t.conf:1:1", "server name cannot contain spaces"),
        ('ping_interval: "soon"', "t.conf:1:1", 'error parsing ping_interval: time: invalid duration "soon"'),
        ('lame_duck_duration: "10s"', "t.conf:1:1", "invalid lame_duck_duration of 10s, minimum is 30 seconds"),
        # Go prints the duration with Duration.String(): sub-second in ms, not "0.5s" (checked with nats-server -t)
        ('lame_duck_duration: "500ms"', "t.conf:1:1", "invalid lame_duck_duration of 500ms, minimum is 30 seconds"),
        (
            'lame_duck_duration: "1x"',
            "t.conf:1:1",
            'error parsing lame_duck_duration: time: unknown unit "x" in duration "1x"',
        ),
        ("lame_duck_duration: 60", "t.conf:1:1", "lame_duck_duration: expected a duration string"),
        ('lame_duck_grace_period: "-1s"', "t.conf:1:1", "invalid lame_duck_grace_period, needs to be positive"),
        ('listen: "a:b:c"', "t.conf:1:1", 'could not parse address string "a:b:c"'),
        ('listen: "host:port"', "t.conf:1:1", 'could not parse port "port"'),
        ("debug: 1", "t.conf:1:1", "debug: expected a boolean"),
        ("authorization: 5", "t.conf:1:1", "authorization: expected a map"),
        ("authorization { user: a, token: b }", "t.conf:1:1", "Cannot have a user/pass and token"),
        (
            "authorization { user: a, users: [{user: b}] }",
            "t.conf:1:1",
            "Can not have a single user/pass and a users array",
        ),
        ("authorization { token: t, users: [] }", "t.conf:1:1", "Can not have a token and a users array"),
        ("authorization {\n users: [{user: b}, {user: b}] }", "t.conf:1:1", 'Duplicate user "b" detected'),
        ("authorization {\n  users: [{password: x}] }", "t.conf:2:11", "User entry requires a user"),
        ("authorization {\n  users: [5] }", "t.conf:2:11", "Expected user entry to be a map/struct"),
        ("authorization {\n  users: 5 }", "t.conf:2:3", "Expected users field to be an array"),
        ('authorization {\n  timeout: "x" }', "t.conf:2:3", "'timeout' time: invalid duration"),
        (
            'authorization {\n users: [{user: a, permissions: {publish: "a..b"}}] }',
            "t.conf:2:34",
            'subject "a..b" is not a valid subject',
        ),
        (
            'authorization {\n users: [{user: a, permissions: {subscribe: "foo bar baz"}}] }',
            "t.conf:2:34",
            'subject "foo bar baz" is not a valid subject',
        ),
        (
            "authorization {\n users: [{user: a, permissions: {publish: {allow: [1]}}}] }",
            "t.conf:2:52",
            "cannot be cast to string",
        ),
        (
            "authorization {\n users: [{user: a, permissions: {publish: {permit: x}}}] }",
            "t.conf:2:44",
            'Unknown field name "permit"',
        ),
        (
            "authorization {\n users: [{user: a, permissions: {bogus: x}}] }",
            "t.conf:2:34",
            'Unknown field "bogus" parsing permissions',
        ),
        (
            'authorization {\n users: [{user: a, permissions: "x"}] }',
            "t.conf:2:20",
            "Expected permissions to be a map/struct",
        ),
        (
            "authorization {\n users: [{user: a, permissions: {allow_responses: 3}}] }",
            "t.conf:2:34",
            "expected a boolean or a map",
        ),
        ("jetstream: maybe", "t.conf:1:1", "Expected 'enabled' or 'disabled' for string value, got 'maybe'"),
        ("jetstream: 5", "t.conf:1:1", "Expected map, bool or string to define JetStream"),
        (
            'jetstream {\n  max_mem: "5X" }',
            "t.conf:2:3",
            "max_mem_store sizes defined as strings must end in K, M, G, T",
        ),
        ("store_dir: /a\njetstream {\n  store_dir: /b }", "t.conf:3:3", "Duplicate 'store_dir' configuration"),
        ('jetstream {\n  sync_interval: "x" }', "t.conf:2:3", "error parsing sync_interval"),
        ("accounts: { $G: {} }", "t.conf:1:13", '"$G" is a Reserved Account'),
        ("accounts: [A, A]", "t.conf:1:15", "Duplicate Account Entry: A"),
        ("accounts: { A: 1 }", "t.conf:1:13", "Expected map entries for accounts"),
        (
            "accounts: {\n  A: { jetstream: {\n    max_streams: x } } }",
            "t.conf:3:5",
            'Expected a parseable size for "max_streams"',
        ),
        (
            "accounts: {\n  A: { users: [{user: u}] }\n  B: { users: [{user: u}] } }",
            "t.conf:3:8",
            'Duplicate user "u" detected',
        ),
        ("no_auth_user: ghost", "t.conf:1:1", 'no_auth_user: "ghost" not present as user'),
        ("system_account: NOPE\naccounts { A {} }", "t.conf:1:1", 'system account "NOPE" not found'),
    ],
)
def test_semantic_errors_are_located(text, loc, fragment):
    errs = errors_of(text)
    assert any(fragment in e.message for e in errs), [str(e) for e in errs]
    e = next(e for e in errs if fragment in e.message)
    assert str(e).startswith(loc + ": "), str(e)


def test_all_errors_are_reported_together():
    with pytest.raises(ConfigErrors) as ei:
        opts('port: "a"\nmax_payload: "b"\ndebug: 3\n')
    assert [e.line for e in ei.value.errors] == [1, 2, 3]
    assert str(ei.value).count("\n") == 2


def test_plain_dict_tree_is_accepted():
    o = options_from_tree({"port": 1, "authorization": {"users": [{"user": "a", "password": "b"}]}})
    assert o.port == 1 and o.users[0].user == "a"


def test_digest_is_stable_and_content_sensitive():
    a = config_digest(parse("a: 1\nb: [x]", "x.conf", env={}))
    b = config_digest(parse("b: [x]\n# reordered\na: 1", "y.conf", env={}))
    c = config_digest(parse("a: 2\nb: [x]", "x.conf", env={}))
    assert a == b != c


def test_syntax_zoo_file():
    # The same file is checked against the reference's digest in tests/acceptance.
    o = options_from_file(str(DATA / "syntax_zoo.conf"))
    assert o.config_warnings == []
    assert o.server_name == "zoo"
    assert o.log_file == '/tmp/with # hash and "escapes" \t A.log'
    assert o.pid_file == "/tmp/single quoted $NOT_VAR"
    assert o.ports_file_dir == "/tmp/unquoted/path-with.dots_and*stars"
    assert (o.max_payload, o.max_pending, o.max_control_line) == (65536, 1 << 20, 2000)
    assert (o.max_connections, o.ping_max) == (1000, 5)
    assert (o.debug, o.trace, o.logtime) == (True, False, True)
    assert (o.host, o.port, o.http_host, o.http_port) == ("127.0.0.1", 4555, "localhost", 8555)
    assert o.write_deadline_ns == 90 * SECOND_NS and o.ping_interval_ns == 120 * SECOND_NS
    assert o.auth_timeout_ns == 1_500_000_000
    users = {u.user: u for u in o.users}
    assert users["alice"].password == "zoo-pass"
    bob = users["bob"].permissions
    assert bob.publish.allow == ["x.y", "z.>"] and bob.publish.deny == ["x.y.z"]
    assert (bob.allow_responses, bob.responses_max, bob.responses_expires_ns) == (True, 3, 5 * SECOND_NS)
    assert users["dave"].account == "ACC"
    assert o.jetstream.max_memory_store == 10_000_000 and o.jetstream.max_file_store == 1 << 30
