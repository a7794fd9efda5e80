"""A clean stop (SIGTERM) of the ``python -m natsd`` process (issue 31: it leaves through
``natsd.server.main.leave``, skipping the interpreter's teardown): exit code 0, the stop's log
lines in the log file, every acknowledged message and ack on disk, and what makes the next start
fast written and valid (msgs/index.db, the restart file: the restarted stream starts asleep and
wakes on first use without a recovery)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import nats
import pytest

from tests.helpers.jsapi import js_api as _api
from tests.helpers.servers import free_port, start_server

pytestmark = [pytest.mark.acceptance, pytest.mark.timeout(120)]

N = 3000
ROOT = Path(__file__).resolve().parents[2]


async def _fill(url: str) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    r = await _api(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"], "storage": "file"})
    assert "error" not in r, r
    for lo in range(0, N, 500):
        acks = await asyncio.gather(*(js.publish(f"s.{i % 7}", b"m-%d" % i) for i in range(lo, lo + 500)))
        assert [a.seq for a in acks] == list(range(lo + 1, lo + 501))
    sub = await js.pull_subscribe("s.>", durable="C", stream="S")
    for m in await sub.fetch(100, timeout=10):
        await m.ack_sync()
    await nc.close()


async def _check(url: str) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    info = await js.stream_info("S")
    assert (info.state.messages, info.state.first_seq, info.state.last_seq) == (N, 1, N)
    assert (await js.get_msg("S", N)).data == b"m-%d" % (N - 1)
    assert (await js.consumer_info("S", "C")).ack_floor.stream_seq == 100
    sub = await js.pull_subscribe("s.>", durable="C", stream="S")
    (m,) = await sub.fetch(1, timeout=10)
    assert m.metadata.sequence.stream == 101 and m.data == b"m-100"
    await nc.close()


def test_a_clean_stop_writes_everything_the_next_start_uses(tmp_path):
    store = tmp_path / "store"
    account = store / "jetstream" / "$G"
    first, second = tmp_path / "first.log", tmp_path / "second.log"
    srv = start_server("natsd", tmp_path, "-l", str(first), store_dir=store)
    try:
        asyncio.run(_fill(srv.url))
    finally:
        rc = srv.stop()
    assert rc == 0
    lines = first.read_text().splitlines()
    assert "[INF] Trapped 'terminated' signal" in lines[-3]
    assert lines[-2].endswith("[INF] Initiating Shutdown...") and lines[-1].endswith("[INF] Server Exiting..")
    assert (account / "natsd-restart.json").is_file()
    assert (account / "streams" / "S" / "msgs" / "index.db").is_file()

    srv = start_server("natsd", tmp_path, "-D", "-l", str(second), store_dir=store)
    try:
        asyncio.run(_check(srv.url))
    finally:
        assert srv.stop() == 0
    log = second.read_text()
    # started asleep from the restart file, woken by the first read: no recovery ran
    assert "JetStream: woke stream '$G > S'" in log
    assert "after an unclean stop" not in log and not re.search(r"lost \d+ messages", log)
    assert log.rstrip().endswith("[INF] Server Exiting..")


# natsd's main() in a child that, once it returned (the clean stop done), lists what is still open under
# the store: leave() skips the finalisers that would have flushed and closed a file object left open.
AFTER_MAIN = r"""
import gc, io, os, signal, socket, sys, threading, time
from natsd.server.main import main
port, store = int(sys.argv[1]), sys.argv[2]

def client():
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port), 1)
            break
        except OSError:
            time.sleep(0.02)
    f = s.makefile("rb")
    f.readline()  # INFO
    body = b'{"name":"S","subjects":["s.>"],"storage":"file"}'
    s.sendall(b"CONNECT {}\r\nSUB _r 1\r\nPUB $JS.API.STREAM.CREATE.S _r %d\r\n%s\r\n" % (len(body), body))
    for i in range(200):
        s.sendall(b"PUB s.%d _r 5\r\nhello\r\n" % (i % 3))
    body = b'{"stream_name":"S","config":{"durable_name":"C","ack_policy":"explicit"}}'
    s.sendall(b"PUB $JS.API.CONSUMER.DURABLE.CREATE.S.C _r %d\r\n%s\r\n" % (len(body), body))
    replies = 0
    while replies < 202:
        if f.readline().startswith(b"MSG "):
            f.readline()
            replies += 1
    s.close()
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=client, daemon=True).start()
rc = main(["-a", "127.0.0.1", "-p", str(port), "-js", "-sd", store])
fds = []
for fd in os.listdir("/proc/self/fd"):
    try:
        fds.append(os.readlink("/proc/self/fd/" + fd))
    except OSError:
        pass
gc.unfreeze()
files = [repr(o) for o in gc.get_objects() if isinstance(o, io.IOBase) and not o.closed and store in repr(o)]
print("RC", rc, "FDS", [p for p in fds if p.startswith(store)], "FILES", files, flush=True)
"""


def test_nothing_under_the_store_is_left_open_when_main_returns(tmp_path):
    """What makes skipping the teardown safe (natsd.server.main.leave): after a clean stop no file of
    the store is open, so no buffered write waits for a finaliser."""
    store = tmp_path / "store"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    r = subprocess.run(
        [sys.executable, "-c", AFTER_MAIN, str(free_port()), str(store)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "RC 0 FDS [] FILES []" in r.stdout, r.stdout + r.stderr[-3000:]
    assert (store / "jetstream" / "$G" / "streams" / "S" / "msgs" / "index.db").is_file()
    assert (store / "jetstream" / "$G" / "streams" / "S" / "obs" / "C").is_dir()
