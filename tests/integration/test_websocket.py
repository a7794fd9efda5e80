"""NATS over WebSocket with real nats-py clients (ws:// and wss://) and raw frames for bad input."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import struct

import nats
import pytest

from natsd.config.tls import TLSOptions, WebsocketOptions
from tests.helpers.certs import make_pki
from tests.helpers.inproc import running_server

pytestmark = pytest.mark.integration


def _ws(**kw) -> WebsocketOptions:
    kw.setdefault("no_tls", True)
    return WebsocketOptions(port=-1, **kw)


async def _echo_roundtrip(nc, subject="ws.echo") -> bytes:
    async def echo(m):
        await m.respond(m.data.upper())

    sub = await nc.subscribe(subject, cb=echo)
    await nc.flush()
    r = await nc.request(subject, b"hello", timeout=2)
    await sub.unsubscribe()
    return r.data


async def test_ws_pubsub_request_headers_and_tcp_interop():
    async with running_server(websocket=_ws()) as s:
        ws = await nats.connect(f"ws://127.0.0.1:{s.websocket_port}", allow_reconnect=False)
        tcp = await nats.connect(s.client_url, allow_reconnect=False)
        try:
            sub = await ws.subscribe("mix.>")
            await ws.flush()
            await tcp.publish("mix.1", b"from-tcp", headers={"K": "v"})
            await ws.publish("mix.2", b"from-ws")
            got = [await sub.next_msg(2) for _ in range(2)]
            assert [(m.subject, m.data, m.headers) for m in got] == [
                ("mix.1", b"from-tcp", {"K": "v"}),
                ("mix.2", b"from-ws", None),
            ]
            assert await _echo_roundtrip(ws) == b"HELLO"
            assert await _echo_roundtrip(tcp) == b"HELLO"
            big = os.urandom(900_000)
            await tcp.publish("mix.big", big)
            assert (await sub.next_msg(3)).data == big
        finally:
            await ws.close()
            await tcp.close()


async def test_ws_info_names_the_websocket_port():
    async with running_server(websocket=_ws()) as s:
        r, w = await asyncio.open_connection("127.0.0.1", s.websocket_port)
        key = base64.b64encode(os.urandom(16)).decode()
        w.write(
            f"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        head = await r.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101")
        b0, b1 = await r.readexactly(2)
        assert b0 == 0x82  # FIN + binary
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", await r.readexactly(2))[0]
        payload = await r.readexactly(n)
        info = json.loads(payload[5:])
        assert info["port"] == s.websocket_port and "tls_required" not in info
        w.close()


async def test_ws_jetstream_publish_and_consume():
    async with running_server(websocket=_ws(), jetstream=True) as s:
        nc = await nats.connect(f"ws://127.0.0.1:{s.websocket_port}", allow_reconnect=False)
        try:
            js = nc.jetstream()
            await js.add_stream(name="WS", subjects=["ws.js.>"])
            for i in range(20):
                ack = await js.publish(f"ws.js.{i}", str(i).encode())
                assert ack.seq == i + 1
            psub = await js.pull_subscribe("ws.js.>", durable="d")
            msgs = await psub.fetch(20, timeout=3)
            assert [m.data for m in msgs] == [str(i).encode() for i in range(20)]
            for m in msgs:
                await m.ack()
        finally:
            await nc.close()


async def test_ws_reconnect_after_restart():
    async with running_server(websocket=_ws()) as s:
        port = s.websocket_port
        reconnected = asyncio.Event()

        async def on_reconnect():
            reconnected.set()

        nc = await nats.connect(
            f"ws://127.0.0.1:{port}", reconnected_cb=on_reconnect, reconnect_time_wait=0.1, max_reconnect_attempts=200
        )
        try:
            assert await _echo_roundtrip(nc) == b"HELLO"
            await s.shutdown()
            async with running_server(websocket=WebsocketOptions(port=port, no_tls=True)):
                await asyncio.wait_for(reconnected.wait(), 15)
                assert await _echo_roundtrip(nc) == b"HELLO"
        finally:
            await nc.close()


async def test_wss(tmp_path):
    pki = make_pki(tmp_path / "pki")
    tls = TLSOptions(cert_file=pki.server_cert, key_file=pki.server_key, ca_file=pki.ca_file)
    async with running_server(websocket=WebsocketOptions(port=-1, tls=tls)) as s:
        nc = await nats.connect(
            f"wss://localhost:{s.websocket_port}", tls=pki.client_context(with_cert=False), allow_reconnect=False
        )
        try:
            sub = await nc.subscribe("wss.x")
            await nc.publish("wss.x", b"secure", headers={"A": "1"})
            m = await sub.next_msg(2)
            assert (m.data, m.headers) == (b"secure", {"A": "1"})
            assert await _echo_roundtrip(nc) == b"HELLO"
        finally:
            await nc.close()


async def test_ws_compression_negotiated_when_enabled():
    import aiohttp

    async with running_server(websocket=_ws(compression=True)) as s:
        head = await _upgrade(s.websocket_port, extra="Sec-WebSocket-Extensions: permessage-deflate\r\n")
        assert b"permessage-deflate" in head
        # aiohttp (nats-py's WebSocket library) negotiates permessage-deflate and inflates frames
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(f"http://127.0.0.1:{s.websocket_port}/", compress=15) as ws:
                assert ws.compress == 15
                info = await ws.receive_bytes(timeout=2)
                assert info.startswith(b"INFO ")
                await ws.send_bytes(
                    b'CONNECT {"verbose":false}\r\nSUB c 1\r\nPUB c 300\r\n' + b"z" * 300 + b"\r\nPING\r\n"
                )
                got = b""
                while b"PONG" not in got:
                    got += await ws.receive_bytes(timeout=2)
                assert got == b"MSG c 1 300\r\n" + b"z" * 300 + b"\r\nPONG\r\n"
    async with running_server(websocket=_ws()) as s:
        head = await _upgrade(s.websocket_port, extra="Sec-WebSocket-Extensions: permessage-deflate\r\n")
        assert b"permessage-deflate" not in head


async def _upgrade(port: int, extra: str = "", reader_writer=None) -> bytes:
    r, w = reader_writer or await asyncio.open_connection("127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    w.write(
        f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n".encode()
    )
    head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 3)
    if reader_writer is None:
        w.close()
    return head


async def _open_raw(port: int):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    head = await _upgrade(port, reader_writer=(r, w))
    assert head.startswith(b"HTTP/1.1 101")
    return r, w


def _frame(payload: bytes, opcode: int = 0x2, masked: bool = True, fin: bool = True) -> bytes:
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    mbit = 0x80 if masked else 0
    if n < 126:
        head += bytes([mbit | n])
    elif n < 65536:
        head += bytes([mbit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([mbit | 127]) + struct.pack("!Q", n)
    if not masked:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


async def _read_frames_until_close(r) -> list[tuple[int, bytes]]:
    frames = []
    while True:
        try:
            b0, b1 = await asyncio.wait_for(r.readexactly(2), 3)
        except asyncio.IncompleteReadError:
            return frames
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", await r.readexactly(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", await r.readexactly(8))[0]
        frames.append((b0 & 0x0F, await r.readexactly(n)))
        if b0 & 0x0F == 0x8:
            return frames


def _close_code(frames) -> tuple[int, str]:
    assert frames and frames[-1][0] == 0x8, frames
    payload = frames[-1][1]
    return struct.unpack("!H", payload[:2])[0], payload[2:].decode()


async def test_unmasked_client_frame_closes_with_1002():
    async with running_server(websocket=_ws()) as s:
        r, w = await _open_raw(s.websocket_port)
        w.write(_frame(b"PING\r\n", masked=False))
        code, _ = _close_code(await _read_frames_until_close(r))
        assert code == 1002
        assert await asyncio.wait_for(r.read(), 2) == b""
        w.close()
        # others unaffected
        nc = await nats.connect(f"ws://127.0.0.1:{s.websocket_port}", allow_reconnect=False)
        assert await _echo_roundtrip(nc) == b"HELLO"
        await nc.close()


async def test_garbage_frames_and_oversized_control_frames_close_with_1002():
    async with running_server(websocket=_ws()) as s:
        r, w = await _open_raw(s.websocket_port)
        w.write(bytes([0x83, 0x80]) + os.urandom(4))  # reserved opcode 3
        assert _close_code(await _read_frames_until_close(r))[0] == 1002
        w.close()
        r, w = await _open_raw(s.websocket_port)
        w.write(_frame(b"x" * 200, opcode=0x9))  # ping with a 200-byte payload (max 125)
        assert _close_code(await _read_frames_until_close(r))[0] == 1002
        w.close()
        r, w = await _open_raw(s.websocket_port)
        w.write(_frame(b"\xff\xfe", opcode=0x1))  # text frame that is not UTF-8
        assert _close_code(await _read_frames_until_close(r))[0] == 1007
        w.close()


async def test_frame_larger_than_max_pending_closes_with_1009():
    async with running_server(websocket=_ws(), max_pending=64 * 1024) as s:
        r, w = await _open_raw(s.websocket_port)
        await _read_one(r)  # INFO
        # A frame announcing 1 MiB; its first 64 KiB + 1 bytes (PINGs, answered as they stream
        # in) arrive, and one byte over max_pending closes the connection.
        key = os.urandom(4)
        body = (b"PING\r\n" * 11000)[: 64 * 1024 + 1]
        w.write(
            bytes([0x82, 0x80 | 127])
            + struct.pack("!Q", 1 << 20)
            + key
            + bytes(b ^ key[i % 4] for i, b in enumerate(body))
        )
        frames = await _read_frames_until_close(r)
        assert _close_code(frames)[0] == 1009
        w.close()


async def test_max_payload_violation_closes_with_1009_after_the_err():
    async with running_server(websocket=_ws(), max_payload=1024) as s:
        r, w = await _open_raw(s.websocket_port)
        w.write(_frame(b'CONNECT {"verbose":false}\r\nPUB x 5000\r\n'))
        frames = await _read_frames_until_close(r)
        data = b"".join(p for op, p in frames if op == 0x2)
        assert b"-ERR 'Maximum Payload Violation'" in data
        assert _close_code(frames) == (1009, "Maximum Payload Exceeded")
        w.close()


async def test_ping_frames_are_answered_and_client_close_is_echoed():
    async with running_server(websocket=_ws()) as s:
        r, w = await _open_raw(s.websocket_port)
        await _read_one(r)  # INFO
        w.write(_frame(b"hi", opcode=0x9))
        assert await _read_one(r) == (0xA, b"hi")
        w.write(_frame(struct.pack("!H", 1000) + b"bye", opcode=0x8))
        op, payload = await _read_one(r)
        assert op == 0x8 and struct.unpack("!H", payload[:2])[0] == 1000
        assert await asyncio.wait_for(r.read(), 2) == b""
        await asyncio.sleep(0.05)
        assert not s.clients
        w.close()


async def _read_one(r) -> tuple[int, bytes]:
    b0, b1 = await asyncio.wait_for(r.readexactly(2), 3)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack("!H", await r.readexactly(2))[0]
    return b0 & 0x0F, await r.readexactly(n)


async def test_http_garbage_and_bad_upgrades_get_400():
    async with running_server(websocket=_ws()) as s:
        for req in (
            b"hello garbage\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
        ):
            r, w = await asyncio.open_connection("127.0.0.1", s.websocket_port)
            w.write(req)
            resp = await asyncio.wait_for(r.read(), 3)
            assert resp.startswith(b"HTTP/1.1 400"), resp
            w.close()
        assert not s.clients


async def test_origin_checks():
    opts = _ws(allowed_origins=["https://app.example.com"])
    async with running_server(websocket=opts) as s:
        assert (await _upgrade(s.websocket_port, "Origin: https://app.example.com\r\n")).startswith(b"HTTP/1.1 101")
        assert (await _upgrade(s.websocket_port, "Origin: https://evil.example.com\r\n")).startswith(b"HTTP/1.1 403")
        assert (await _upgrade(s.websocket_port, "Origin: http://app.example.com\r\n")).startswith(b"HTTP/1.1 403")
        assert (await _upgrade(s.websocket_port)).startswith(b"HTTP/1.1 101")  # no Origin: not a browser
    async with running_server(websocket=_ws(same_origin=True)) as s:
        port = s.websocket_port
        assert (await _upgrade(port, f"Origin: http://127.0.0.1:{port}\r\n")).startswith(b"HTTP/1.1 101")
        assert (await _upgrade(port, "Origin: http://127.0.0.1:1\r\n")).startswith(b"HTTP/1.1 403")


async def test_handshake_timeout_drops_idle_upgrade():
    from natsd.clock import ManualClock

    clock = ManualClock()
    async with running_server(websocket=_ws(handshake_timeout_ns=1_000_000_000), clock=clock) as s:
        r, w = await asyncio.open_connection("127.0.0.1", s.websocket_port)
        w.write(b"GET / HTTP/1.1\r\n")
        await asyncio.sleep(0.05)
        clock.advance(1_100_000_000)
        assert await asyncio.wait_for(r.read(), 2) == b""
        w.close()


async def test_server_shutdown_sends_going_away():
    async with running_server(websocket=_ws()) as s:
        r, w = await _open_raw(s.websocket_port)
        await _read_one(r)  # INFO
        w.write(_frame(b'CONNECT {"verbose":false}\r\nPING\r\n'))
        assert await _read_one(r) == (0x2, b"PONG\r\n")
        await s.shutdown()
        frames = await _read_frames_until_close(r)
        assert _close_code(frames) == (1001, "Server Shutdown")
        w.close()


async def test_x_forwarded_for_becomes_the_client_ip():
    async with running_server(websocket=_ws()) as s:
        r, w = await asyncio.open_connection("127.0.0.1", s.websocket_port)
        await _upgrade(s.websocket_port, "X-Forwarded-For: 203.0.113.7, 10.0.0.1\r\n", reader_writer=(r, w))
        op, info = await _read_one(r)
        assert json.loads(info[5:])["client_ip"] == "203.0.113.7"
        assert [c.ip for c in s.clients.values()] == ["203.0.113.7"]
        from natsd.server.monitoring.endpoints import MonitorServer

        [c] = MonitorServer(s).connz({})["connections"]
        assert (c["type"], c["ip"]) == ("websocket", "203.0.113.7") and "tls_version" not in c
        w.close()


async def test_jwt_cookie_is_read_from_the_upgrade_and_offered_as_connect_jwt(monkeypatch):
    seen = []
    async with running_server(websocket=_ws(jwt_cookie="nats_jwt"), username="u", password="p") as s:
        real = s.auth.authenticate
        monkeypatch.setattr(
            s.auth, "authenticate", lambda opts, nonce="": seen.append(opts.get("jwt")) or real(opts, nonce)
        )
        r, w = await asyncio.open_connection("127.0.0.1", s.websocket_port)
        await _upgrade(s.websocket_port, "Cookie: theme=dark; nats_jwt=eyJ0eXAi.abc.def\r\n", reader_writer=(r, w))
        await _read_one(r)  # INFO
        w.write(_frame(b'CONNECT {"verbose":false,"user":"u","pass":"p"}\r\nPING\r\n'))
        assert await _read_one(r) == (0x2, b"PONG\r\n")
        w.close()
    assert seen == ["eyJ0eXAi.abc.def"]
