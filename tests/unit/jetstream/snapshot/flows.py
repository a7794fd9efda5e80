"""Helpers of the snapshot/restore tests: a stream to back up, a snapshot taken over FakePorts
(acknowledging chunks as a client does), an upload into a second engine, a small archive."""

from __future__ import annotations

from natsd.jetstream.snapshot import END_ENTRY, MAGIC, encode_entry
from tests.helpers.fakeports import JsEnv


def setup_orders(env: JsEnv, n: int = 50, storage: str = "file") -> None:
    env.create("ORDERS", subjects=["orders.>"], storage=storage)
    for i in range(n):
        hdrs = {"X-I": str(i)} if i % 3 == 0 else None
        assert env.pub(f"orders.{i % 5}", f"m{i}".encode(), hdrs)["seq"] == i + 1
    env.api("$JS.API.STREAM.MSG.DELETE.ORDERS", {"seq": 10})
    env.api("$JS.API.STREAM.MSG.DELETE.ORDERS", {"seq": 11})
    out = env.api(
        "$JS.API.CONSUMER.CREATE.ORDERS.C1",
        {"stream_name": "ORDERS", "config": {"durable_name": "C1", "ack_policy": "explicit"}},
    )
    assert "error" not in out, out


def take_snapshot(env: JsEnv, chunk_size: int = 1024, ack: bool = True, **extra) -> tuple[dict, list, bytes]:
    inbox = env.ports.client_subscribe("backup.inbox")
    reply = env.api(
        "$JS.API.STREAM.SNAPSHOT.ORDERS", {"deliver_subject": "backup.inbox", "chunk_size": chunk_size, **extra}
    )
    data = bytearray()
    seen = 0
    for _ in range(10_000):
        env.clock.run_soon()
        new = inbox.msgs[seen:]
        seen = len(inbox.msgs)
        for m in new:
            if m.payload:
                data += m.payload
                if m.reply and ack:
                    env.ports.publish(m.reply, "", None, b"")
        if inbox.msgs and inbox.msgs[-1].status is not None:
            break
        if not new and not ack:
            break
    return reply, inbox.msgs, bytes(data)


def upload_restore(env2: JsEnv, meta: dict, data: bytes, chunk: int = 700) -> dict:
    out = env2.api("$JS.API.STREAM.RESTORE.ORDERS", {"config": meta["config"], "state": meta["state"]})
    assert out["type"] == "io.nats.jetstream.api.v1.stream_restore_response", out
    deliver = out["deliver_subject"]
    assert deliver.startswith("$JS.SNAPSHOT.RESTORE.ORDERS.")
    for i in range(0, len(data), chunk):
        r = env2.ports.request(deliver, data[i : i + chunk])
        env2.clock.run_soon()
        acks = env2.replies(r)
        assert acks and acks[-1].payload == b"", acks
    r = env2.ports.request(deliver, b"")
    env2.clock.run_soon()
    return env2.replies(r)[-1].json()


def sample_archive() -> bytes:
    return (
        MAGIC
        + encode_entry(b"state.json", 1, 0, b"", b'{"first_seq":1}')
        + encode_entry(b"a.b", -3, 1, b"HH", b"body")
        + END_ENTRY
    )
