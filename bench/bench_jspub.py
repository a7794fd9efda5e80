"""Server CPU per synchronous JetStream publish (HPUB/PUB with a reply -> PubAck), in process.

A real natsd ``Server`` (JetStream on a file store) runs in this process; one client is a
``ClientConnection`` over a fake transport, so every byte still goes through the parser, the
connection, the router, the stream, the file store (its ``pwrite`` included) and the PubAck's
way back through the writer. Each publish is fed alone and the loop turns until its PubAck is in
the output buffer, as a synchronous publisher (``js.publish``) waits for it. Figures are
``time.process_time`` per publish, best of ``--rounds`` rounds (load moves them little, unlike
the socket benches: compare two trees back to back with this).

Workloads (subjects cycle over 100, one file stream ``C`` on ``c.>``):

* ``pub``: ``PUB c.N _R.i 1`` (no headers);
* ``hpub``: HPUB with an application header (``X-Trace: abc``);
* ``incr``: ``Nats-Incr: 1`` on an ``allow_msg_counter`` stream (issue 12's counters measure);
* ``msgid``: a unique ``Nats-Msg-Id`` per publish (the Spark sink's idempotent write);
* ``sync``: ``PUB c.1 _R.<n> 128`` (128 B, one subject: ``run.py jssync``'s shape);
* ``kv``: 128 B puts to ``$KV.B.k0`` .. ``k999`` cycling, on a stream configured as a KV bucket
  with history 1 (``max_msgs_per_subject`` 1, rollup, deny delete, direct, discard new,
  2 min duplicate window: ``run.py kvput``'s shape): from the second lap on, each put removes
  the key's previous message, which is the stream's oldest here (index removal, and a FIRST
  marker instead of a tombstone in the file store).

``sync`` and ``kv`` reply to a new subject each time (``_R.<n>``), as a real client's requests
do (``_INBOX.<id>.<n>``): each is a miss of the Sublist's main cache that its shape cache answers
and that pushes older entries (the stream's subjects) out at each sweep. The others reply to
``_R.i``.

``--pipeline K`` sends K publishes per read instead (each with its own reply ``_R.<n>``, to one
subject, as the Spark sink's task does) and waits for their K PubAcks: the asynchronous
publisher's cost per message.

    PYTHONPATH=src .venv/bin/python bench/bench_jspub.py [workload ...] [--n 5000] [--rounds 5]
    PYTHONPATH=src .venv/bin/python bench/bench_jspub.py incr --profile   # cProfile of one round
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import sys
import tempfile
import time

from natsd.config.options import JetStreamOptions, ServerOptions
from natsd.server import Server
from natsd.server.connection import ClientConnection

# (the checkout's root goes last on the path: the natsd measured stays the one PYTHONPATH names)
sys.path.append(str(pathlib.Path(__file__).resolve().parents[1]))
from tests.helpers.faketransport import BufferTransport as _Transport  # noqa: E402

WORKLOADS = ("pub", "hpub", "incr", "msgid", "sync", "kv")


# The stream nats.c's js_CreateKeyValue asks for (History 1), as natsd records it.
KV_CONFIG = (b'{"name":"KV_B","subjects":["$KV.B.>"],"max_msgs_per_subject":1,"discard":"new",'
             b'"duplicate_window":120000000000,"allow_direct":true,"deny_delete":true,'
             b'"allow_rollup_hdrs":true,"max_msg_size":-1,"max_bytes":-1,"max_msgs":-1,"max_age":0}')


def _hpub(subject: bytes, reply: bytes, hdr: bytes, payload: bytes) -> bytes:
    return b"HPUB %s %s %d %d\r\n%s%s\r\n" % (subject, reply, len(hdr), len(hdr) + len(payload), hdr, payload)


def frames(wl: str, n: int, base: int, pipeline: int = 0) -> list[bytes]:
    out = []
    body = b"x" * 128 if pipeline or wl in ("sync", "kv") else b"1"
    for i in range(base, base + n):
        subj = b"c.1" if pipeline or wl == "sync" else b"c.%d" % (i % 100)
        if wl == "kv":
            subj = b"$KV.B.k%d" % (i % 1000)
        reply = b"_R.%d" % i if pipeline or wl in ("sync", "kv") else b"_R.i"
        if wl in ("pub", "sync", "kv"):
            out.append(b"PUB %s %s %d\r\n%s\r\n" % (subj, reply, len(body), body))
        elif wl == "hpub":
            out.append(_hpub(subj, reply, b"NATS/1.0\r\nX-Trace: abc\r\n\r\n", body))
        elif wl == "incr":
            out.append(_hpub(subj, reply, b"NATS/1.0\r\nNats-Incr: 1\r\n\r\n", b""))
        else:
            out.append(_hpub(subj, reply, b"NATS/1.0\r\nNats-Msg-Id: %d-%032d\r\n\r\n" % (i, i), body))
    if pipeline:
        out = [b"".join(out[i:i + pipeline]) for i in range(0, n, pipeline)]
    return out


async def run(wl: str, n: int, rounds: int, profile: bool, pipeline: int = 0) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-jspub-") as d:
        opts = ServerOptions(host="127.0.0.1", port=0, http_port=0)
        opts.jetstream = JetStreamOptions(enabled=True, store_dir=d)
        server = Server(opts)
        await server.start()
        try:
            t = _Transport()
            c = ClientConnection(server)
            c.connection_made(t)
            c.data_received(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\n'
                            b"SUB _R.> 1\r\n")
            if wl == "kv":
                cfg = KV_CONFIG
            else:
                cfg = b'{"name":"C","subjects":["c.>"]%s}' % (b',"allow_msg_counter":true' if wl == "incr" else b"")
            name = b"KV_B" if wl == "kv" else b"C"
            c.data_received(b"PUB $JS.API.STREAM.CREATE.%s _R.api %d\r\n%s\r\n" % (name, len(cfg), cfg))
            while b"MSG _R.api" not in t.buf:
                await asyncio.sleep(0)
            assert b'"error"' not in t.buf, bytes(t.buf)
            t.buf.clear()
            best = float("inf")
            prof = None
            for r in range(rounds):
                fs = frames(wl, n, r * n, pipeline)
                if profile and r == rounds - 1:
                    import cProfile
                    prof = cProfile.Profile(time.process_time)
                    prof.enable()
                c0 = time.process_time()
                for f in fs:
                    c.data_received(f)
                    want = pipeline or 1
                    while t.buf.count(b"MSG _R.") < want:
                        await asyncio.sleep(0)
                    t.buf.clear()
                dt = time.process_time() - c0
                if prof is not None:
                    prof.disable()
                else:
                    best = min(best, dt)
            if prof is not None:
                import pstats
                pstats.Stats(prof).sort_stats("tottime").print_stats(35)
            c.close()
        finally:
            await server.shutdown()
    return best / n * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workloads", nargs="*", default=list(WORKLOADS))
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--pipeline", type=int, default=0, metavar="K", help="K publishes per read (async publisher)")
    args = ap.parse_args(argv)
    try:
        import uvloop
        uvloop.install()
    except ImportError:  # pragma: no cover
        pass
    for wl in args.workloads:
        us = asyncio.run(run(wl, args.n, args.rounds + (1 if args.profile else 0), args.profile, args.pipeline))
        mode = f"{args.pipeline} per read" if args.pipeline else "sync PubAck"
        print(f"{wl:6s} {us:7.2f} us/publish (server CPU, {mode}, best of {args.rounds})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
