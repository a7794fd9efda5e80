"""Does an encrypted store written by one server open in the other? (issue 29, item 2)

The encryption layers are the same bytes (natsd derives, wraps and applies the keys exactly as
nats-server: tests/unit/store/file/test_encryption.py opens files nats-server wrote), but what
is encrypted is each server's own file format (record checksums, ``meta.sum``, ``index.db``,
consumer state, the JSON in ``meta.inf``), which differ as they do unencrypted. Each server
refuses the other's stream on the first check, ``meta.sum`` (natsd: keyed BLAKE2b; nats-server:
HighwayHash-64), starts without the stream and leaves every file as it was. The same script runs both ways,
each server started from the same configuration file (docs/encryption.md says the same).
"""

from __future__ import annotations

import hashlib
import os

import nats
import pytest
from nats.js.errors import NotFoundError

from tests.helpers.servers import reference_binary, start_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.reference,
    pytest.mark.skipif(reference_binary() is None, reason="nats-server binary not installed"),
]

CONF = 'jetstream {{ cipher: {cipher}, key: "interop-key" }}\n'


def _tree(root) -> dict[str, str]:
    out = {}
    for d, _dirs, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


async def _fill(url: str) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="ORDERS", subjects=["orders.>"])
    for i in range(5):
        await js.publish("orders.new", b"hello %d" % i)
    await nc.close()


async def _streams(url: str) -> list[str]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    try:
        await js.stream_info("ORDERS")
        found = ["ORDERS"]
    except NotFoundError:
        found = []
    await nc.close()
    return found


@pytest.mark.timeout(60)
@pytest.mark.parametrize("cipher", ["chachapoly", "aes"])
@pytest.mark.parametrize("writer,reader", [("reference", "natsd"), ("natsd", "reference")])
async def test_an_encrypted_store_does_not_cross_between_the_servers(tmp_path, cipher, writer, reader):
    conf = tmp_path / "enc.conf"
    conf.write_text(CONF.format(cipher=cipher))
    sd = tmp_path / "store"
    w = start_server(writer, tmp_path / "w", config=conf, store_dir=sd)
    try:
        await _fill(w.url)
        assert await _streams(w.url) == ["ORDERS"]
    finally:
        w.stop()
    stream_dir = sd / "jetstream" / "$G" / "streams" / "ORDERS"
    assert (stream_dir / "meta.key").exists() and (stream_dir / "msgs" / "1.key").exists()
    before = _tree(sd)
    r = start_server(reader, tmp_path / "r", config=conf, store_dir=sd)
    try:
        assert await _streams(r.url) == []
    finally:
        r.stop()
    log = r.log()
    assert "interop-key" not in log
    if reader == "natsd":
        assert "meta.inf does not match its checksum" in log
    else:
        assert 'meta.inf": checksums do not match' in log
    assert _tree(sd) == before
