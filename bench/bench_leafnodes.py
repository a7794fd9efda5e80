"""Messages across a leafnode link, natsd vs nats-server playing the same role, same run.

    .venv/bin/python bench/bench_leafnodes.py [--n N] [--source-n M] [--hub-tls | --leaf-tls] [--repeat R]

Topologies (all on 127.0.0.1, each server a subprocess): a nats-server hub with a ``leafnodes``
port, and as its leaf either nats-server (reference) or natsd. Figures:

* ``core leaf->hub``: a raw-socket publisher on the leaf sends N 128-byte messages on one
  subject; a raw-socket subscriber on the hub counts them; msgs/s from the first publish to the
  last message received. ``core hub->leaf``: the same the other way.
* ``sourcing leaf->hub``: the leaf (JetStream domain EDGE) holds M 128-byte messages in a stream;
  a hub stream sources it (``external: $JS.EDGE.API``); msgs/s until the hub stream holds M.

``--compression MODE`` sets the link's compression on both ends (default: theirs, ``s2_auto``,
which on 127.0.0.1 means nats-server writes uncompressed S2 chunks and natsd Snappy blocks).

With ``--hub-tls`` the roles swap: a nats-server leaf connects over TLS (``leafnodes { tls {...} }``,
test certificates made on the fly) to a hub that is either nats-server or natsd (the accepting side),
and the two ``core`` figures are measured across that TLS link. With ``--leaf-tls`` the leaf under
test (natsd or nats-server) links to a nats-server hub over TLS (a remote with ``tls {...}``).

The raw clients pre-build their frames, so the client is not the bottleneck. The machine is
shared (2 cores): the figures are noisy; ``--repeat R`` runs R rounds, alternating which server
goes first, and prints the medians (and each round's ratios). The CPU time the server under test
spent per message (user + system, from /proc) is printed as well: the machine's load distorts it
far less than the rates.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.helpers.servers import free_port, start_server  # noqa: E402

SIZE = 128
SUBJ = b"bench.leaf"
COMPRESSION = ""  # --compression: the mode of both ends of the link ("" = their default, s2_auto)


def _comp() -> str:
    return f", compression: {COMPRESSION}" if COMPRESSION else ""


def hub_conf(d: Path, lp: int) -> str:
    p = d / "hub.conf"
    p.write_text(
        f'server_name: HUB\njetstream {{ store_dir: "{d}/hub-js", domain: HUB }}\nleafnodes {{ port: {lp}{_comp()} }}\n'
    )
    return str(p)


def leaf_conf(d: Path, lp: int, kind: str) -> str:
    p = d / f"leaf-{kind}.conf"
    p.write_text(
        f'server_name: EDGE-{kind}\njetstream {{ store_dir: "{d}/leaf-{kind}-js", domain: EDGE }}\n'
        f'leafnodes {{ remotes: [ {{ url: "nats-leaf://127.0.0.1:{lp}"{_comp()} }} ] }}\n'
    )
    return str(p)


async def _connect(port: int):
    r, w = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
    await r.readline()  # INFO
    w.write(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n')
    return r, w


async def _ping(r, w) -> None:
    w.write(b"PING\r\n")
    await w.drain()
    while True:
        line = await r.readline()
        if line.startswith(b"PONG"):
            return
        if not line:
            raise ConnectionError("closed")


async def core(pub_port: int, sub_port: int, n: int) -> float:
    sr, sw = await _connect(sub_port)
    sw.write(b"SUB " + SUBJ + b" 1\r\n")
    await _ping(sr, sw)
    pr, pw = await _connect(pub_port)
    await _ping(pr, pw)
    frame = b"MSG " + SUBJ + b" 1 %d\r\n" % SIZE + b"x" * SIZE + b"\r\n"
    # Wait until the interest crossed the link: probes until one arrives.
    probe = b"PUB " + SUBJ + b" %d\r\n" % SIZE + b"x" * SIZE + b"\r\n"
    while True:
        pw.write(probe)
        await pw.drain()
        try:
            got = await asyncio.wait_for(sr.read(1 << 16), 0.2)
            if got:
                break
        except asyncio.TimeoutError:
            pass
    await asyncio.sleep(0.3)
    while True:  # drain late probes
        try:
            if not await asyncio.wait_for(sr.read(1 << 20), 0.3):
                break
        except asyncio.TimeoutError:
            break
    chunk = probe * 1000
    want = n * len(frame)

    async def receive() -> float:
        got = 0
        while got < want:
            b = await sr.read(1 << 20)
            if not b:
                break
            got += len(b)
        return time.perf_counter()

    rt = asyncio.get_running_loop().create_task(receive())
    t0 = time.perf_counter()
    for _ in range(n // 1000):
        pw.write(chunk)
        await pw.drain()
    try:
        t1 = await asyncio.wait_for(rt, 120)
    except asyncio.TimeoutError:
        t1 = time.perf_counter()
    pw.close()
    sw.close()
    return n / (t1 - t0)


async def sourcing(leaf_url: str, hub_url: str, m: int) -> float:
    import nats
    from nats.js.api import ExternalStream, StreamConfig, StreamSource

    lnc = await nats.connect(leaf_url)
    hnc = await nats.connect(hub_url)
    try:
        ljs = lnc.jetstream()
        await ljs.add_stream(name="SRC", subjects=["src.>"])
        payload = b"x" * SIZE
        for i in range(0, m, 1000):
            for j in range(1000):
                await lnc.publish("src.a", payload)
            await ljs.publish("src.a", payload) if False else await lnc.flush()
        while (await ljs.stream_info("SRC")).state.messages < m:
            await asyncio.sleep(0.05)
        hjs = hnc.jetstream()
        while True:  # the hub must see the leaf's API first
            try:
                await hnc.request("$JS.EDGE.API.INFO", b"", timeout=0.5)
                break
            except Exception:
                await asyncio.sleep(0.1)
        t0 = time.perf_counter()
        await hjs.add_stream(
            StreamConfig(name="DST", sources=[StreamSource(name="SRC", external=ExternalStream(api="$JS.EDGE.API"))])
        )
        while (await hjs.stream_info("DST")).state.messages < m:
            await asyncio.sleep(0.02)
            if time.perf_counter() - t0 > 300:
                break
        got = (await hjs.stream_info("DST")).state.messages
        return got / (time.perf_counter() - t0)
    finally:
        await lnc.close()
        await hnc.close()


def _wait_linked(hub_http: int, timeout: float = 20) -> None:
    import urllib.request

    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{hub_http}/leafz", timeout=2) as r:
                if json.loads(r.read()).get("leafnodes", 0) >= 1:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("leaf never connected")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def _measured(out: dict, name: str, server, n: int, run) -> None:
    """Run one figure; record its msgs/s and the CPU µs per message of ``server`` (the one under
    test), which the machine's load distorts far less than the rate."""
    c0 = _cpu_s(server.pid)
    out[name] = run()
    out[name + " [cpu us/msg]"] = (_cpu_s(server.pid) - c0) / n * 1e6


def run_pair(kind: str, n: int, m: int) -> dict:
    d = Path(tempfile.mkdtemp(prefix=f"leafbench-{kind}-"))
    lp = free_port()
    hub_http = free_port()
    hub = start_server("reference", d / "hub", "-m", str(hub_http), config=hub_conf(d, lp), jetstream=False)
    leaf = start_server(kind, d / "leaf", config=leaf_conf(d, lp, kind), jetstream=False)
    try:
        _wait_linked(hub_http)
        out: dict = {}
        _measured(out, "core leaf->hub", leaf, n, lambda: asyncio.run(core(leaf.port, hub.port, n)))
        _measured(out, "core hub->leaf", leaf, n, lambda: asyncio.run(core(hub.port, leaf.port, n)))
        _measured(out, "sourcing leaf->hub", leaf, m, lambda: asyncio.run(sourcing(leaf.url, hub.url, m)))
        return out
    finally:
        leaf.stop()
        hub.stop()


def _tls_confs(d: Path, lp: int, hub_http: int) -> tuple[Path, Path]:
    from tests.helpers.certs import make_pki

    pki = make_pki(d / "pki")
    hc = d / "hub.conf"
    hc.write_text(
        f"server_name: HUB\nhttp_port: {hub_http}\nleafnodes {{ port: {lp}, tls {{ "
        f'cert_file: "{pki.server_cert}", key_file: "{pki.server_key}", ca_file: "{pki.ca_file}", '
        f"verify: true }} }}\n"
    )
    lc = d / "leaf.conf"
    lc.write_text(
        f'server_name: LEAF\nleafnodes {{ remotes: [ {{ url: "tls://localhost:{lp}", tls {{ '
        f'cert_file: "{pki.client_cert}", key_file: "{pki.client_key}", ca_file: "{pki.ca_file}" }} }} ] }}\n'
    )
    return hc, lc


def run_tls(kind: str, n: int, side: str) -> dict:
    """A TLS leaf link; ``side="hub"``: a nats-server leaf and a ``kind`` hub (the accepting side
    under test); ``side="leaf"``: a ``kind`` leaf (a TLS remote) of a nats-server hub."""
    d = Path(tempfile.mkdtemp(prefix=f"leafbench-tls-{side}-{kind}-"))
    lp = free_port()
    hub_http = free_port()
    hc, lc = _tls_confs(d, lp, hub_http)
    hub_kind, leaf_kind = (kind, "reference") if side == "hub" else ("reference", kind)
    hub = start_server(hub_kind, d / "hub", config=str(hc), jetstream=False)
    leaf = start_server(leaf_kind, d / "leaf", config=str(lc), jetstream=False)
    try:
        _wait_linked(hub_http)
        out: dict = {}
        tested = hub if side == "hub" else leaf
        _measured(out, f"tls core leaf->hub ({side})", tested, n, lambda: asyncio.run(core(leaf.port, hub.port, n)))
        _measured(out, f"tls core hub->leaf ({side})", tested, n, lambda: asyncio.run(core(hub.port, leaf.port, n)))
        return out
    finally:
        leaf.stop()
        hub.stop()


def run_tls_hub(kind: str, n: int) -> dict:
    """A nats-server leaf linked over TLS to a ``kind`` hub (the accepting side under test)."""
    return run_tls(kind, n, "hub")


def main() -> None:
    import statistics

    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--source-n", type=int, default=50_000)
    ap.add_argument("--hub-tls", action="store_true", help="natsd as the TLS hub of a nats-server leaf instead")
    ap.add_argument(
        "--leaf-tls", action="store_true", help="natsd as a TLS leaf (a tls remote) of a nats-server TLS hub instead"
    )
    ap.add_argument(
        "--repeat", type=int, default=1, help="rounds, alternating which server goes first; medians are printed"
    )
    ap.add_argument("--compression", default="", help="leaf link compression of both ends (off, s2_fast, ...)")
    a = ap.parse_args()
    global COMPRESSION
    COMPRESSION = a.compression

    def one(kind: str) -> dict:
        if a.hub_tls:
            return run_tls(kind, a.n, "hub")
        if a.leaf_tls:
            return run_tls(kind, a.n, "leaf")
        return run_pair(kind, a.n, a.source_n)

    runs: dict[str, list[dict]] = {"reference": [], "natsd": []}
    for i in range(a.repeat):
        order = ("reference", "natsd") if i % 2 == 0 else ("natsd", "reference")
        for kind in order:
            runs[kind].append(one(kind))
        if a.repeat > 1:
            print(
                f"round {i + 1}: "
                + ", ".join(
                    f"{k} {runs['natsd'][-1][k] / runs['reference'][-1][k]:.2f}"
                    for k in runs["reference"][-1]
                    if "[cpu" not in k
                ),
                flush=True,
            )
    ref = {k: statistics.median(r[k] for r in runs["reference"]) for k in runs["reference"][0]}
    ours = {k: statistics.median(r[k] for r in runs["natsd"]) for k in runs["reference"][0]}
    print(
        f"{'figure':28} {'natsd':>12} {'nats-server':>12} {'ratio':>7}"
        + ("  (medians of %d)" % a.repeat if a.repeat > 1 else "")
    )
    for k in ref:
        if "[cpu" not in k:
            print(f"{k:28} {ours[k]:12,.0f} {ref[k]:12,.0f} {ours[k] / ref[k]:7.2f}")
    print(
        "CPU of the server under test, µs per message (nats-server: all its threads; ratio: "
        "nats-server / natsd, so above 1 means natsd spends less)"
    )
    for k in ref:
        if "[cpu" in k:
            print(f"{k:40} {ours[k]:8.2f} {ref[k]:8.2f} {ref[k] / ours[k] if ours[k] else 0:7.2f}")


if __name__ == "__main__":
    main()
