"""Differential test: the server-wide storage limits (``jetstream { max_file_store,
max_memory_store }``) against nats-server and natsd, both as subprocesses with the same config:
the same publishes must get the same answers (PubAcks, then 10023 "insufficient resources"),
and freeing space (a purge) lets publishes in again on both."""

from __future__ import annotations

import asyncio
import json

import nats
import pytest

from tests.helpers.servers import reference_binary, start_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.reference,
    pytest.mark.skipif(reference_binary() is None, reason="reference nats-server not installed"),
]


async def _script(url: str) -> list:
    nc = await nats.connect(url)
    out: list = []
    try:
        for name, storage in (("F", "file"), ("M", "memory")):
            cfg = {"name": name, "subjects": [name.lower() + ".>"], "storage": storage}
            r = json.loads(
                (await nc.request(f"$JS.API.STREAM.CREATE.{name}", json.dumps(cfg).encode(), timeout=5)).data
            )
            out.append(("create", name, r.get("error")))
            answers = []
            for _ in range(300):
                m = await nc.request(name.lower() + ".x", b"x" * 4096, timeout=5)
                answers.append(json.loads(m.data))
            out.append(("publish", name, answers))
            # A request with headers takes the other path through the server: same answer.
            m = await nc.request(name.lower() + ".x", b"y", headers={"Nats-Msg-Id": "a"}, timeout=5)
            out.append(("publish-hdr", name, json.loads(m.data)))
            r = json.loads((await nc.request(f"$JS.API.STREAM.PURGE.{name}", b"", timeout=5)).data)
            out.append(("purge", name, r))
            m = await nc.request(name.lower() + ".x", b"z", timeout=5)
            out.append(("after-purge", name, json.loads(m.data)))
    finally:
        await nc.close()
    return out


def test_server_wide_limits_match_reference(tmp_path):
    conf = tmp_path / "js.conf"
    conf.write_text("jetstream { max_file_store: 1MB, max_memory_store: 1MB }\n")
    results = {}
    for kind in ("reference", "natsd"):
        srv = start_server(kind, tmp_path / kind, config=conf)
        try:
            results[kind] = asyncio.run(_script(srv.url))
        finally:
            srv.stop()
    ref, ours = results["reference"], results["natsd"]
    # Sanity: the reference refused some with 10023 (the test would be empty otherwise).
    pubs = dict(((step[1]), step[2]) for step in ref if step[0] == "publish")
    assert sum(1 for a in pubs["F"] if "error" in a) > 0
    assert sum(1 for a in pubs["M"] if "error" in a) > 0
    assert ours == ref
