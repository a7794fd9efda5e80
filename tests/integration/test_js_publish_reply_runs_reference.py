"""Bursts of asynchronous JetStream publishes (one subject, a fixed-width reply token each: what
nats.c, nats.go, nats.js and nats-py send) reach a stream as one run (parser ``OP_PUB_RRUN`` ->
``router.route_rrun`` -> ``Stream.process_rrun`` -> ``store_run``). Over real sockets, natsd
answers every message of a burst exactly as nats-server does: PubAcks in order, limit
refusals from the first refused message on, duplicates, no responders, a client subscriber
on the stream's subjects, and the stream then holds what nats-server's holds."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from natsd.jetstream.stream.core import Stream
from tests.helpers.inproc import side_by_side

pytestmark = [pytest.mark.integration, pytest.mark.reference, pytest.mark.timeout(120)]

_FRAME = re.compile(rb"(MSG|HMSG) (\S+) (\S+) (?:(\d+) )?(\d+)\r\n")


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.r, self.w = reader, writer
        self.buf = b""

    async def frames(self, n: int) -> list[tuple[str, bytes, object]]:
        """The next ``n`` MSG/HMSG frames as (subject, header block, JSON payload or raw bytes)."""
        out: list[tuple[str, bytes, object]] = []
        while len(out) < n:
            m = _FRAME.search(self.buf)
            if m is not None:
                hl = int(m.group(4) or 0) if m.group(1) == b"HMSG" else 0
                total = int(m.group(5))
                start = m.end()
                if len(self.buf) >= start + total + 2:
                    body = self.buf[start : start + total]
                    self.buf = self.buf[start + total + 2 :]
                    data = body[hl:]
                    try:
                        val: object = json.loads(data) if data else b""
                    except ValueError:
                        val = data
                    out.append((m.group(2).decode(), body[:hl], val))
                    continue
            chunk = await asyncio.wait_for(self.r.read(65536), 10)
            assert chunk, f"closed after {len(out)} of {n} frames"
            self.buf += chunk
        return out


def _burst(subject: bytes, first: int, n: int, payload: bytes = b"p" * 16, hdr: bytes = b"") -> bytes:
    if hdr:
        return b"".join(
            b"HPUB %s _INBOX.t.%08d %d %d\r\n%s%s\r\n" % (subject, i, len(hdr), len(hdr) + len(payload), hdr, payload)
            for i in range(first, first + n)
        )
    return b"".join(
        b"PUB %s _INBOX.t.%08d %d\r\n%s\r\n" % (subject, i, len(payload), payload) for i in range(first, first + n)
    )


def _id_burst(subject: bytes, first: int, n: int) -> bytes:
    """HPUBs each with its own Nats-Msg-Id (fixed width: one header length, so a run)."""
    return b"".join(
        _burst(subject, i, 1, b"v%05d" % i, b"NATS/1.0\r\nNats-Msg-Id: id-%08d\r\n\r\n" % i)
        for i in range(first, first + n)
    )


async def _api(c: _Conn, subject: str, body: dict) -> dict:
    data = json.dumps(body).encode()
    c.w.write(b"PUB %s _INBOX.t.api %d\r\n%s\r\n" % (subject.encode(), len(data), data))
    ((_, _, reply),) = await c.frames(1)
    assert isinstance(reply, dict)
    return reply


async def _observe(url: str) -> dict:
    host, port = url.removeprefix("nats://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    await reader.readline()  # INFO
    c = _Conn(reader, writer)
    writer.write(
        b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true,"protocol":1}\r\n'
        b"SUB _INBOX.t.* 1\r\nPING\r\n"
    )
    await reader.readuntil(b"PONG\r\n")
    out: dict = {}
    await _api(c, "$JS.API.STREAM.CREATE.A", {"name": "A", "subjects": ["a.>"]})
    await _api(c, "$JS.API.STREAM.CREATE.B", {"name": "B", "subjects": ["b.>"], "max_msgs": 5, "discard": "new"})
    await _api(c, "$JS.API.STREAM.CREATE.C", {"name": "C", "subjects": ["c.>"], "max_msgs": 7})
    # Plain bursts (one read, and one larger than a read), then limits, duplicates, no stream.
    writer.write(_burst(b"a.x", 0, 300))
    out["plain"] = await c.frames(300)
    writer.write(_burst(b"a.y", 300, 3000, b"q" * 100))
    out["big"] = await c.frames(3000)
    writer.write(_burst(b"b.x", 0, 20))
    out["discard_new"] = await c.frames(20)
    writer.write(_burst(b"c.x", 0, 20))
    out["max_msgs_old"] = await c.frames(20)
    writer.write(_burst(b"a.z", 0, 6, hdr=b"NATS/1.0\r\nNats-Msg-Id: same\r\n\r\n"))
    out["dups"] = await c.frames(6)
    # Distinct msg ids (the Spark sink's idempotent writes), then the same ids again: duplicates.
    writer.write(_id_burst(b"a.ids", 0, 400))
    out["ids"] = await c.frames(400)
    writer.write(_id_burst(b"a.ids", 390, 20))
    out["ids_again"] = await c.frames(20)
    writer.write(_burst(b"nobody.x", 0, 5))
    out["no_responders"] = await c.frames(5)
    for name in ("A", "B", "C"):
        info = await _api(c, f"$JS.API.STREAM.INFO.{name}", {})
        st = info["state"]
        out[f"state {name}"] = (st["messages"], st["bytes"], st["first_seq"], st["last_seq"], st["num_subjects"])
    writer.close()
    return out


async def test_bursts_of_async_publishes_are_answered_as_nats_server_does(tmp_path, monkeypatch):
    runs: list[int] = []
    real = Stream.process_rrun

    def process_rrun(self, subject, run):
        runs.append(len(run))
        real(self, subject, run)

    monkeypatch.setattr(Stream, "process_rrun", process_rrun)
    ref, got = await side_by_side(tmp_path, _observe)
    assert got.keys() == ref.keys()
    for k in ref:
        assert got[k] == ref[k], k
    assert ref["discard_new"][5][2]["error"]["err_code"] == 10077  # (the case is exercised)
    assert ref["dups"][1][2]["duplicate"] is True
    assert ref["ids_again"][9][2]["duplicate"] is True and "duplicate" not in ref["ids_again"][10][2]
    # natsd took the bursts as runs (the first message of each teaches the parser the shape)
    assert sum(runs) > 3000 and max(runs) > 100
