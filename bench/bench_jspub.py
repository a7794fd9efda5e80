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

``--subjects S`` cycles the publishes over S subjects ``c.0`` .. ``c.<S-1>`` (``--pipeline 200
--subjects 1000``: ``run.py jspub1k``'s shape, issue 31).
``--pipeline K`` sends K publishes per read instead (each with its own reply ``_R.<n>``, to one
subject, as the Spark sink's task does) and waits for their K PubAcks: the asynchronous
publisher's cost per message. ``--size B`` sets the payload size; ``--read R`` hands each group's
bytes over in R-byte reads, so big payloads span reads as they do off a socket (uvloop reads up to
256,000 bytes; a loaded server sees full reads). Besides the total, the line shows the part spent
in the kernel (the ``pwrite``; 10 ms clock ticks, so coarse), the part on the loop's own thread
(different only with the writer thread, ``NATSD_WRITER_THRESHOLD``) and minor page faults.

    PYTHONPATH=src .venv/bin/python bench/bench_jspub.py [workload ...] [--n 5000] [--rounds 5]
    PYTHONPATH=src .venv/bin/python bench/bench_jspub.py incr --profile   # cProfile of one round
    # the jspub16k shape (run_wide.py) in process: 16 KB async publishes, socket-sized reads
    PYTHONPATH=src .venv/bin/python bench/bench_jspub.py pub --size 16384 --pipeline 240 --read 256000 --n 4800
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import resource
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
KV_CONFIG = (
    b'{"name":"KV_B","subjects":["$KV.B.>"],"max_msgs_per_subject":1,"discard":"new",'
    b'"duplicate_window":120000000000,"allow_direct":true,"deny_delete":true,'
    b'"allow_rollup_hdrs":true,"max_msg_size":-1,"max_bytes":-1,"max_msgs":-1,"max_age":0}'
)


def _hpub(subject: bytes, reply: bytes, hdr: bytes, payload: bytes) -> bytes:
    return b"HPUB %s %s %d %d\r\n%s%s\r\n" % (subject, reply, len(hdr), len(hdr) + len(payload), hdr, payload)


def frames(wl: str, n: int, base: int, pipeline: int = 0, size: int | None = None, subjects: int = 0) -> list[bytes]:
    out = []
    body = b"x" * (size if size is not None else 128 if pipeline or wl in ("sync", "kv") else 1)
    for i in range(base, base + n):
        subj = b"c.1" if pipeline or wl == "sync" else b"c.%d" % (i % 100)
        if subjects:
            subj = b"c.%d" % (i % subjects)
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
        out = [b"".join(out[i : i + pipeline]) for i in range(0, n, pipeline)]
    return out


def _chunks(fs: list[bytes], read: int, per: int) -> list[tuple[list[bytes], int]]:
    """Each group of ``per`` publishes as the list of ``read``-byte reads it arrives in, and the
    number of PubAcks to wait for after them."""
    out = []
    for f in fs:
        mv = memoryview(f)
        out.append(([bytes(mv[i : i + read]) for i in range(0, len(f), read)], per))
    return out


async def run(
    wl: str,
    n: int,
    rounds: int,
    profile: bool,
    pipeline: int = 0,
    size: int | None = None,
    read: int = 0,
    subjects: int = 0,
) -> tuple[float, float, float, float]:
    with tempfile.TemporaryDirectory(prefix="bench-jspub-") as d:
        opts = ServerOptions(host="127.0.0.1", port=0, http_port=0)
        opts.jetstream = JetStreamOptions(enabled=True, store_dir=d)
        server = Server(opts)
        await server.start()
        try:
            t = _Transport()
            c = ClientConnection(server)
            c.connection_made(t)
            c.data_received(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\nSUB _R.> 1\r\n')
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
            best_sys = 0.0
            best_faults = 0
            best_loop = 0.0
            prof = None
            for r in range(rounds):
                fs = frames(wl, n, r * n, pipeline, size, subjects)
                if read:
                    # The socket's reads: the publishes' bytes cut into READ-byte chunks (a
                    # 16 KB payload then spans reads, as it does off a real socket).
                    fs = _chunks(fs, read, pipeline or 1)
                if profile and r == rounds - 1:
                    import cProfile

                    prof = cProfile.Profile(time.process_time)
                    prof.enable()
                c0 = time.process_time()
                l0 = time.thread_time()
                s0 = os.times().system
                f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                for f, want in fs if read else ((f, pipeline or 1) for f in fs):
                    for chunk in f if read else (f,):
                        c.data_received(chunk)
                    while t.buf.count(b"MSG _R.") < want:
                        await asyncio.sleep(0)
                    t.buf.clear()
                dt = time.process_time() - c0
                loop_s = time.thread_time() - l0
                sys_s = os.times().system - s0
                faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
                if prof is not None:
                    prof.disable()
                else:
                    if dt < best:
                        best, best_sys, best_faults, best_loop = dt, sys_s, faults, loop_s
            if prof is not None:
                import pstats

                pstats.Stats(prof).sort_stats("tottime").print_stats(35)
            c.close()
        finally:
            await server.shutdown()
    return best / n * 1e6, best_sys / n * 1e6, best_faults / n, best_loop / n * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workloads", nargs="*", default=list(WORKLOADS))
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--pipeline", type=int, default=0, metavar="K", help="K publishes per read (async publisher)")
    ap.add_argument("--size", type=int, help="payload bytes (default 1, 128 with --pipeline)")
    ap.add_argument(
        "--read",
        type=int,
        default=0,
        metavar="B",
        help="deliver the bytes in B-byte reads (e.g. 65536: a 16 KB payload spans reads)",
    )
    ap.add_argument(
        "--subjects",
        type=int,
        default=0,
        metavar="S",
        help="cycle over S subjects c.0 .. c.<S-1> (`--pipeline 200 --subjects 1000`: run.py jspub1k's shape)",
    )
    args = ap.parse_args(argv)
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover
        pass
    for wl in args.workloads:
        us, sys_us, faults, loop_us = asyncio.run(
            run(
                wl,
                args.n,
                args.rounds + (1 if args.profile else 0),
                args.profile,
                args.pipeline,
                args.size,
                args.read,
                args.subjects,
            )
        )
        mode = f"{args.pipeline} per group" if args.pipeline else "sync PubAck"
        if args.size is not None:
            mode += f", {args.size} B"
        if args.read:
            mode += f", {args.read} B reads"
        if args.subjects:
            mode += f", {args.subjects} subjects"
        print(
            f"{wl:6s} {us:7.2f} us/publish (server CPU, {sys_us:.2f} of it in the kernel, "
            f"{loop_us:.2f} on the loop's thread, "
            f"{faults:.2f} page faults; {mode}, "
            f"best of {args.rounds})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
