"""The wire protocol over raw sockets: exact bytes and -ERR texts as nats-server 2.15.1 sends them.

Every expectation here was first observed against the reference binary with the same bytes.
Bad input closes only the offending connection: a bystander client keeps working throughout.
"""

from __future__ import annotations

import pytest

from natsd.clock import ManualClock
from tests.helpers.inproc import running_server
from tests.helpers.rawclient import RawClient

QUIET = b'CONNECT {"verbose":false,"pedantic":false}\r\n'


@pytest.fixture
async def srv():
    async with running_server() as s:
        yield s


async def bystander_ok(port: int, c: RawClient) -> None:
    await c.send(b"PUB by.stander 2\r\nok\r\nPING\r\n")
    await c.expect(rb"MSG by\.stander 1 2\r\nok\r\nPONG\r\n")


@pytest.fixture
async def bystander(srv):
    c = await RawClient.open(srv.port)
    await c.send(QUIET + b"SUB by.stander 1\r\nPING\r\n")
    await c.expect(rb"PONG\r\n")
    yield c
    await bystander_ok(srv.port, c)  # still fine after whatever the test did
    await c.close()


async def test_info_keys(srv):
    async with RawClient.connect(srv.port) as c:
        info = c.info
    for key in (
        "server_id",
        "server_name",
        "version",
        "proto",
        "git_commit",
        "go",
        "host",
        "port",
        "headers",
        "max_payload",
        "client_id",
        "client_ip",
    ):
        assert key in info, key
    assert info["proto"] == 1 and info["headers"] is True and info["port"] == srv.port
    assert info["max_payload"] == 1048576 and info["client_ip"] == "127.0.0.1"
    assert "auth_required" not in info


async def test_handshake_pong_is_next_line(srv):
    async with RawClient.connect(srv.port) as c:
        await c.send(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\nPING\r\n')
        await c.expect(rb"PONG\r\n")


async def test_verbose_default_before_connect_and_ok_per_op(srv):
    async with RawClient.connect(srv.port) as c:
        await c.send(b"SUB foo 1\r\nPING\r\n")  # no CONNECT: the reference is verbose by default
        await c.expect(rb"\+OK\r\nPONG\r\n")
    async with RawClient.connect(srv.port) as c:
        await c.send(b'CONNECT {"verbose":true}\r\nSUB foo 1\r\nPUB foo 1\r\nx\r\nPING\r\n')
        await c.expect(rb"\+OK\r\n\+OK\r\n\+OK\r\nMSG foo 1 1\r\nx\r\nPONG\r\n")  # +OK before the MSG


async def test_client_spacing_quirks(srv):
    async with RawClient.connect(srv.port) as c:
        await c.send(
            QUIET + b"SUB foo  1\r\nPUB foo  1\r\nx\r\nsub\tbar\t2\r\npub bar 1\r\ny\r\nUNSUB 1 \r\n"
            b"PUB foo 1\r\nz\r\nping\r\n"
        )
        await c.expect(rb"MSG foo 1 1\r\nx\r\nMSG bar 2 1\r\ny\r\nPONG\r\n")


async def test_hpub_and_header_length_zero(srv):
    async with RawClient.connect(srv.port) as c:
        await c.send(
            b'CONNECT {"verbose":false,"headers":true}\r\nSUB foo 1\r\n'
            b"HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\nHPUB foo r 0 4\r\nabcd\r\nPING\r\n"
        )
        await c.expect(rb"HMSG foo 1 12 14\r\nNATS/1\.0\r\n\r\nhi\r\nMSG foo 1 r 4\r\nabcd\r\nPONG\r\n")


async def test_headers_stripped_for_client_without_header_support(srv):
    async with RawClient.connect(srv.port) as sub, RawClient.connect(srv.port) as pub:
        await sub.send(QUIET + b"SUB foo 1\r\nPING\r\n")
        await sub.expect(rb"PONG\r\n")
        await pub.send(b'CONNECT {"verbose":false,"headers":true}\r\nHPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n')
        await pub.expect(rb"PONG\r\n")
        await sub.send(b"PING\r\n")
        await sub.expect(rb"MSG foo 1 2\r\nhi\r\nPONG\r\n")


async def test_no_responders_exact_bytes(srv):
    async with RawClient.connect(srv.port) as c:
        await c.send(
            b'CONNECT {"verbose":false,"no_responders":true,"headers":true}\r\n'
            b"SUB r 1\r\nPUB nobody r 1\r\nx\r\nPING\r\n"
        )
        await c.expect(rb"HMSG r 1 38 38\r\nNATS/1\.0 503\r\nNats-Subject: nobody\r\n\r\n\r\nPONG\r\n")
        # nothing when the requester has no subscription on the reply subject
        await c.send(b"PUB nobody other 1\r\nx\r\nPING\r\n")
        await c.expect(rb"PONG\r\n")


async def test_no_responders_requires_headers(srv):
    async with RawClient.connect(srv.port) as c:
        await c.send(b'CONNECT {"verbose":false,"no_responders":true}\r\n')
        await c.expect(rb"-ERR 'no responders requires headers support'\r\n")
        await c.expect_closed()


async def test_unsub_max_and_duplicate_sid(srv):
    async with RawClient.connect(srv.port) as c:
        await c.send(
            QUIET + b"SUB foo 1\r\nSUB bar 1\r\nUNSUB 1 2\r\n"
            b"PUB bar 1\r\nb\r\nPUB foo 1\r\n1\r\nPUB foo 1\r\n2\r\nPUB foo 1\r\n3\r\nPING\r\n"
        )
        await c.expect(rb"MSG foo 1 1\r\n1\r\nMSG foo 1 1\r\n2\r\nPONG\r\n")
        await c.send(b"UNSUB 99\r\nUNSUB x\r\nPING\r\n")  # unknown sids are ignored
        await c.expect(rb"PONG\r\n")


async def test_invalid_subject_keeps_connection(srv, bystander):
    async with RawClient.connect(srv.port) as c:
        await c.send(QUIET + b"SUB foo..bar 1\r\nSUB foo.>.bar 2\r\nPING\r\n")
        await c.expect(rb"-ERR 'Invalid Subject'\r\n-ERR 'Invalid Subject'\r\nPONG\r\n")
    async with RawClient.connect(srv.port) as c:
        await c.send(
            b'CONNECT {"verbose":false,"pedantic":true}\r\nPUB foo..bar 1\r\nx\r\nPUB foo.* 1\r\nx\r\nPING\r\n'
        )
        await c.expect(rb"-ERR 'Invalid Publish Subject'\r\n-ERR 'Invalid Publish Subject'\r\nPONG\r\n")
    async with RawClient.connect(srv.port) as c:
        await c.send(QUIET + b"PUB foo..bar 1\r\nx\r\nPING\r\n")  # not pedantic: silently dropped
        await c.expect(rb"PONG\r\n")


FATAL_CASES = [
    (b"FOO bar\r\n", b"Unknown Protocol Operation"),
    (b"\r\n", b"Unknown Protocol Operation"),
    (b"MSG foo 1 1\r\nx\r\n", b"Unknown Protocol Operation"),
    (b"PUB\r\n", b"Unknown Protocol Operation"),
    (b"PUB foo 2\r\nabc\r\n", b"Unknown Protocol Operation"),
    (b"PUB foo 1\r\nxyPING\r\n", b"Unknown Protocol Operation"),
    (b"\x00\xff\xfe garbage", b"Unknown Protocol Operation"),
    (b"PUB " + b"a" * 5000 + b" 1\r\n", b"maximum control line exceeded"),
    (b"SUB " + b"a" * 5000, b"maximum control line exceeded"),
    (b"PUB foo 2000000\r\n", b"Maximum Payload Violation"),
    (b'CONNECT {"protocol":2}\r\n', b"invalid client protocol"),
]


@pytest.mark.parametrize("data,err", FATAL_CASES)
async def test_fatal_errors_exact_text(srv, bystander, data, err):
    async with RawClient.connect(srv.port) as c:
        await c.send(QUIET + data)
        await c.expect(rb"-ERR '" + err + rb"'\r\n")
        assert await c.expect_closed() == b""


SILENT_CASES = [
    b"PUB foo -1\r\n",
    b"PUB foo abc\r\n",
    b"PUB foo\r\n",
    b"PUB a b c 1\r\n",
    b"SUB foo\r\n",
    b"SUB a b c d\r\n",
    b"UNSUB 1 2 3\r\n",
    b"HPUB foo 10 5\r\n",
    b"CONNECT {bad\r\n",
    b'CONNECT {"verbose":"yes"}\r\n',
    b"CONNECT\r\n",
    b"-ERR 'x'\r\n",
    b"HPUB foo 12 12\r\nNATS/1.0\r\n\r\n\r\n",  # HPUB without headers:true in CONNECT
]


@pytest.mark.parametrize("data", SILENT_CASES)
async def test_malformed_arguments_close_silently(srv, bystander, data):
    async with RawClient.connect(srv.port) as c:
        await c.send(QUIET + data)
        assert await c.expect_closed() == b""


async def test_split_frames_byte_by_byte(srv):
    async with RawClient.connect(srv.port) as c:
        data = (
            b'CONNECT {"verbose":false,"headers":true}\r\n'
            + b"SUB foo 1\r\nHPUB foo r 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPUB foo 5\r\nhello\r\nPING\r\n"
        )
        for i in range(len(data)):
            await c.send(data[i : i + 1])
        await c.expect(rb"HMSG foo 1 r 12 14\r\nNATS/1\.0\r\n\r\nhi\r\nMSG foo 1 5\r\nhello\r\nPONG\r\n")


async def test_ops_before_an_error_are_executed(srv):
    async with RawClient.connect(srv.port) as c:
        await c.send(QUIET + b"SUB foo 1\r\nPUB foo 1\r\nx\r\nPING\r\nBOGUS\r\n")
        await c.expect(rb"MSG foo 1 1\r\nx\r\nPONG\r\n-ERR 'Unknown Protocol Operation'\r\n")
        await c.expect_closed()


async def test_max_connections():
    async with running_server(max_connections=1) as s:
        async with RawClient.connect(s.port) as a:
            await a.send(QUIET + b"PING\r\n")
            await a.expect(rb"PONG\r\n")
            async with RawClient.connect(s.port) as b:
                await b.expect(rb"-ERR 'maximum connections exceeded'\r\n")
                await b.expect_closed()
            await a.send(b"PING\r\n")
            await a.expect(rb"PONG\r\n")


async def test_max_subscriptions():
    async with running_server(max_subscriptions=2) as s:
        async with RawClient.connect(s.port) as c:
            await c.send(QUIET + b"SUB a 1\r\nSUB b 2\r\nSUB c 3\r\nPING\r\n")
            await c.expect(rb"-ERR 'maximum subscriptions exceeded'\r\nPONG\r\n")


async def test_max_payload_option_is_advertised_and_enforced():
    async with running_server(max_payload=16) as s:
        async with RawClient.connect(s.port) as c:
            assert c.info["max_payload"] == 16
            await c.send(QUIET + b"PUB foo 17\r\n")
            await c.expect(rb"-ERR 'Maximum Payload Violation'\r\n")
            await c.expect_closed()


async def test_stale_connection_with_manual_clock():
    clock = ManualClock()
    async with running_server(clock=clock, ping_interval_ns=1_000_000_000, ping_max=1) as s:
        async with RawClient.connect(s.port) as c:
            await c.send(QUIET + b"PING\r\n")
            await c.expect(rb"PONG\r\n")
            clock.advance(1_000_000_000)
            await c.expect(rb"PING\r\n")
            await c.send(b"PONG\r\n")  # answered: the count resets
            await c.send(b"PING\r\n")
            await c.expect(rb"PONG\r\n")
            clock.advance(1_000_000_000)
            await c.expect(rb"PING\r\n")
            clock.advance(1_000_000_000)  # not answered this time
            await c.expect(rb"-ERR 'Stale Connection'\r\n")
            await c.expect_closed()
        assert s.stale_connections == 1


async def test_auth_timeout_with_manual_clock():
    clock = ManualClock()
    async with running_server(clock=clock, authorization="tok") as s:
        async with RawClient.connect(s.port) as c:
            assert c.info["auth_required"] is True
            await c.read_all(0.05)
            clock.advance(s.options.auth_timeout_ns)
            await c.expect(rb"-ERR 'Authentication Timeout'\r\n")
            await c.expect_closed()


async def test_pipelined_runs_keep_per_message_semantics(srv):
    """Runs of identical PUB lines are routed as batches; the bytes must not change."""
    run = b"PUB r 1\r\nx\r\n" * 5
    async with RawClient.connect(srv.port) as c, RawClient.connect(srv.port) as q1, RawClient.connect(srv.port) as q2:
        for qc in (q1, q2):
            await qc.send(QUIET + b"SUB r grp 9\r\nPING\r\n")
            await qc.expect(rb"PONG\r\n")
        # two subscriptions on one connection stay interleaved message by message
        await c.send(QUIET + b"SUB r 1\r\nSUB r 2\r\nSUB r 3\r\nUNSUB 3 2\r\n" + run + b"PING\r\n")
        expected = b""
        for i in range(5):
            expected += b"MSG r 1 1\r\nx\r\nMSG r 2 1\r\nx\r\n"
            if i < 2:
                expected += b"MSG r 3 1\r\nx\r\n"  # auto-unsubscribed after two
        m = await c.expect(rb"(.*)PONG\r\n")
        assert m.group(1) == expected
        # the queue group got exactly one copy of each of the 5 messages
        got = 0
        for qc in (q1, q2):
            await qc.send(b"PING\r\n")
            got += (await qc.expect(rb"(.*)PONG\r\n")).group(1).count(b"MSG r 9 1\r\nx\r\n")
        assert got == 5


async def test_half_close_still_gets_replies(srv):
    c = await RawClient.open(srv.port)
    await c.send(QUIET + b"SUB a 1\r\nPUB a 1\r\nx\r\nPING\r\n")
    c.writer.write_eof()
    assert await c.expect_closed() == b"MSG a 1 1\r\nx\r\nPONG\r\n"
    await c.close()


# -- the same tables against the reference nats-server binary (proves the expectations above) --


@pytest.fixture(scope="module")
def reference_port(tmp_path_factory):
    from tests.helpers.servers import reference_binary, start_server

    if reference_binary() is None:
        pytest.skip("reference nats-server binary not available")
    handle = start_server("reference", tmp_path_factory.mktemp("ref"), jetstream=False)
    yield handle.port
    handle.stop()


@pytest.mark.reference
@pytest.mark.parametrize("data,err", FATAL_CASES)
async def test_reference_fatal_errors(reference_port, data, err):
    async with RawClient.connect(reference_port) as c:
        await c.send(QUIET + data)
        await c.expect(rb"-ERR '" + err + rb"'\r\n")
        assert await c.expect_closed() == b""


@pytest.mark.reference
@pytest.mark.parametrize("data", SILENT_CASES)
async def test_reference_silent_close(reference_port, data):
    async with RawClient.connect(reference_port) as c:
        await c.send(QUIET + data)
        assert await c.expect_closed() == b""


# One connection's full exchange, checked against natsd and (marker ``reference``) nats-server.
EXCHANGES = [
    (
        b'CONNECT {"verbose":true}\r\nSUB foo 1\r\nPUB foo 1\r\nx\r\nPING\r\n',
        rb"\+OK\r\n\+OK\r\n\+OK\r\nMSG foo 1 1\r\nx\r\nPONG\r\n",
    ),
    (
        b'CONNECT {"verbose":false,"no_responders":true,"headers":true}\r\nSUB r 1\r\nPUB nobody r 1\r\nx\r\nPING\r\n',
        rb"HMSG r 1 38 38\r\nNATS/1\.0 503\r\nNats-Subject: nobody\r\n\r\n\r\nPONG\r\n",
    ),
    (
        QUIET + b"SUB foo..bar 1\r\nSUB foo.>.bar 2\r\nSUB foo. 3\r\nPING\r\n",
        rb"(-ERR 'Invalid Subject'\r\n){3}PONG\r\n",
    ),
    (
        b'CONNECT {"verbose":false,"pedantic":true}\r\nPUB foo.* 1\r\nx\r\nPING\r\n',
        rb"-ERR 'Invalid Publish Subject'\r\nPONG\r\n",
    ),
    (
        b'CONNECT {"pedantic":true}\r\nPUB foo.* 1\r\nx\r\nPING\r\n',  # verbose stays on: merged over defaults
        rb"\+OK\r\n-ERR 'Invalid Publish Subject'\r\n\+OK\r\nPONG\r\n",
    ),
    (
        QUIET + b"SUB foo 1\r\nUNSUB 1 1\r\nPUB foo 1\r\nx\r\nPUB foo 1\r\ny\r\nPING\r\n",
        rb"MSG foo 1 1\r\nx\r\nPONG\r\n",
    ),
    (
        b'CONNECT {"verbose":false,"headers":true}\r\nSUB foo 1\r\nHPUB foo r 0 4\r\nabcd\r\nPING\r\n',
        rb"MSG foo 1 r 4\r\nabcd\r\nPONG\r\n",
    ),
    (
        QUIET + b"sub foo  1\r\npub foo  1\r\nx\r\nPUB\tfoo\t1\r\ny\r\nUNSUB 1 \r\nPUB foo 1\r\nz\r\nping\r\nPINGX\r\n",
        rb"MSG foo 1 1\r\nx\r\nMSG foo 1 1\r\ny\r\nPONG\r\nPONG\r\n",
    ),
    (
        QUIET + b"SUB foo 123456789012345678901234567890\r\nPUB foo 1\r\nx\r\nINFO {}\r\n+OK\r\nPING\r\n",
        rb"MSG foo 123456789012345678901234567890 1\r\nx\r\nPONG\r\n",
    ),
    (
        QUIET + b"SUB foo 1\r\nSUB bar 1\r\nPUB bar 1\r\nb\r\nPUB foo 1\r\nf\r\nPING\r\n",  # duplicate sid ignored
        rb"MSG foo 1 1\r\nf\r\nPONG\r\n",
    ),
]


async def run_exchange(port: int, data: bytes, expected: bytes) -> None:
    async with RawClient.connect(port) as c:
        await c.send(data)
        await c.expect(expected + rb"\Z")
        assert await c.read_all(0.05) == b""


@pytest.mark.parametrize("data,expected", EXCHANGES)
async def test_exchanges(srv, data, expected):
    await run_exchange(srv.port, data, expected)


@pytest.mark.reference
@pytest.mark.parametrize("data,expected", EXCHANGES)
async def test_reference_exchanges(reference_port, data, expected):
    await run_exchange(reference_port, data, expected)


async def test_long_pipelines_are_run_in_slices_in_order(srv, monkeypatch):
    import natsd.server.connection as connection

    monkeypatch.setattr(connection, "EVENTS_PER_TURN", 3)  # force many slices
    async with RawClient.connect(srv.port) as c, RawClient.connect(srv.port) as other:
        await other.send(QUIET + b"PING\r\n")
        await other.expect(rb"PONG\r\n")
        ops = b"".join(b"PUB s.%d 1\r\n%d\r\n" % (i % 3, i % 10) for i in range(60))
        await c.send(QUIET + b"SUB s.* 1\r\n" + ops + b"PING\r\n" + ops + b"BOGUS\r\n")
        await other.send(b"PING\r\n")
        await other.expect(rb"PONG\r\n")  # served while c's backlog is worked through
        expected = b"".join(b"MSG s.%d 1 1\r\n%d\r\n" % (i % 3, i % 10) for i in range(60))
        m = await c.expect(rb"(.*)-ERR 'Unknown Protocol Operation'\r\n", timeout=5)
        assert m.group(1) == expected + b"PONG\r\n" + expected
        await c.expect_closed()
