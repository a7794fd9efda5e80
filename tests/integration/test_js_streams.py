"""Every stream API call through the in-process server with a real nats-py client: success and
error paths, compared with the reference's JSON shapes."""

from __future__ import annotations

import json

import nats
import pytest
from nats.js.api import StreamConfig
from nats.js.errors import NotFoundError, ServerError

from tests.helpers.inproc import running_server, server_and_client

pytestmark = pytest.mark.integration

T = "io.nats.jetstream.api.v1."


async def req(nc, subject: str, body=b"", timeout: float = 1.0):
    if isinstance(body, dict):
        body = json.dumps(body).encode()
    msg = await nc.request(subject, body, timeout=timeout)
    return json.loads(msg.data)


async def test_stream_lifecycle_with_nats_py(tmp_path):
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        js = nc.jetstream()
        info = await js.add_stream(name="ORDERS", subjects=["orders.>"])
        assert info.config.name == "ORDERS" and info.config.max_msgs == -1
        ack = await js.publish("orders.1", b"hello", headers={"H1": "v1"})
        assert (ack.stream, ack.seq) == ("ORDERS", 1)
        ack = await js.publish("orders.2", b"world")
        assert ack.seq == 2
        si = await js.stream_info("ORDERS", subjects_filter=">")
        assert si.state.messages == 2 and si.state.subjects == {"orders.1": 1, "orders.2": 1}
        msg = await js.get_msg("ORDERS", 1)
        assert msg.data == b"hello" and msg.headers["H1"] == "v1" and msg.subject == "orders.1"
        last = await js.get_last_msg("ORDERS", "orders.2")
        assert last.seq == 2
        assert await js.find_stream_name_by_subject("orders.x") == "ORDERS"
        names = await js.streams_info()
        assert [s.config.name for s in names] == ["ORDERS"]
        await js.update_stream(StreamConfig(name="ORDERS", subjects=["orders.>"], max_msgs=100))
        assert (await js.stream_info("ORDERS")).config.max_msgs == 100
        assert await js.delete_msg("ORDERS", 1)
        with pytest.raises(NotFoundError):
            await js.get_msg("ORDERS", 1)
        assert await js.purge_stream("ORDERS")
        si = await js.stream_info("ORDERS")
        assert (si.state.messages, si.state.first_seq, si.state.last_seq) == (0, 3, 2)
        account = await js.account_info()
        assert account.streams == 1
        assert await js.delete_stream("ORDERS")
        with pytest.raises(NotFoundError):
            await js.stream_info("ORDERS")


async def test_api_error_envelopes_and_unknown_subjects(tmp_path):
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        out = await req(nc, "$JS.API.STREAM.INFO.NOPE")
        assert out == {
            "type": T + "stream_info_response",
            "error": {"code": 404, "err_code": 10059, "description": "stream not found"},
            "total": 0,
            "offset": 0,
            "limit": 0,
        }
        out = await req(nc, "$JS.API.STREAM.CREATE.S1", {"name": "S2"})
        assert out["error"]["err_code"] == 10056
        out = await req(nc, "$JS.API.STREAM.CREATE.S1", {"name": "S1", "num_replicas": 3})
        assert out["error"] == {
            "code": 500,
            "err_code": 10074,
            "description": "replicas > 1 not supported in non-clustered mode",
        }
        await req(nc, "$JS.API.STREAM.CREATE.S1", {"name": "S1", "subjects": ["s1.>"]})
        out = await req(nc, "$JS.API.STREAM.CREATE.S2", {"name": "S2", "subjects": ["s1.a"]})
        assert out["error"]["err_code"] == 10065
        out = await req(nc, "$JS.API.STREAM.MSG.GET.S1", {"seq": 9})
        assert out["error"]["err_code"] == 10037
        out = await req(nc, "$JS.API.STREAM.PURGE.S1", {"seq": 1, "keep": 1})
        assert out["error"]["err_code"] == 10003 and out["purged"] == 0
        # unknown API subjects: no reply at all (timeout), not an error
        with pytest.raises(nats.errors.TimeoutError):
            await nc.request("$JS.API.FOO", b"", timeout=0.3)
        with pytest.raises(nats.errors.TimeoutError):
            await nc.request("$JS.API.STREAM.NOPE", b"", timeout=0.3)
        # a subject no stream captures: no responders
        with pytest.raises(nats.errors.NoRespondersError):
            await nc.request("nostream.here", b"", timeout=1)
        with pytest.raises(ServerError):
            await nc.jetstream().add_stream(name="BAD", subjects=["a", "a"])


async def test_direct_get_both_forms(tmp_path):
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        await req(nc, "$JS.API.STREAM.CREATE.KV", {"name": "KV", "subjects": ["kv.>"], "allow_direct": True})
        await req(nc, "$JS.API.STREAM.CREATE.ND", {"name": "ND", "subjects": ["nd.>"]})
        js = nc.jetstream()
        await js.publish("kv.a", b"one")
        await js.publish("kv.a", b"two")
        m = await nc.request("$JS.API.DIRECT.GET.KV", b'{"seq":1}', timeout=1)
        assert m.data == b"one" and m.headers["Nats-Sequence"] == "1" and m.headers["Nats-Stream"] == "KV"
        m = await nc.request("$JS.API.DIRECT.GET.KV.kv.a", b"", timeout=1)
        assert m.data == b"two" and m.headers["Nats-Subject"] == "kv.a"
        m = await nc.request("$JS.API.DIRECT.GET.KV", b'{"seq":99}', timeout=1)
        assert m.headers.get("Status") == "404"
        with pytest.raises(nats.errors.NoRespondersError):
            await nc.request("$JS.API.DIRECT.GET.ND", b'{"seq":1}', timeout=1)
        with pytest.raises(nats.errors.NoRespondersError):
            await nc.request("$JS.API.DIRECT.GET.NOPE.x", b"", timeout=1)
        got = await js.get_msg("KV", seq=2, direct=True)
        assert got.data == b"two"


async def test_names_list_paging_and_filter(tmp_path):
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        for n in ("C", "A", "B"):
            await req(
                nc, f"$JS.API.STREAM.CREATE.{n}", {"name": n, "subjects": [n.lower() + ".>"], "storage": "memory"}
            )
        out = await req(nc, "$JS.API.STREAM.NAMES", {"subject": "b.x"})
        assert out == {"type": T + "stream_names_response", "total": 1, "offset": 0, "limit": 1024, "streams": ["B"]}
        out = await req(nc, "$JS.API.STREAM.LIST", {"offset": 2})
        assert (out["total"], out["offset"], out["limit"]) == (3, 2, 256)
        assert [s["config"]["name"] for s in out["streams"]] == ["C"]


async def test_streams_survive_restart(tmp_path):
    async with running_server(store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.client_url)
        js = nc.jetstream()
        await js.add_stream(name="DUR", subjects=["dur.>"])
        for i in range(10):
            await js.publish(f"dur.{i % 3}", f"m{i}".encode(), headers={"Nats-Msg-Id": f"id{i}"})
        await nc.close()
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        js = nc.jetstream()
        si = await js.stream_info("DUR")
        assert (si.state.messages, si.state.last_seq) == (10, 10)
        assert (await js.get_msg("DUR", 7)).data == b"m6"
        ack = await js.publish("dur.0", b"again", headers={"Nats-Msg-Id": "id3"})
        assert ack.duplicate and ack.seq == 4


async def test_key_value_bucket_operations(tmp_path):
    """nats-py KV on top of the stream layer: create (config echoed back), put/get (direct and
    not), create-if-absent / update with expected revisions, delete and purge (rollups)."""
    from nats.js.errors import KeyWrongLastSequenceError

    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        js = nc.jetstream()
        for direct in (True, False):
            name = f"B{int(direct)}"
            kv = await js.create_key_value(bucket=name, history=3, direct=direct)
            si = await js.stream_info(f"KV_{name}")
            assert si.config.allow_rollup_hdrs and si.config.deny_delete and si.config.max_msgs_per_subject == 3
            assert si.config.allow_direct is direct
            r1 = await kv.put("k", b"v1")
            r2 = await kv.update("k", b"v2", last=r1)
            assert r2 == r1 + 1
            with pytest.raises(KeyWrongLastSequenceError):
                await kv.update("k", b"v3", last=r1)
            with pytest.raises(KeyWrongLastSequenceError):
                await kv.create("k", b"again")
            entry = await kv.get("k")
            assert entry.value == b"v2" and entry.revision == r2
            await kv.create("new", b"n")
            await kv.delete("k")
            with pytest.raises(nats.js.errors.KeyNotFoundError):
                await kv.get("k")
            await kv.purge("new")
            st = (await js.stream_info(f"KV_{name}")).state
            # k: v1, v2 and its delete marker (history 3); "new": only the purge marker (rollup)
            assert (st.messages, st.last_seq) == (4, 5)


async def test_jsz_monitoring_endpoint(tmp_path):
    import asyncio
    import urllib.request

    async with server_and_client(store_dir=str(tmp_path), http_port=-1) as (server, nc):
        js = nc.jetstream()
        await js.add_stream(name="MON", subjects=["mon.>"])
        await js.publish("mon.a", b"x")

        def get(path: str) -> dict:
            with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}{path}", timeout=5) as r:
                return json.loads(r.read())

        out = await asyncio.to_thread(get, "/jsz")
        assert out["streams"] == 1 and out["messages"] == 1 and out["config"]["store_dir"].endswith("jetstream")
        assert "account_details" not in out
        out = await asyncio.to_thread(get, "/jsz?accounts=1&streams=1")
        detail = out["account_details"][0]
        assert detail["name"] == "$G" and detail["stream_detail"][0]["name"] == "MON"
        assert detail["stream_detail"][0]["state"]["messages"] == 1


async def test_mirror_and_source_through_the_server(tmp_path):
    import asyncio

    from nats.js.api import StreamSource

    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        js = nc.jetstream()
        await js.add_stream(name="ORIGIN", subjects=["origin.>"])
        for i in range(5):
            await js.publish(f"origin.{i % 2}", f"m{i}".encode())
        await js.add_stream(name="MIRROR", mirror=StreamSource(name="ORIGIN"))
        await js.add_stream(
            name="AGG", subjects=["agg.>"], sources=[StreamSource(name="ORIGIN", filter_subject="origin.1")]
        )
        await js.publish("origin.1", b"late")

        async def wait_for(name: str, n: int) -> None:
            for _ in range(100):
                if (await js.stream_info(name)).state.messages >= n:
                    return
                await asyncio.sleep(0.02)

        await wait_for("MIRROR", 6)
        await wait_for("AGG", 3)
        mi = await js.stream_info("MIRROR")
        assert (mi.state.messages, mi.state.last_seq) == (6, 6) and mi.mirror.name == "ORIGIN"
        m = await js.get_msg("MIRROR", 6)
        assert (m.subject, m.data) == ("origin.1", b"late")
        ai = await js.stream_info("AGG")
        assert ai.state.messages == 3 and [s.name for s in ai.sources] == ["ORIGIN"]
        last = await js.get_msg("AGG", 3)
        assert last.data == b"late" and last.headers["Nats-Stream-Source"] == "ORIGIN 6 origin.1 > origin.1"
