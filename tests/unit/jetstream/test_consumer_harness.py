"""A socket-free harness for consumer tests: FakePorts + ManualClock + a memory stream store
behind a minimal stream object that honours the streams/consumers contract (retention hooks,
workqueue filter checks, max_consumers). Other ``test_consumer*`` modules import it.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from natsd.clock import ManualClock
from natsd.jetstream import consumer_registry
from natsd.jetstream.api import ROUTES
from natsd.jetstream.api.router import ApiDispatcher
from natsd.jetstream.consumer import ConsumerHub
from natsd.jetstream.config.consumer_config import ConsumerConfig
from natsd.jetstream.errors import ApiErrors
from natsd.jetstream.manager import ApiStats
from natsd.jetstream.wire import dumps
from natsd.jetstream.config.models import StreamConfig
from natsd.store.base import MsgNotFound, StoreConfig, StoreEOF
from natsd.store.memory import MemoryStreamStore
from natsd.subjects.tokens import subjects_collide
from tests.helpers.fakeports import FakePorts

SEC = 1_000_000_000
MS = 1_000_000


class DeliverPorts(FakePorts):
    """FakePorts plus ``deliver`` (route on one subject, show another), as natsd.server does."""

    def deliver(self, route: str, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        from tests.helpers.fakeports import Msg

        self.published.append(Msg(subject, reply, hdr, bytes(payload)))
        for sl in (self._sl, self._client_sl):
            r = sl.match(route)
            for sub in r.psubs:
                if not sub.closed:
                    sub.handler(subject, reply, hdr, payload)
            for members in r.qsubs:
                for sub in members:
                    if not sub.closed:
                        sub.handler(subject, reply, hdr, payload)
                        break


class FakeAccount:
    def __init__(self, ports: FakePorts, clock: ManualClock) -> None:
        self.name = "$G"
        self.ports = ports
        self.clock = clock
        self.limits = None
        self.streams: dict[str, Any] = {}
        self.api_stats = ApiStats()
        # the consumer API only (stream requests get no reply here)
        self.router = ApiDispatcher(r for r in ROUTES if r.pattern.startswith("$JS.API.CONSUMER."))
        self.engine = SimpleNamespace(domain="", ack_v2=False, default_max_consumers=-1)  # (no domain, v1 acks)
        self.advisories: list[tuple[str, dict]] = []
        ports.subscribe("$JS.API.>", self._on_api)
        self.consumer_hub = ConsumerHub(self)

    def _on_api(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        if subject.startswith("$JS.API.CONSUMER.MSG.NEXT.") or subject.startswith("$JS.API.CONSUMER.RESET."):
            return
        self.router.dispatch(self, subject, reply, hdr, payload)

    def send_advisory(self, subject: str, obj: dict) -> None:
        self.advisories.append((subject, obj))
        self.ports.publish(subject, "", None, dumps(obj))

    def lookup_stream(self, name: str) -> Any:
        s = self.streams.get(name)
        if s is None:
            raise ApiErrors.STREAM_NOT_FOUND()
        return s


class FakeStream:
    """Just enough of natsd.jetstream.stream.Stream for consumers."""

    def __init__(self, account: FakeAccount, config: StreamConfig, store: MemoryStreamStore) -> None:
        self.account = account
        self.name = config.name
        self.config = config
        self.store = store
        self.clock = account.clock
        self.consumers: dict[str, Any] = {}
        self.lseq = 0
        self.notified_seq = 0
        self.created_ns = account.clock.time_ns()  # the stream identity (natsd.jetstream.identity)

    def wake_on_new(self, c: Any) -> None:
        pass  # publish() below tells every consumer

    def consumer(self, name: str) -> Any:
        return self.consumers.get(name)

    def all_consumers(self) -> dict[str, Any]:
        return self.consumers

    def num_consumers(self) -> int:
        return len(self.consumers)

    def consumer_names(self) -> list[str]:
        return sorted(self.consumers)

    def add_consumer(self, c: Any) -> None:
        mc = self.config.max_consumers
        if c.name not in self.consumers and mc > 0 and len(self.consumers) >= mc:
            raise ApiErrors.MAXIMUM_CONSUMERS_LIMIT()
        self.consumers[c.name] = c

    def remove_consumer(self, name: str) -> None:
        self.consumers.pop(name, None)

    def _done(self, seq: int, subject: str) -> bool:
        return all(c.is_acked(seq) for c in self.consumers.values() if c.filter_matches(subject))

    def ack_processed(self, c: Any, seq: int) -> None:
        if self.config.retention == "workqueue":
            self.store.remove_msg(seq)
        elif self.config.retention == "interest":
            try:
                sm = self.store.load_msg(seq)
            except (MsgNotFound, StoreEOF):
                return
            if self._done(seq, sm.subject):
                self.store.remove_msg(seq)

    def check_workqueue_filters(self, new: list[str], exclude: str | None = None) -> None:
        if self.config.retention != "workqueue":
            return
        for name, c in self.consumers.items():
            if name == exclude:
                continue
            if not new and not c.filters:
                raise ApiErrors.CONSUMER_WQ_MULTIPLE_UNFILTERED()
            if not new or not c.filters or any(subjects_collide(a, b) for a in new for b in c.filters):
                raise ApiErrors.CONSUMER_WQ_CONSUMER_NOT_UNIQUE()

    def publish(self, subject: str, payload: bytes = b"", hdr: bytes | None = None) -> int:
        if self.config.retention == "interest" and not any(c.filter_matches(subject) for c in self.consumers.values()):
            seq = self.store.skip_msg()
        else:
            seq, _ = self.store.store_msg(subject, hdr, payload)
        self.lseq = self.notified_seq = seq
        for c in list(self.consumers.values()):
            c.on_new_messages(seq)
        return seq


class Harness:
    """Stream ``name`` over a memory store with consumers, driven by a ManualClock."""

    def __init__(
        self, name: str = "ORDERS", subjects: list[str] | None = None, store_dir: str | None = None, **cfg: Any
    ) -> None:
        self.clock = ManualClock()
        self.ports = DeliverPorts()
        self.account = FakeAccount(self.ports, self.clock)
        self.store_dir = store_dir
        self.scfg = StreamConfig(
            name=name,
            subjects=subjects or ["orders.>"],
            storage="file" if store_dir else "memory",
            num_replicas=1,
            **cfg,
        )
        self._open()

    def _open(self) -> None:
        scfg = self.scfg
        sc = StoreConfig(
            name=scfg.name,
            subjects=scfg.subjects,
            storage=scfg.storage,
            max_msgs_per_subject=scfg.max_msgs_per_subject or -1,
        )
        if self.store_dir:
            from natsd.store.file import FileStreamStore

            self.store = FileStreamStore(sc, self.clock, self.store_dir)
        else:
            self.store = MemoryStreamStore(sc, self.clock)
        self.stream = FakeStream(self.account, scfg, self.store)
        self.account.streams[scfg.name] = self.stream

    def restart(self) -> None:
        """Stop consumers and the (file) store, reopen it and recover the consumers."""
        for c in list(self.stream.consumers.values()):
            c.stop()
        self.store.stop()
        self._open()
        consumer_registry.recover_all(self.stream)
        self.clock.run_soon()

    # -- driving ---------------------------------------------------------------------------------
    def pub(self, subject: str, payload: bytes | str = b"", hdr: bytes | None = None, n: int = 1) -> int:
        if isinstance(payload, str):
            payload = payload.encode()
        seq = 0
        for _ in range(n):
            seq = self.stream.publish(subject, payload, hdr)
        self.clock.run_soon()
        return seq

    def consumer(self, **cfg: Any) -> Any:
        action = cfg.pop("action", "")
        c = consumer_registry.create(self.stream, ConsumerConfig.from_json(cfg), action)
        self.clock.run_soon()
        return c

    def api(self, subject: str, body: dict | bytes | str = b"") -> dict:
        inbox = self.ports.client_subscribe(self.ports.new_inbox())
        self.ports.request(subject, body, reply=inbox.subject)
        self.clock.run_soon()
        inbox.unsubscribe()
        assert inbox.msgs, f"no reply to {subject}"
        return inbox.last_json()

    def pull(
        self, consumer: str, body: dict | bytes | str | int = b"", inbox: Any = None, stream: str = "ORDERS"
    ) -> Any:
        """Send a MSG.NEXT with reply = a (new) client inbox; returns that ClientSub."""
        if inbox is None:
            inbox = self.ports.client_subscribe(self.ports.new_inbox())
        if isinstance(body, int):
            body = str(body)
        self.ports.request(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}", body, reply=inbox.subject)
        self.clock.run_soon()
        return inbox

    def ack(self, msg: Any, body: bytes = b"", reply: str = "") -> None:
        self.ports.publish(msg.reply, reply, None, body)
        self.clock.run_soon()

    def advance(self, ns: int) -> None:
        self.clock.advance(ns)
        self.clock.run_soon()

    def listen(self, subject: str) -> Any:
        return self.ports.client_subscribe(subject)


def data(sub: Any) -> list[Any]:
    """Messages of a ClientSub that are not status messages."""
    return [m for m in sub.msgs if m.status is None]


def statuses(sub: Any) -> list[str]:
    return [m.hdr.split(b"\r\n", 1)[0].decode() for m in sub.msgs if m.status is not None]


def ack_tokens(msg: Any) -> list[str]:
    return msg.reply.split(".")


# -- sanity tests of the harness itself --------------------------------------------------------


def test_harness_pull_delivers_with_v1_ack_subject() -> None:
    h = Harness()
    h.pub("orders.1", "one")
    h.pub("orders.2", "two")
    h.consumer(durable_name="C1", ack_policy="explicit")
    inbox = h.pull("C1", {"batch": 2, "expires": SEC})
    msgs = data(inbox)
    assert [m.payload for m in msgs] == [b"one", b"two"]
    assert [m.subject for m in msgs] == ["orders.1", "orders.2"]
    t = ack_tokens(msgs[0])
    assert t[:7] == ["$JS", "ACK", "ORDERS", "C1", "1", "1", "1"] and t[8] == "1"
    assert ack_tokens(msgs[1])[8] == "0"
    assert int(t[7]) == h.store.load_msg(1).ts


def test_harness_api_info_round_trip() -> None:
    h = Harness()
    h.pub("orders.1")
    r = h.api(
        "$JS.API.CONSUMER.CREATE.ORDERS.d1",
        {"stream_name": "ORDERS", "config": {"durable_name": "d1", "ack_policy": "explicit"}},
    )
    assert r["type"] == "io.nats.jetstream.api.v1.consumer_create_response"
    info = h.api("$JS.API.CONSUMER.INFO.ORDERS.d1")
    assert info["num_pending"] == 1 and info["config"]["max_waiting"] == 512
    assert json.dumps(info)  # plain JSON
