"""Every JetStream API subject answered under ``$JS.<domain>.API.`` (issue 25 item 1).

nats-server maps ``$JS.<domain>.API.>`` onto ``$JS.API.>`` (and ``$KV``/``$OBJ``) with subject
mappings, so whatever a stream or consumer subscribes itself (DIRECT.GET, CONSUMER.MSG.NEXT,
CONSUMER.RESET) answers under the prefix too, and a missing consumer gives "no responders".
One script drives every API route through the prefix against nats-server 2.15 and natsd, each
with ``jetstream { domain: D }``, and the transcripts must be equal; then a nats-server hub with
natsd as its leaf (``domain: EDGE``) pulls from a natsd consumer with ``jetstream(domain=...)``.
"""

from __future__ import annotations

import json
import tempfile

import nats
import pytest
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from natsd.config.options import JetStreamOptions, ServerOptions
from tests.helpers.inproc import running_server
from tests.helpers.servers import free_port, reference_binary, start_server
from tests.integration.test_leafnodes import (
    hub_config,
    leaf_options,
    linked,
    propagated,
    wait_for,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.reference,
    pytest.mark.timeout(90),
    pytest.mark.skipif(reference_binary() is None, reason="nats-server binary not available"),
]

D = "DOM"
P = f"$JS.{D}.API."


def _shape(msg) -> dict:
    """What must be equal in a reply: its type, error, and the few fields named below."""
    if msg.headers and msg.headers.get("Status"):
        return {"status": msg.headers.get("Status")}
    try:
        body = json.loads(msg.data)
    except ValueError:
        return {"data": msg.data.decode()}
    out = {"type": body.get("type")}
    if "error" in body:
        out["error"] = body["error"].get("err_code")
    for key in ("domain", "total", "streams", "consumers", "success", "purged", "paused"):
        if key in body and not isinstance(body[key], (list, dict)):
            out[key] = body[key]
    if "message" in body:
        out["seq"] = body["message"].get("seq")
    if "config" in body and isinstance(body["config"], dict):
        out["name"] = body["config"].get("name")
    if isinstance(body.get("delivered"), dict):
        out["delivered"] = body["delivered"].get("stream_seq")
    return out


async def _script(url: str) -> list:
    nc = await nats.connect(url)
    out: list = []

    async def req(suffix: str, body: object = b"", timeout: float = 2.0) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            msg = await nc.request(P + suffix, data, timeout=timeout)
        except NoRespondersError:
            out.append((suffix, "no responders"))
            return
        except NatsTimeout:
            out.append((suffix, "timeout"))
            return
        out.append((suffix, _shape(msg)))

    async def pull(suffix: str, body: bytes) -> nats.aio.msg.Msg:
        # Not nc.request: a pulled message shows the stored subject, not the inbox nats-py's
        # request multiplexer keys on.
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox, max_msgs=1)
        await nc.publish(P + suffix, body, reply=inbox)
        return await sub.next_msg(timeout=2)

    try:
        await req("INFO")
        await req("STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"], "allow_direct": True})
        await req("STREAM.UPDATE.S", {"name": "S", "subjects": ["s.>"], "allow_direct": True, "description": "d"})
        js = nc.jetstream(domain=D)
        for i in range(3):
            ack = await js.publish(f"s.{i}", b"m%d" % i)
            out.append(("pub", ack.seq, ack.domain))
        await req("STREAM.NAMES")
        await req("STREAM.LIST")
        await req("STREAM.INFO.S")
        await req("STREAM.MSG.GET.S", {"seq": 1})
        await req("STREAM.MSG.DELETE.S", {"seq": 3})
        # DIRECT.GET: the stream's own subscriptions, by sequence and by subject.
        m = await nc.request(P + "DIRECT.GET.S", b'{"seq": 2}', timeout=2)
        out.append(("DIRECT.GET.S", m.headers.get("Nats-Sequence"), m.data))
        m = await nc.request(P + "DIRECT.GET.S.s.0", b"", timeout=2)
        out.append(("DIRECT.GET.S.s.0", m.headers.get("Nats-Sequence"), m.data))
        await req("DIRECT.GET.NOPE", {"seq": 1}, timeout=1)

        await req(
            "CONSUMER.CREATE.S.C", {"stream_name": "S", "config": {"durable_name": "C", "ack_policy": "explicit"}}
        )
        await req(
            "CONSUMER.DURABLE.CREATE.S.D",
            {"stream_name": "S", "config": {"durable_name": "D", "ack_policy": "explicit"}},
        )
        await req("CONSUMER.CREATE.S", {"stream_name": "S", "config": {"ack_policy": "none"}})
        await req(
            "CONSUMER.CREATE.S.G",
            {
                "stream_name": "S",
                "config": {
                    "name": "G",
                    "ack_policy": "explicit",
                    "priority_policy": "pinned_client",
                    "priority_groups": ["A"],
                    "priority_timeout": 60_000_000_000,
                },
            },
        )
        await req("CONSUMER.NAMES.S")
        await req("CONSUMER.LIST.S")
        await req("CONSUMER.INFO.S.C")
        # CONSUMER.MSG.NEXT through the prefix: the consumer's own subscription.
        m = await pull("CONSUMER.MSG.NEXT.S.C", b'{"batch": 1}')
        out.append(("MSG.NEXT", m.subject, m.data))
        await m.ack()
        await req("CONSUMER.MSG.NEXT.S.NOPE", {"batch": 1}, timeout=1)
        # ... and as nats-py does it, fetch on a durable through jetstream(domain=...).
        psub = await js.pull_subscribe_bind("D", stream="S")
        got = await psub.fetch(2, timeout=2)
        out.append(("fetch", [x.data for x in got]))
        for x in got:
            await x.ack()
        await req("CONSUMER.RESET.S.D", {"seq": 1})
        await req("CONSUMER.RESET.S.NOPE", {"seq": 1}, timeout=1)
        await req("CONSUMER.INFO.S.D")
        # A pinned pull on G, then UNPIN through the prefix.
        m = await pull("CONSUMER.MSG.NEXT.S.G", b'{"batch": 1, "group": "A", "expires": 1000000000}')
        out.append(("pinned", m.headers.get("Nats-Pin-Id") is not None, m.data))
        await req("CONSUMER.UNPIN.S.G", {"group": "A"})
        await req("CONSUMER.UNPIN.S.G", {"group": "B"})
        await req("CONSUMER.PAUSE.S.C", {"pause_until": "2999-01-01T00:00:00Z"})
        await req("CONSUMER.PAUSE.S.C", {})
        await req("CONSUMER.LEADER.STEPDOWN.S.C", timeout=1)
        await req("STREAM.LEADER.STEPDOWN.S", timeout=1)
        await req("STREAM.PEER.REMOVE.S", {"peer": "x"}, timeout=1)
        await req("STREAM.SNAPSHOT.NOPE", {"deliver_subject": "snap.x"})
        await req("CONSUMER.DELETE.S.C")
        await req("STREAM.PURGE.S", {"keep": 1})
        await req("META.LEADER.STEPDOWN", timeout=1)
        await req("NOT.MAPPED", timeout=1)
        # $KV and $OBJ views through the prefix.
        kv = await js.create_key_value(bucket="B")
        await kv.put("k", b"v1")
        out.append(("kv", (await kv.get("k")).value))
        ob = await js.create_object_store(bucket="O")
        await ob.put("f", b"x" * 300)
        out.append(("obj", (await ob.get("f")).data))
        await req("STREAM.DELETE.S")
        await req("STREAM.INFO.S")
    finally:
        await nc.close()
    return out


async def test_every_api_route_answers_under_the_domain_prefix_as_nats_server(tmp_path):
    conf = tmp_path / "ref.conf"
    conf.write_text(f'jetstream {{ store_dir: "{tmp_path}/ref-js", domain: {D} }}\n')
    ref = start_server("reference", tmp_path, config=conf, jetstream=False)
    try:
        expected = await _script(ref.url)
    finally:
        ref.stop()
    opts = ServerOptions(host="127.0.0.1", port=0, http_port=-1)
    opts.jetstream = JetStreamOptions(enabled=True, store_dir=tempfile.mkdtemp(dir=tmp_path), domain=D)
    async with running_server(options=opts) as server:
        got = await _script(server.client_url)
    diffs = [(e, g) for e, g in zip(expected, got) if e != g]
    assert not diffs and len(got) == len(expected), diffs
    # The script reached the consumers' own subjects (not only the API table).
    assert ("CONSUMER.MSG.NEXT.S.NOPE", "no responders") in got
    assert any(e[0] == "MSG.NEXT" and e[2] == b"m0" for e in got)


async def test_hub_client_pulls_from_a_natsd_leaf_consumer_by_domain(tmp_path):
    """nats-server hub, natsd leaf with ``domain: EDGE``: a hub client creates a stream and a
    durable pull consumer on the leaf, publishes, fetches, acks and resets, all through
    ``$JS.EDGE.API.``."""
    lp = free_port()
    hub = start_server("reference", tmp_path, config=hub_config(tmp_path, lp, domain="HUB"), jetstream=False)
    try:
        async with running_server(options=leaf_options(lp, tmp_path, domain="EDGE")) as edge:
            await wait_for(lambda: linked(edge), what="leaf link")
            hub_nc = await nats.connect(hub.url)
            try:
                await propagated(hub_nc, "$JS.EDGE.API.INFO")
                js = hub_nc.jetstream(domain="EDGE")
                await js.add_stream(name="S", subjects=["edge.s"], allow_direct=True)
                await js.add_consumer("S", durable_name="DC", ack_policy="explicit")
                for i in range(3):
                    assert (await js.publish("edge.s", b"%d" % i)).domain == "EDGE"
                psub = await js.pull_subscribe_bind("DC", stream="S")
                msgs = await psub.fetch(3, timeout=5)
                assert [m.data for m in msgs] == [b"0", b"1", b"2"]
                for m in msgs:
                    await m.ack_sync(timeout=5)
                info = await js.consumer_info("S", "DC")
                assert info.ack_floor.stream_seq == 3 and info.num_pending == 0
                r = json.loads(
                    (await hub_nc.request("$JS.EDGE.API.CONSUMER.RESET.S.DC", b'{"seq": 2}', timeout=5)).data
                )
                assert r["type"] == "io.nats.jetstream.api.v1.consumer_reset_response" and "error" not in r
                again = await psub.fetch(1, timeout=5)
                assert again[0].data == b"1"
                m = await hub_nc.request("$JS.EDGE.API.DIRECT.GET.S", b'{"seq": 3}', timeout=5)
                assert m.data == b"2" and m.headers["Nats-Sequence"] == "3"
            finally:
                await hub_nc.close()
    finally:
        hub.stop()
