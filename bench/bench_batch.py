"""Atomic batch publish and counters, natsd vs nats-server in one run (issue 12's measures).

* ``atomic``: batches of 1,000 × 128 B messages (``Nats-Batch-Id`` / ``-Sequence``, the last with
  ``Nats-Batch-Commit: 1``) into a file stream with ``allow_atomic``; each batch is written in one
  go and its commit PubAck awaited before the next. Figure: messages committed per second.
* ``sync``: the same loop without counters (plain synchronous publishes), to tell the counter's
  own cost from the round trip's.
* ``incr``: synchronous ``Nats-Incr: 1`` publishes (request, wait for the PubAck with ``val``)
  into a file stream with ``allow_msg_counter``, cycling over 100 subjects. Figure: publishes/s.

The client speaks the protocol over a raw socket (frames built once up front), so it costs the
same against both servers and is not what is measured. ``incr`` and ``sync`` also print the
server process's CPU time per publish (user + system from ``/proc/<pid>/stat``, all threads):
on a shared machine it moves much less than the rate of this latency-bound loop.

    .venv/bin/python bench/bench_batch.py                 # both workloads
    .venv/bin/python bench/bench_batch.py atomic --batches 50
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import ServerProc  # noqa: E402  (bench/run.py: the two servers as subprocesses)


class Raw:
    """A blocking protocol client: enough for HPUB with a reply and reading the replies."""

    def __init__(self, port: int) -> None:
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self._line()  # INFO
        self.s.sendall(
            b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\nSUB _R.> 1\r\nPING\r\n'
        )
        while self._line() != b"PONG":
            pass

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self.buf += self.s.recv(1 << 16)
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _take(self, n: int) -> bytes:
        while len(self.buf) < n + 2:
            self.buf += self.s.recv(1 << 16)
        data, self.buf = self.buf[:n], self.buf[n + 2 :]
        return data

    def reply(self) -> tuple[str, bytes]:
        """The next message on _R.>: (subject, payload)."""
        while True:
            line = self._line()
            if line.startswith(b"MSG "):
                parts = line.split()
                return parts[1].decode(), self._take(int(parts[-1]))
            if line.startswith(b"HMSG "):
                parts = line.split()
                data = self._take(int(parts[-1]))
                return parts[1].decode(), data[int(parts[-2]) :]
            if line == b"PING":
                self.s.sendall(b"PONG\r\n")

    def api(self, subject: str, body: dict) -> dict:
        data = json.dumps(body).encode()
        self.s.sendall(b"PUB %s _R.api %d\r\n%s\r\n" % (subject.encode(), len(data), data))
        return json.loads(self.reply()[1])


def hpub(subject: str, reply: str, hdr: bytes, payload: bytes) -> bytes:
    return b"HPUB %s %s %d %d\r\n%s%s\r\n" % (
        subject.encode(),
        reply.encode(),
        len(hdr),
        len(hdr) + len(payload),
        hdr,
        payload,
    )


def bench_atomic(port: int, batches: int, size: int = 1000, msg: int = 128) -> float:
    c = Raw(port)
    r = c.api("$JS.API.STREAM.CREATE.B", {"name": "B", "subjects": ["b.>"], "allow_atomic": True})
    assert "error" not in r, r
    body = os.urandom(msg // 2).hex().encode()[:msg]
    frames = []
    for b in range(batches):
        parts = []
        for i in range(1, size + 1):
            h = b"NATS/1.0\r\nNats-Batch-Id: k%d\r\nNats-Batch-Sequence: %d\r\n" % (b, i)
            if i == size:
                parts.append(hpub("b.x", "_R.c", h + b"Nats-Batch-Commit: 1\r\n\r\n", body))
            else:
                # staged messages without a reply: nothing to read back but the commit's PubAck
                parts.append(b"HPUB b.x %d %d\r\n%s%s\r\n" % (len(h) + 2, len(h) + 2 + len(body), h + b"\r\n", body))
        frames.append(b"".join(parts))
    t0 = time.perf_counter()
    for f in frames:
        c.s.sendall(f)
        _, data = c.reply()
        assert b'"count":%d' % size in data, data[:200]
    dt = time.perf_counter() - t0
    return batches * size / dt


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``; 0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_incr(port: int, n: int, counter: bool = True, pid: int = 0) -> tuple[float, float]:
    """(publishes/s, server CPU µs per publish)."""
    c = Raw(port)
    r = c.api("$JS.API.STREAM.CREATE.C", {"name": "C", "subjects": ["c.>"], "allow_msg_counter": counter})
    assert "error" not in r, r
    if counter:
        hdr = b"NATS/1.0\r\nNats-Incr: 1\r\n\r\n"
        frames = [hpub(f"c.{i % 100}", "_R.i", hdr, b"") for i in range(n)]
    else:  # the same synchronous publishes without counters, for comparison
        frames = [b"PUB c.%d _R.i 1\r\n1\r\n" % (i % 100) for i in range(n)]
    for f in frames[:200]:  # warm up (first messages of each subject)
        c.s.sendall(f)
        c.reply()
    cpu0 = _cpu_s(pid) if pid else 0.0
    t0 = time.perf_counter()
    for f in frames[200:]:
        c.s.sendall(f)
        _, data = c.reply()
        assert (b'"val"' in data) == counter, data
    dt = time.perf_counter() - t0
    cpu = (_cpu_s(pid) - cpu0) if pid else 0.0
    return (n - 200) / dt, cpu / (n - 200) * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workloads", nargs="*", default=["atomic", "incr"])
    ap.add_argument("--batches", type=int, default=100, help="atomic: batches of 1,000 (default 100)")
    ap.add_argument("--n", type=int, default=10_000, help="incr: publishes (default 10,000)")
    args = ap.parse_args(argv)
    for wl in args.workloads:
        rates = {}
        cpus = {}
        for kind in ("nats-server", "natsd"):
            srv = ServerProc(kind)
            try:
                if wl == "atomic":
                    rates[kind] = bench_atomic(srv.port, args.batches)
                else:
                    rates[kind], cpus[kind] = bench_incr(srv.port, args.n, counter=wl == "incr", pid=srv.proc.pid)
            finally:
                srv.stop()
        ratio = rates["natsd"] / rates["nats-server"]
        unit = "msgs/s committed" if wl == "atomic" else "publishes/s"
        cpu = f"  server CPU us/publish nats-server {cpus['nats-server']:.1f} natsd {cpus['natsd']:.1f}" if cpus else ""
        print(
            f"{wl:8s} nats-server {rates['nats-server']:>10,.0f}  natsd {rates['natsd']:>10,.0f}  {unit}  "
            f"ratio {ratio:.2f}{cpu}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
