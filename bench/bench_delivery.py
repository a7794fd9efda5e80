"""CPU cost per message of JetStream pull delivery and of acks, in process (no sockets).

    .venv/bin/python bench/bench_delivery.py [N] [--memory] [--push] [--passes P] [--profile]

A file stream (FileStreamStore in a temp dir) holds N (default 100,000) 128-byte messages. A
durable pull consumer (ack explicit, max_ack_pending 100,000) is served pull requests of batch
500 (expires 5s) until it has delivered everything; after each batch every delivered message is
acked with ``+ACK`` by calling ``Consumer.process_ack`` directly, as the account's ``$JS.ACK.>``
handler would. Deliveries go through the server's real ``router.deliver_many`` into one plain
client subscription (a stand-in connection whose output buffer is cleared between batches), so
the figure covers consumer + store + frame building, as the ``jsfetch`` workload exercises them.

Reported: CPU microseconds per message (``time.process_time``) of the delivery part (pull
request handling, the consumer's delivery pass, frame building) and of the ack part
(``process_ack`` per message plus the end-of-turn state hand-off), best of P passes (default 3),
each pass a fresh durable consumer over the same stream (so the store's read path is exercised
from the file each time, the OS page cache being warm). ``--memory`` uses a memory store instead;
``--profile`` runs one pass under cProfile and prints the top functions.

``--push`` measures push replay instead (the ``replay`` workload of ``bench/run_wide.py``): an
ordered push consumer as the clients create it (ephemeral, ack none, max_deliver 1, flow control,
idle heartbeat 5 s, memory state) replays the whole stream into the same stand-in connection; each
``100 FlowControl Request`` found in the output is answered (``process_flow_control``) after the
frames before it, as a client does once it has read them. Reported: CPU microseconds per message
of the whole replay (delivery passes and flow-control handling; scanning the stand-in's output
for the requests is not counted).

Nothing is asserted; this isolates what the engine costs per message from parser and socket work
(bench/run.py's ``jsfetch`` measures the whole server against nats-server).
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from natsd.clock import ManualClock  # noqa: E402
from natsd.jetstream import consumer_registry  # noqa: E402
from natsd.jetstream.config.consumer_config import ConsumerConfig  # noqa: E402
from natsd.jetstream.config.models import StreamConfig  # noqa: E402
from natsd.server.account import Account  # noqa: E402
from natsd.server.ports import ServerPorts  # noqa: E402
from natsd.server.subscription import Subscription  # noqa: E402
from natsd.server.writer import Writer  # noqa: E402
from natsd.store.base import StoreConfig  # noqa: E402
from tests.unit.jetstream.test_consumer_harness import FakeAccount, FakeStream  # noqa: E402

BATCH = 500
SEC = 1_000_000_000
# v1 ack subject in a MSG line: MSG <subject> <sid> $JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending> <size>
ACK_RE = re.compile(rb" \$JS\.ACK\.[^. ]+\.[^. ]+\.(\d+)\.(\d+)\.(\d+)\.\d+\.\d+ ")


class Conn(Writer):
    """The attributes of ClientConnection that router.deliver_many reads and writes; the real writer."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.sub_deny = None
        self.replies = None
        self.headers = True
        self.closed = False
        self.flush_pending = False
        self.max_pending = 1 << 40
        self.congested = False
        self.out_msgs = 0
        self.out_bytes = 0
        self.cid = 1

    def _call_soon(self, cb) -> None:
        pass

    def flush(self) -> None:  # pragma: no cover - never called (see _call_soon)
        self.flush_pending = False

    def slow_consumer(self) -> None:  # pragma: no cover
        raise RuntimeError("slow consumer")


def build(n: int, memory: bool, d: str):
    clock = ManualClock()
    acc = Account("$G")
    ports = ServerPorts(acc)
    account = FakeAccount(ports, clock)  # with its ConsumerHub
    scfg = StreamConfig(name="S", subjects=["s.>"], storage="memory" if memory else "file", num_replicas=1)
    sc = StoreConfig(name="S", subjects=["s.>"], storage=scfg.storage)
    if memory:
        from natsd.store.memory import MemoryStreamStore

        store = MemoryStreamStore(sc, clock)
    else:
        from natsd.store.file import FileStreamStore

        store = FileStreamStore(sc, clock, d)
    stream = FakeStream(account, scfg, store)
    account.streams["S"] = stream
    payload = b"x" * 128
    for i in range(n):
        store.store_msg("s.x", None, payload)
        if i % 1000 == 999:
            store.flush()
    store.flush()
    conn = Conn()
    acc.sublist.insert("_INBOX.p", Subscription(conn, b"1", "_INBOX.p", None))
    return clock, stream, conn


def one_pass(clock, stream, conn, name: str, n: int) -> tuple[float, float]:
    cfg = ConsumerConfig.from_json({"durable_name": name, "ack_policy": "explicit", "max_ack_pending": 100_000})
    c = consumer_registry.create(stream, cfg, "")
    clock.run_soon()
    body = b'{"batch":%d,"expires":%d}' % (BATCH, 5 * SEC)
    t_dlv = t_ack = 0.0
    got = 0
    pt = time.process_time
    while got < n:
        t0 = pt()
        c.process_next_request("_INBOX.p", body)
        clock.run_soon()
        t_dlv += pt() - t0
        acks = [(int(a), int(b), int(d)) for a, b, d in ACK_RE.findall(conn.out)]
        conn.out.clear()
        conn.flush_pending = False
        if not acks:
            raise RuntimeError("nothing delivered")
        t0 = pt()
        for dc, sseq, dseq in acks:
            c.process_ack(sseq, dseq, dc, "", b"+ACK")
        clock.run_soon()
        t_ack += pt() - t0
        got += len(acks)
        clock.advance(1_000_000)  # 1 ms between batches: state writes happen at their cadence
    if c.t.pending or got != n:
        raise RuntimeError(f"pass ended with {len(c.t.pending)} pending, {got} delivered")
    c.delete(advisory=False)
    clock.run_soon()
    return t_dlv, t_ack


FC_RE = re.compile(rb"HMSG _INBOX\.p 1 (\$JS\.FC\.[^ ]+) ")
PUSH_CFG = {
    "deliver_policy": "all",
    "ack_policy": "none",
    "max_deliver": 1,
    "replay_policy": "instant",
    "flow_control": True,
    "idle_heartbeat": 5 * SEC,
    "deliver_subject": "_INBOX.p",
    "mem_storage": True,
    "num_replicas": 1,
    "inactive_threshold": 300 * SEC,
}


def push_pass(clock, stream, conn, name: str, n: int) -> float:
    """One ordered push replay of the whole stream; CPU seconds spent in the server's code."""
    cfg = ConsumerConfig.from_json(dict(PUSH_CFG, name=name))
    pt = time.process_time
    t = 0.0
    got = 0
    t0 = pt()
    c = consumer_registry.create(stream, cfg, "")
    clock.run_soon()
    t += pt() - t0
    while got < n:
        out = bytes(conn.out)
        conn.out.clear()
        conn.flush_pending = False
        got += out.count(b" 1 $JS.ACK.")
        fcs = FC_RE.findall(out)
        if not fcs and got < n:
            raise RuntimeError(f"stalled at {got} of {n} with no flow-control request")
        t0 = pt()
        for fc in fcs:
            c.process_flow_control(fc.decode())
        clock.run_soon()
        t += pt() - t0
    if got != n:
        raise RuntimeError(f"delivered {got} of {n}")
    c.delete(advisory=False)
    clock.run_soon()
    conn.out.clear()
    return t


def main() -> None:
    args = sys.argv[1:]
    memory = "--memory" in args
    push = "--push" in args
    profile = "--profile" in args
    passes = 3
    if "--passes" in args:
        passes = int(args[args.index("--passes") + 1])
    nums = [a for a in args if a.isdigit() and (args.index(a) == 0 or args[args.index(a) - 1] != "--passes")]
    n = int(nums[0]) if nums else 100_000
    with tempfile.TemporaryDirectory() as d:
        clock, stream, conn = build(n, memory, d)
        if profile:
            import cProfile
            import pstats

            pr = cProfile.Profile()
            pr.enable()
            push_pass(clock, stream, conn, "P", n) if push else one_pass(clock, stream, conn, "P", n)
            pr.disable()
            pstats.Stats(pr).sort_stats("tottime").print_stats(20)
            return
        best_d = best_a = float("inf")
        if push:
            best = min(push_pass(clock, stream, conn, f"P{i}", n) for i in range(passes))
            stream.store.stop()
            print(
                f"{'memory' if memory else 'file'} store, n={n}: ordered push replay {best / n * 1e6:.2f} us/msg "
                f"(CPU, best of {passes})"
            )
            return
        for i in range(passes):
            t_d, t_a = one_pass(clock, stream, conn, f"P{i}", n)
            best_d, best_a = min(best_d, t_d), min(best_a, t_a)
        stream.store.stop()
    kind = "memory" if memory else "file"
    print(
        f"{kind} store, n={n}, batch {BATCH}: delivery {best_d / n * 1e6:.2f} us/msg, "
        f"ack {best_a / n * 1e6:.2f} us/msg (CPU, best of {passes})"
    )


if __name__ == "__main__":
    main()
