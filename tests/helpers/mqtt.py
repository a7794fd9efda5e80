"""MQTT test helpers: one script against nats-server (subprocess) and natsd (in process).

``await mqtt_side_by_side(tmp_path, script, conf="...")`` starts nats-server with ``conf`` plus an
``mqtt { port }`` and a JetStream store, runs ``script(Target)`` in a worker thread (paho and raw
sockets block), stops it; then the same with an in-process natsd built from the same config text;
and returns ``(expected, got)``.

A script receives a :class:`Target` (``mqtt_port``, ``nats_url``) and uses :class:`Paho` (a paho
client that records what it receives) or :func:`raw_connect` (a socket that speaks the codec's
packets, to see the exact bytes a server answers).
"""

from __future__ import annotations

import asyncio
import queue
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from natsd.config.options import options_from_tree
from natsd.config.parser import parse
from natsd.protocol import mqtt as mp

__all__ = [
    "Target",
    "Paho",
    "raw_connect",
    "recv_exact",
    "mqtt_side_by_side",
    "closed_within",
    "natsd_options",
    "wait_tcp",
]


@dataclass
class Target:
    mqtt_port: int
    nats_url: str
    kind: str
    http_port: int = 0


class Paho:
    """A paho-mqtt 3.1.1 client with its network loop in a thread; ``messages`` is a queue of
    ``(topic, payload, qos, retain)``."""

    def __init__(
        self,
        t: Target,
        client_id: str,
        *,
        clean: bool = True,
        username: str | None = None,
        password: str | None = None,
        will: tuple | None = None,
        keepalive: int = 30,
        ws_port: int = 0,
        ca_file: str = "",
        cert: tuple[str, str] | None = None,
    ) -> None:
        import paho.mqtt.client as mqtt

        self.messages: queue.Queue = queue.Queue()
        self.connack: queue.Queue = queue.Queue()
        self.subacks: queue.Queue = queue.Queue()
        self.disconnected: queue.Queue = queue.Queue()
        c = self.c = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=client_id,
            clean_session=clean,
            protocol=mqtt.MQTTv311,
            reconnect_on_failure=False,
            transport="websockets" if ws_port else "tcp",
        )
        if ws_port:
            c.ws_set_options(path="/mqtt")
        if ca_file:
            c.tls_set(ca_certs=ca_file, certfile=cert[0] if cert else None, keyfile=cert[1] if cert else None)
        if username is not None:
            c.username_pw_set(username, password)
        if will is not None:
            c.will_set(*will)
        c.on_message = lambda cl, u, m: self.messages.put((m.topic, m.payload, m.qos, bool(m.retain)))
        c.on_connect = lambda cl, u, flags, rc, props=None: self.connack.put((rc.value, bool(flags.session_present)))
        c.on_subscribe = lambda cl, u, mid, rcs, props=None: self.subacks.put([r.value for r in rcs])
        c.on_disconnect = lambda cl, u, flags, rc, props=None: self.disconnected.put(rc.value)
        c.connect("127.0.0.1", ws_port or t.mqtt_port, keepalive)
        c.loop_start()

    def wait_connack(self, timeout: float = 5) -> tuple[int, bool]:
        return self.connack.get(timeout=timeout)

    def subscribe(self, *filters: tuple[str, int], timeout: float = 5) -> list[int]:
        self.c.subscribe(list(filters))
        return self.subacks.get(timeout=timeout)

    def publish(self, topic: str, payload: bytes, qos: int = 0, retain: bool = False, timeout: float = 5) -> None:
        info = self.c.publish(topic, payload, qos=qos, retain=retain)
        info.wait_for_publish(timeout)

    def received(self, n: int, timeout: float = 5) -> list[tuple]:
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < n:
            out.append(self.messages.get(timeout=max(0.01, deadline - time.monotonic())))
        return out

    def quiet(self, wait: float = 0.3) -> list[tuple]:
        """What arrives within ``wait`` seconds (expected: nothing)."""
        time.sleep(wait)
        out = []
        while not self.messages.empty():
            out.append(self.messages.get_nowait())
        return out

    def disconnect(self) -> None:
        """DISCONNECT, and wait until the server has closed the connection (so what the script
        does next happens after the server knows the client is gone)."""
        self.c.disconnect()
        try:
            self.disconnected.get(timeout=5)
        finally:
            self.c.loop_stop()
        time.sleep(0.1)

    def drop(self) -> None:
        """Close the socket without DISCONNECT (an abrupt close: the will is published)."""
        self.c.loop_stop()
        sock = self.c.socket()
        if sock is not None:
            sock.close()


def raw_connect(t: Target, data: bytes) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", t.mqtt_port), timeout=5)
    s.sendall(data)
    return s


def recv_exact(s: socket.socket, n: int, timeout: float = 5) -> bytes:
    s.settimeout(timeout)
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf


def closed_within(s: socket.socket, timeout: float) -> bool:
    """True when the server closes ``s`` within ``timeout`` seconds (reading discards data)."""
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(4096):
                return True
    except socket.timeout:
        return False
    except OSError:
        return True
    finally:
        s.close()


def natsd_options(conf: str, mqtt_port: int, store_dir: str, mqtt_extra: str = ""):
    conf = conf.replace("jetstream: enabled\n", "")
    text = (
        f'jetstream {{ store_dir: "{store_dir}" }}\nserver_name: mq\n{conf}\n'
        f"mqtt {{ port: {mqtt_port}\n{mqtt_extra} }}\n"
    )
    o = options_from_tree(parse(text, "mqtt-test.conf", env={}))
    o.host = "127.0.0.1"
    o.port = 0
    return o


async def mqtt_side_by_side(
    workdir: Any, script: Callable[[Target], Any], conf: str = "", mqtt_extra: str = ""
) -> tuple[Any, Any]:
    from tests.helpers.inproc import running_server
    from tests.helpers.servers import free_port, start_server

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    loop = asyncio.get_running_loop()
    port = free_port()
    cfg = workdir / "ref.conf"
    sd = tempfile.mkdtemp(dir=workdir)
    cfg.write_text(f"server_name: ref\n{conf}\nmqtt {{ port: {port}\n{mqtt_extra} }}\n")
    hport = free_port()
    ref = start_server("reference", workdir, "-m", str(hport), config=cfg, store_dir=sd)
    try:
        wait_tcp(port)
        expected = await loop.run_in_executor(None, script, Target(port, ref.url, "reference", hport))
    finally:
        ref.stop()
    port = free_port()
    opts = natsd_options(conf, port, tempfile.mkdtemp(dir=workdir), mqtt_extra)
    opts.http_port = free_port()
    async with running_server(options=opts) as server:
        got = await loop.run_in_executor(
            None, script, Target(server.mqtt.port, server.client_url, "natsd", server.http_port)
        )
    return expected, got


def wait_tcp(port: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"MQTT port {port} did not open")


# re-exported for scripts that build packets by hand
packets = mp
