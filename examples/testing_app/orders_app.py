"""A small order-processing service, the subject of docs/testing.md's test suite.

* Orders arrive on ``orders.new`` into the work-queue stream ``ORDERS``.
* :class:`Worker` pulls them through the durable consumer ``worker``. An order it cannot handle is
  not acknowledged: JetStream redelivers it after the consumer's ``backoff`` (10 s, 1 min, 5 min).
* After ``max_deliver`` attempts the server gives up and emits a MAX_DELIVERIES advisory;
  :class:`DeadLetters` listens for it, copies the poison order into the ``DLQ`` stream (subject
  ``dlq.orders``) with why, and removes it from the work queue.
* The worker watches the KV bucket ``settings``: ``paused`` = ``"true"`` stops it taking orders,
  anything else resumes it.
* :func:`submit_order` publishes an order and says whether JetStream stored it.

Everything talks to any NATS server with JetStream through nats-py: natsd or nats-server.
"""

from __future__ import annotations

import asyncio
import json
from typing import Awaitable, Callable

import nats
from nats.js.api import ConsumerConfig, RetentionPolicy, StreamConfig
from nats.js.errors import APIError, NotFoundError

ORDERS = "ORDERS"
DURABLE = "worker"
BACKOFF = [10.0, 60.0, 300.0]  # seconds between attempts 1→2, 2→3, 3→4
MAX_DELIVER = 4
MAX_DELIVERIES_ADVISORY = f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{ORDERS}.{DURABLE}"


class PoisonOrder(Exception):
    """An order the worker can never process (it will be dead-lettered)."""


async def setup(js) -> None:
    """Streams, consumer and KV bucket the service needs (idempotent)."""
    await js.add_stream(StreamConfig(name=ORDERS, subjects=["orders.new"], retention=RetentionPolicy.WORK_QUEUE))
    await js.add_stream(StreamConfig(name="DLQ", subjects=["dlq.>"]))
    await js.add_consumer(ORDERS, ConsumerConfig(
        durable_name=DURABLE, ack_policy="explicit", ack_wait=BACKOFF[0], backoff=BACKOFF,
        max_deliver=MAX_DELIVER))
    await js.create_key_value(bucket="settings")


async def submit_order(js, order: dict) -> bool:
    """Publish an order; False when JetStream refused it (e.g. its storage is full)."""
    try:
        await js.publish("orders.new", json.dumps(order).encode(), timeout=2)
    except (APIError, nats.errors.TimeoutError, nats.errors.NoRespondersError):
        return False
    return True


class Worker:
    """Pulls orders and hands each to ``handle``; acks on success, leaves failures to redelivery."""

    def __init__(self, nc, handle: Callable[[dict], Awaitable[None]], *, fetch_timeout: float = 0.2) -> None:
        self.nc = nc
        self.js = nc.jetstream()
        self.handle = handle
        self.fetch_timeout = fetch_timeout
        self.enabled = asyncio.Event()
        self.enabled.set()
        self.attempts: dict[str, int] = {}
        self._tasks: list[asyncio.Task] = []
        self._watcher = None

    async def start(self) -> "Worker":
        self._sub = await self.js.pull_subscribe_bind(DURABLE, stream=ORDERS)
        kv = await self.js.key_value("settings")
        self._watcher = await kv.watch("paused")
        self._tasks = [asyncio.create_task(self._run()), asyncio.create_task(self._watch())]
        return self

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            await watcher.stop()

    async def _watch(self) -> None:
        async for entry in self._watcher:
            if entry is None:
                continue  # the end of the initial values
            if entry.value == b"true":
                self.enabled.clear()
            else:
                self.enabled.set()

    async def _run(self) -> None:
        while True:
            await self.enabled.wait()
            try:
                msgs = await self._sub.fetch(10, timeout=self.fetch_timeout)
            except (nats.errors.TimeoutError, nats.errors.ConnectionClosedError):
                continue
            except Exception:  # a reconnect in progress: try again shortly
                await asyncio.sleep(0.05)
                continue
            for m in msgs:
                if not self.enabled.is_set():
                    await m.nak()  # paused meanwhile: give it back at once
                    continue
                order = json.loads(m.data)
                self.attempts[order["id"]] = m.metadata.num_delivered
                try:
                    await self.handle(order)
                except Exception:
                    continue  # no ack: redelivered after the consumer's backoff
                await m.ack_sync()


class DeadLetters:
    """Moves orders the server gave up on (MAX_DELIVERIES advisory) to ``dlq.orders``."""

    def __init__(self, nc) -> None:
        self.nc = nc
        self.js = nc.jetstream()
        self.moved: list[int] = []

    async def start(self) -> "DeadLetters":
        self._sub = await self.nc.subscribe(MAX_DELIVERIES_ADVISORY, cb=self._on_advisory)
        return self

    async def stop(self) -> None:
        await self._sub.unsubscribe()

    async def _on_advisory(self, msg) -> None:
        adv = json.loads(msg.data)
        seq = adv["stream_seq"]
        try:
            original = await self.js.get_msg(ORDERS, seq)
        except NotFoundError:
            return
        await self.js.publish("dlq.orders", original.data, headers={
            "Dlq-Reason": "max_deliver", "Dlq-Deliveries": str(adv["deliveries"]), "Dlq-Stream-Seq": str(seq)})
        await self.js.delete_msg(ORDERS, seq)
        self.moved.append(seq)
