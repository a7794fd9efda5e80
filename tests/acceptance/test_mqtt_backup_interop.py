"""MQTT state moves between nats-server and natsd with a stream backup: a persistent session (its
subscription, its consumer and a QoS 1 message waiting for it) and a retained message, backed up
from one server with ``natsctl stream backup`` and restored into the other, carry on there."""

from __future__ import annotations

import pytest

from tests.helpers.cli import ok
from tests.helpers.mqtt import Paho, Target, wait_tcp
from tests.helpers.servers import free_port, reference_binary, start_server

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.reference,
    pytest.mark.timeout(180),
    pytest.mark.skipif(reference_binary() is None, reason="reference nats-server not installed"),
]

STREAMS = ("$MQTT_sess", "$MQTT_msgs", "$MQTT_rmsgs")


def _start(kind: str, tmp_path):
    mport = free_port()
    tmp_path.mkdir(parents=True, exist_ok=True)
    cfg = tmp_path / f"{kind}.conf"
    cfg.write_text(f"server_name: {kind}\nmqtt {{ port: {mport} }}\n")
    srv = start_server(kind, tmp_path, config=cfg, store_dir=tmp_path / f"{kind}-store")
    wait_tcp(mport)
    return srv, Target(mport, srv.url, kind)


@pytest.mark.parametrize("src_kind,dst_kind", [("reference", "natsd"), ("natsd", "reference")])
def test_sessions_and_retained_messages_move_with_a_backup(tmp_path, src_kind, dst_kind):
    src, st = _start(src_kind, tmp_path / "src")
    try:
        dev = Paho(st, "mover", clean=False)
        assert dev.wait_connack() == (0, False)
        dev.subscribe(("move/#", 1))
        dev.disconnect()
        pub = Paho(st, "mpub")
        pub.wait_connack()
        pub.publish("move/1", b"waiting for mover", 1)
        pub.publish("kept/1", b"retained", 1, retain=True)
        pub.disconnect()
        for s in STREAMS:
            ok(src.url, "stream", "backup", s, str(tmp_path / "bk" / s), "--no-progress")
    finally:
        src.stop()
    dst, dt = _start(dst_kind, tmp_path / "dst")
    try:
        for s in STREAMS:  # before any MQTT client: the streams do not exist there yet
            ok(dst.url, "stream", "restore", str(tmp_path / "bk" / s), "--no-progress")
        dev = Paho(dt, "mover", clean=False)
        assert dev.wait_connack() == (0, True)  # the session came along
        assert dev.received(1, timeout=45) == [("move/1", b"waiting for mover", 1, False)]
        dev.disconnect()
        other = Paho(dt, "fresh")
        other.wait_connack()
        other.subscribe(("kept/#", 0))
        assert other.received(1) == [("kept/1", b"retained", 0, True)]
        other.disconnect()
    finally:
        dst.stop()
