"""Server CPU per delivered message of the core output path, without sockets or a second process.

A real natsd ``Server`` runs in this process; clients are ``ClientConnection`` objects over a fake
transport, so every byte goes through the parser, the connection, the router and the receivers'
writers (natsd.server.writer) up to ``transport.write``. Workloads (128-byte payloads; figures are
``time.process_time`` per delivered message, best of 30 rounds of 10 reads):

* ``fanout4_route``: 4 subscribers of two alternating subjects (per-message routing, 4 receivers);
* ``fanout4_batch``: 4 subscribers of one subject sent back to back (a run: one join per receiver);
* ``one_reply_route``: one subscriber, every message with its own reply subject;
* ``queue4``: a queue group of 4, with and without reply;
* ``hmsg2_route``: HPUB to 2 subscribers;
* ``subjects10k`` / ``subjects10k_reply``: one publisher cycling over 10,000 subjects
  ``bench.w.<i%10>.<i>`` to 10 wildcard subscribers ``bench.w.<k>.*`` (each message matches one;
  ``run_wide.py subjects``' shape, issue 31), without and with a reply subject per message; figures
  are per message over all 10,000 (best of 5 passes), so the Sublist cache cannot hold them all.

    PYTHONPATH=src .venv/bin/python bench/bench_writer.py

Use it to compare two trees on the same machine back to back (run it with each tree's ``src`` on
PYTHONPATH, alternating): the figures move little with machine load, unlike the socket benchmarks.
"""

import asyncio
import sys
import time

from natsd.config.options import ServerOptions
from natsd.server import Server
from natsd.server.connection import ClientConnection


class T:
    """What ClientConnection uses of an asyncio transport; writes are only counted."""

    def __init__(self):
        self.n = 0

    def write(self, data):
        self.n += len(data)

    def is_closing(self):
        return False

    def get_write_buffer_size(self):
        return 0

    def set_write_buffer_limits(self, high=None, low=None):
        pass

    def get_extra_info(self, key, default=None):
        return ("127.0.0.1", 1) if key == "peername" else default

    def pause_reading(self):
        pass

    def resume_reading(self):
        pass

    def close(self):
        pass

    def abort(self):
        pass


CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\n'


def conn(server, subs=b""):
    c = ClientConnection(server)
    c.connection_made(T())
    c.data_received(CONNECT + subs)
    return c


async def measure(server, pub, data, msgs, rounds=30):
    best = None
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(10):
            pub.data_received(data)
            await asyncio.sleep(0)
        dt = (time.process_time() - t0) / (10 * msgs) * 1e6
        best = dt if best is None or dt < best else best
    return best


async def run():
    opts = ServerOptions(host="127.0.0.1", port=0, http_port=0)
    server = Server(opts)
    await server.start()
    res = {}
    try:
        body = b"x" * 128
        # fan-out 4 receivers, alternating subjects (per-message route path)
        subs = [conn(server, b"SUB fa 1\r\nSUB fb 2\r\n") for _ in range(4)]
        pub = conn(server)
        data = b"".join(b"PUB fa 128\r\n%s\r\nPUB fb 128\r\n%s\r\n" % (body, body) for _ in range(100))
        res["fanout4_route"] = await measure(server, pub, data, 200 * 4)
        # fan-out 4 receivers, one subject (route_batch join path)
        data = b"".join(b"PUB fa 128\r\n%s\r\n" % body for _ in range(200))
        res["fanout4_batch"] = await measure(server, pub, data, 200 * 4)
        # 1:1 with reply subjects (per-message route path)
        s1 = conn(server, b"SUB one 1\r\n")
        data = b"".join(b"PUB one r.%d 128\r\n%s\r\n" % (i, body) for i in range(200))
        res["one_reply_route"] = await measure(server, pub, data, 200)
        # queue group of 4 (deliver path)
        qs = [conn(server, b"SUB q g 1\r\n") for _ in range(4)]
        data = b"".join(b"PUB q 128\r\n%s\r\nPUB q x 128\r\n%s\r\n" % (body, body) for _ in range(100))
        res["queue4"] = await measure(server, pub, data, 200)
        # headers to 2 receivers
        h = b"NATS/1.0\r\nA: b\r\n\r\n"
        hs = [conn(server, b"SUB h 1\r\n") for _ in range(2)]
        data = b"".join(
            b"HPUB h %d %d\r\n%s%s\r\nHPUB h r %d %d\r\n%s%s\r\n"
            % (len(h), len(h) + 128, h, body, len(h), len(h) + 128, h, body)
            for _ in range(100)
        )
        res["hmsg2_route"] = await measure(server, pub, data, 400)
        ws = [conn(server, b"SUB bench.w.%d.* 1\r\n" % k) for k in range(10)]
        for name, reply in (("subjects10k", b""), ("subjects10k_reply", b"_INBOX.r.%d ")):
            chunks = [
                b"".join(
                    b"PUB bench.w.%d.%d %s128\r\n%s\r\n" % (i % 10, i, reply.replace(b"%d", b"%d" % i), body)
                    for i in range(j, j + 200)
                )
                for j in range(0, 10_000, 200)
            ]
            best = None
            for _ in range(5):
                t0 = time.process_time()
                for c in chunks:
                    pub.data_received(c)
                    await asyncio.sleep(0)
                dt = (time.process_time() - t0) / 10_000 * 1e6
                best = dt if best is None or dt < best else best
            res[name] = best
        for c in subs + qs + hs + ws + [s1, pub]:
            c.close()
    finally:
        await server.shutdown()
    return res


def main():
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    res = asyncio.run(run())
    for k, v in res.items():
        print(f"{k:<18} {v:.3f} us/msg")


if __name__ == "__main__":
    main()
