"""MQTT 5 (beyond nats-server, which refuses protocol level 5) with paho-mqtt's MQTTv5 client
against an in-process natsd: CONNACK properties, user properties <-> NATS headers, message
expiry <-> Nats-TTL, request/response <-> reply subjects, $share groups <-> queue groups, topic
aliases, reason codes, session expiry, no-local, DISCONNECT with will."""

from __future__ import annotations

import asyncio
import queue
import time

import pytest

from tests.helpers.inproc import running_server
from tests.helpers.mqtt import natsd_options
from tests.helpers.servers import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


class P5:
    def __init__(
        self,
        port: int,
        client_id: str,
        *,
        clean_start: bool = True,
        expiry: int | None = None,
        will: tuple | None = None,
    ) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        self.messages: queue.Queue = queue.Queue()
        self.connack: queue.Queue = queue.Queue()
        self.subacks: queue.Queue = queue.Queue()
        self.unsubacks: queue.Queue = queue.Queue()
        self.gone: queue.Queue = queue.Queue()
        c = self.c = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5, reconnect_on_failure=False
        )
        c.on_message = lambda cl, u, m: self.messages.put(m)
        c.on_connect = lambda cl, u, flags, rc, props: self.connack.put((rc.value, flags.session_present, props))
        c.on_subscribe = lambda cl, u, mid, rcs, props: self.subacks.put([r.value for r in rcs])
        c.on_unsubscribe = lambda cl, u, mid, rcs, props: self.unsubacks.put([r.value for r in rcs])
        c.on_disconnect = lambda cl, u, flags, rc, props: self.gone.put(rc.value)
        props = None
        if expiry is not None:
            props = Properties(PacketTypes.CONNECT)
            props.SessionExpiryInterval = expiry
        if will is not None:
            c.will_set(*will)
        c.connect("127.0.0.1", port, 30, clean_start=clean_start, properties=props)
        c.loop_start()

    def wait_connack(self):
        return self.connack.get(timeout=5)

    def sub(self, *filters, **opts):
        from paho.mqtt.subscribeoptions import SubscribeOptions

        self.c.subscribe([(f, SubscribeOptions(qos=q, **opts)) for f, q in filters])
        return self.subacks.get(timeout=5)

    def pub(self, topic: str, payload: bytes, qos: int = 0, **props):
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        p = None
        if props:
            p = Properties(PacketTypes.PUBLISH)
            for k, v in props.items():
                setattr(p, k, v)
        self.c.publish(topic, payload, qos, properties=p).wait_for_publish(5)

    def got(self, n: int = 1, timeout: float = 5) -> list:
        return [self.messages.get(timeout=timeout) for _ in range(n)]

    def quiet(self, wait: float = 0.3) -> list:
        time.sleep(wait)
        out = []
        while not self.messages.empty():
            out.append(self.messages.get_nowait())
        return out

    def close(self, reason: int | None = None) -> None:
        if reason is not None:
            from paho.mqtt.reasoncodes import ReasonCode
            from paho.mqtt.packettypes import PacketTypes

            self.c.disconnect(reasoncode=ReasonCode(PacketTypes.DISCONNECT, identifier=reason))
        else:
            self.c.disconnect()
        try:
            self.gone.get(timeout=5)
        finally:
            self.c.loop_stop()
        time.sleep(0.1)


async def _run(tmp_path, script):
    port = free_port()
    opts = natsd_options("", port, str(tmp_path / "store"))
    async with running_server(options=opts) as server:
        return await asyncio.get_running_loop().run_in_executor(None, script, server.mqtt.port, server.client_url)


def _nats(url: str, fn):
    import nats

    async def main():
        nc = await nats.connect(url, allow_reconnect=False)
        try:
            return await fn(nc)
        finally:
            await nc.close()

    return asyncio.run(main())


async def test_connack_properties_and_assigned_client_id(tmp_path):
    def script(port, url):
        c = P5(port, "")
        rc, sp, props = c.wait_connack()
        c.close()
        return rc, sp, props.json()

    rc, sp, props = await _run(tmp_path, script)
    assert rc == 0 and not sp
    assert props["TopicAliasMaximum"] == 1024 and props["SharedSubscriptionAvailable"] == 1
    assert len(props["AssignedClientIdentifier"]) == 22


async def test_user_properties_and_expiry_both_ways(tmp_path):
    def script(port, url):
        sub = P5(port, "s")
        sub.wait_connack()
        sub.sub(("up/#", 1))
        pub = P5(port, "p")
        pub.wait_connack()

        async def nats_side(nc):
            ns = await nc.subscribe("up.>")
            await nc.flush()
            pub.pub("up/a", b"hello", 1, UserProperty=[("k1", "v1"), ("k2", "v2")], MessageExpiryInterval=60)
            m = await ns.next_msg(timeout=5)
            await nc.publish("up.b", b"from nats", headers={"Trace-Id": "t-1"})
            await nc.flush()
            return m.subject, dict(m.headers or {})

        nats_seen = _nats(url, nats_side)
        got = sorted(sub.got(2), key=lambda m: m.topic)
        sub.close()
        pub.close()
        return nats_seen, [(m.topic, m.payload, m.qos, m.properties.json()) for m in got]

    nats_seen, got = await _run(tmp_path, script)
    assert nats_seen == ("up.a", {"Nmqtt-Pub": "1", "k1": "v1", "k2": "v2", "Nats-TTL": "60s"})
    (t1, p1, q1, props1), (t2, p2, q2, props2) = got
    assert (t1, p1, q1) == ("up/a", b"hello", 1)
    assert props1["UserProperty"] == [["k1", "v1"], ["k2", "v2"]] or props1["UserProperty"] == [
        ("k1", "v1"),
        ("k2", "v2"),
    ]
    assert (t2, p2, q2) == ("up/b", b"from nats", 0)
    assert [tuple(x) for x in props2["UserProperty"]] == [("Trace-Id", "t-1")]


async def test_request_response_with_nats_and_between_mqtt5_clients(tmp_path):
    def script(port, url):
        responder = P5(port, "svc")
        responder.wait_connack()
        responder.sub(("svc/echo", 0))

        def serve():
            m = responder.got(1)[0]
            rt = m.properties.ResponseTopic
            corr = getattr(m.properties, "CorrelationData", None)
            kw = {"CorrelationData": corr} if corr else {}
            responder.pub(rt, b"echo:" + m.payload, 0, **kw)
            return rt, corr

        import threading

        seen = []
        th = threading.Thread(target=lambda: seen.append(serve()))
        th.start()

        async def ask(nc):
            r = await nc.request("svc.echo", b"ping", timeout=5)
            return r.data

        answer = _nats(url, ask)
        th.join(5)
        # MQTT 5 requester: response topic + correlation data round-trip
        req = P5(port, "req")
        req.wait_connack()
        req.sub(("resp/me", 0))
        th = threading.Thread(target=lambda: seen.append(serve()))
        th.start()
        req.pub("svc/echo", b"hi", 0, ResponseTopic="resp/me", CorrelationData=b"\x01corr")
        th.join(5)
        r = req.got(1)[0]
        responder.close()
        req.close()
        return answer, seen, (r.topic, r.payload, r.properties.CorrelationData)

    answer, seen, mqtt_answer = await _run(tmp_path, script)
    assert answer == b"echo:ping" and seen[0][0].startswith("_INBOX/")
    assert seen[1] == ("resp/me", b"\x01corr")
    assert mqtt_answer == ("resp/me", b"echo:hi", b"\x01corr")


async def test_shared_subscriptions_are_queue_groups(tmp_path):
    def script(port, url):
        a, b = P5(port, "wa"), P5(port, "wb")
        a.wait_connack()
        b.wait_connack()
        codes = a.sub(("$share/workers/jobs/#", 1)), b.sub(("$share/workers/jobs/#", 1))
        bad = a.sub(("$share/onlygroup", 0))
        p = P5(port, "boss")
        p.wait_connack()
        for i in range(20):
            p.pub(f"jobs/{i}", b"%d" % i, i % 2)  # QoS 0 and QoS 1 alternately
        time.sleep(1.0)
        ga, gb = a.quiet(0), b.quiet(0)
        for c in (a, b, p):
            c.close()
        return (
            codes,
            bad,
            sorted(int(m.payload) for m in ga + gb),
            (len(ga), len(gb)),
            sorted({(int(m.payload) % 2, m.qos) for m in ga + gb}),
        )

    codes, bad, got, split, qos = await _run(tmp_path, script)
    assert codes == ([1], [1])
    assert bad == [0x8F] and got == list(range(20))  # each message to one member of the group
    assert split[0] > 0 and split[1] > 0 and qos == [(0, 0), (1, 1)]


async def test_topic_alias_no_local_unsubscribe_reason(tmp_path):
    def script(port, url):
        c = P5(port, "al")
        c.wait_connack()
        c.sub(("alias/#", 0), noLocal=True)
        w = P5(port, "watcher")
        w.wait_connack()
        w.sub(("alias/#", 0))
        c.pub("alias/t", b"1", 0, TopicAlias=1)
        c.pub("", b"2", 0, TopicAlias=1)
        seen = [(m.topic, m.payload) for m in w.got(2)]
        own = c.quiet()
        c.c.unsubscribe(["alias/#", "never/subscribed"])
        unsub = c.unsubacks.get(timeout=5)
        c.close()
        w.close()
        return seen, own, unsub

    seen, own, unsub = await _run(tmp_path, script)
    assert seen == [("alias/t", b"1"), ("alias/t", b"2")] and own == [] and unsub == [0, 0x11]


async def test_session_expiry_and_disconnect_with_will(tmp_path):
    def script(port, url):
        out = {}
        s = P5(port, "dev5", clean_start=False, expiry=300)
        out["first"] = s.wait_connack()[:2]
        s.sub(("s5/#", 1))
        s.close()
        p = P5(port, "pub5")
        p.wait_connack()
        p.pub("s5/x", b"kept", 1)
        s = P5(port, "dev5", clean_start=False, expiry=0)
        out["resumed"] = s.wait_connack()[:2]
        out["backlog"] = [(m.topic, m.payload) for m in s.got(1, timeout=10)]
        s.close()  # expiry 0: the session ends now
        s = P5(port, "dev5", clean_start=False, expiry=0)
        out["after expiry 0"] = s.wait_connack()[:2]
        s.close()
        w = P5(port, "w5")
        w.wait_connack()
        w.sub(("lastwill", 0))
        d = P5(port, "dying", will=("lastwill", b"bye", 0, False))
        d.wait_connack()
        d.close(reason=0x04)  # DISCONNECT "with will message"
        out["will"] = [(m.topic, m.payload) for m in w.got(1)]
        w.close()
        p.close()
        return out

    out = await _run(tmp_path, script)
    assert out["first"] == (0, False) and out["resumed"] == (0, True)
    assert out["backlog"] == [("s5/x", b"kept")] and out["after expiry 0"] == (0, False)
    assert out["will"] == [("lastwill", b"bye")]


async def test_stored_message_expiry_and_will_delay(tmp_path):
    def script(port, url):
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        out = {}
        s = P5(port, "exp", clean_start=False, expiry=300)
        s.wait_connack()
        s.sub(("e/#", 1))
        s.close()
        p = P5(port, "ep")
        p.wait_connack()
        p.pub("e/short", b"expires", 1, MessageExpiryInterval=1)
        p.pub("e/long", b"stays", 1, MessageExpiryInterval=100)
        time.sleep(2.2)
        s = P5(port, "exp", clean_start=False, expiry=300)
        s.wait_connack()
        got = s.got(1, timeout=10)
        out["delivered"] = [(m.topic, m.payload) for m in got]
        out["expiry left"] = got[0].properties.MessageExpiryInterval
        out["nothing else"] = [m.topic for m in s.quiet(0.5)]
        s.close()
        # will delay: published that long after an abrupt close
        w = P5(port, "wd-watch")
        w.wait_connack()
        w.sub(("wd", 0))
        wp = Properties(PacketTypes.WILLMESSAGE)
        wp.WillDelayInterval = 1
        d = P5(port, "wd-dev", will=("wd", b"late will", 0, False, wp), expiry=10)
        d.wait_connack()
        d.c.loop_stop()
        d.c.socket().close()
        t0 = time.monotonic()
        out["will after delay"] = [(m.topic, m.payload) for m in w.got(1, timeout=5)]
        out["delay waited"] = time.monotonic() - t0 >= 0.8
        w.close()
        p.close()
        return out

    out = await _run(tmp_path, script)
    assert out["delivered"] == [("e/long", b"stays")] and 97 <= out["expiry left"] <= 100
    assert out["nothing else"] == [] and out["will after delay"] == [("wd", b"late will")] and out["delay waited"]
