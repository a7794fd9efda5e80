"""``feature_flags { js_ack_fc_v2: true }`` (nats-server 2.14+/2.15): consumers send the v2 ack
subject ``$JS.ACK.<domain or _>.<account hash>.<stream>.<consumer>...`` and the acks work;
``/varz`` reports the merged flags and ``jetstream.limits``, as nats-server 2.15.1."""

from __future__ import annotations

import asyncio
import json
import tempfile
import urllib.request

import nats
import pytest

from natsd.config.options import options_from_tree
from natsd.config.parser import parse
from tests.helpers.inproc import running_server
from tests.helpers.servers import free_port, reference_binary, start_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.reference,
    pytest.mark.timeout(60),
    pytest.mark.skipif(reference_binary() is None, reason="nats-server binary not available"),
]

CONF = 'http: {http}\njetstream {{ store_dir: "{sd}"{domain} }}\n{flags}'


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read()


async def _script(url: str, http: int) -> dict:
    nc = await nats.connect(url)
    out: dict = {}
    try:
        await nc.request("$JS.API.STREAM.CREATE.S", b'{"name": "S", "subjects": ["s.>"]}', timeout=5)
        await nc.request(
            "$JS.API.CONSUMER.CREATE.S.C",
            b'{"stream_name": "S", "config": {"durable_name": "C", "ack_policy": "explicit"}}',
            timeout=5,
        )
        for i in range(2):
            await nc.request("s.x", b"m%d" % i, timeout=5)
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        await nc.publish("$JS.API.CONSUMER.MSG.NEXT.S.C", b'{"batch": 2}', reply=inbox)
        replies = [(await sub.next_msg(timeout=5)).reply for _ in range(2)]
        toks = [r.split(".") for r in replies]
        for t in toks:
            t[-2] = "<ts>"  # the delivery time
        out["reply"] = [".".join(t) for t in toks]
        await nc.request(replies[0], b"+ACK", timeout=5)  # a v2 (or v1) ack subject works
        info = json.loads((await nc.request("$JS.API.CONSUMER.INFO.S.C", b"", timeout=5)).data)
        out["ack_floor"] = info["ack_floor"]["stream_seq"]
        # (in a thread: the in-process server runs on this loop)
        varz = json.loads(await asyncio.to_thread(_get, f"http://127.0.0.1:{http}/varz"))
        out["feature_flags"] = varz.get("feature_flags")
        out["limits"] = varz["jetstream"].get("limits")
    finally:
        await nc.close()
    return out


@pytest.mark.parametrize(
    "flags,domain",
    [
        ("feature_flags { js_ack_fc_v2: true, no_such_flag: true }", ""),
        ("feature_flags { js_ack_fc_v2: true }", ", domain: D"),
        ("", ""),
    ],
)
async def test_v2_ack_subjects_and_varz_as_nats_server(tmp_path, flags, domain):
    hp = free_port()
    conf = tmp_path / "ref.conf"
    conf.write_text(CONF.format(http=hp, sd=tmp_path / "ref-js", domain=domain, flags=flags))
    ref = start_server("reference", tmp_path, config=conf, jetstream=False)
    try:
        expected = await _script(ref.url, hp)
    finally:
        ref.stop()
    hp = free_port()
    opts = options_from_tree(
        parse(CONF.format(http=hp, sd=tempfile.mkdtemp(dir=tmp_path), domain=domain, flags=flags), "t.conf", env={})
    )
    opts.host, opts.port = "127.0.0.1", 0
    async with running_server(options=opts) as server:
        got = await _script(server.client_url, hp)
    assert expected["ack_floor"] == 1
    assert expected["reply"][0].startswith("$JS.ACK.D." if domain else "$JS.ACK._." if flags else "$JS.ACK.S.C.")
    assert got == expected
