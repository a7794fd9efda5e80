"""``jetstream { limits { default_max_consumers } }`` (nats-server 2.15): a stream whose
``max_consumers`` is unset takes at most 1,000 consumers by default (-1 = unlimited), refused with
10026 "maximum consumers limit reached"; a stream's own ``max_consumers`` wins."""

from __future__ import annotations

import json
import tempfile

import nats
import pytest

from natsd.config.options import options_from_tree
from natsd.config.parser import parse
from tests.helpers.inproc import running_server, side_by_side
from tests.helpers.servers import reference_binary, start_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.reference,
    pytest.mark.timeout(120),
    pytest.mark.skipif(reference_binary() is None, reason="nats-server binary not available"),
]


async def _fill(url: str, streams: dict[str, int], n: int) -> list:
    nc = await nats.connect(url)
    out = []
    try:
        for name, mc in streams.items():
            cfg = {"name": name, "subjects": [name.lower()], **({"max_consumers": mc} if mc else {})}
            await nc.request(f"$JS.API.STREAM.CREATE.{name}", json.dumps(cfg).encode(), timeout=5)
            created, first_error = 0, None
            for i in range(n):
                body = {"stream_name": name, "config": {"durable_name": f"C{i}", "mem_storage": True}}
                r = json.loads(
                    (
                        await nc.request(f"$JS.API.CONSUMER.CREATE.{name}.C{i}", json.dumps(body).encode(), timeout=5)
                    ).data
                )
                if "error" in r:
                    first_error = first_error or (i, r["error"])
                else:
                    created += 1
            out.append((name, created, first_error))
    finally:
        await nc.close()
    return out


async def test_a_stream_takes_1000_consumers_by_default_as_nats_server(tmp_path):
    expected, got = await side_by_side(tmp_path, lambda url: _fill(url, {"S": 0}, 1002))
    assert expected == [
        ("S", 1000, (1000, {"code": 400, "err_code": 10026, "description": "maximum consumers limit reached"}))
    ]
    assert got == expected


@pytest.mark.parametrize("default", [3, -1])
async def test_default_max_consumers_from_the_config_file(tmp_path, default):
    text = f'jetstream {{ store_dir: "{{sd}}", limits {{ default_max_consumers: {default} }} }}\n'
    ref_conf = tmp_path / "ref.conf"
    ref_conf.write_text(text.replace("{sd}", str(tmp_path / "ref-js")))
    streams = {"DFLT": 0, "OWN": 5, "LOW": 2}
    ref = start_server("reference", tmp_path, config=ref_conf, jetstream=False)
    try:
        expected = await _fill(ref.url, streams, 7)
    finally:
        ref.stop()
    opts = options_from_tree(parse(text.replace("{sd}", tempfile.mkdtemp(dir=tmp_path)), "t.conf", env={}))
    opts.host, opts.port, opts.http_port = "127.0.0.1", 0, -1
    async with running_server(options=opts) as server:
        got = await _fill(server.client_url, streams, 7)
    assert [e[1] for e in expected] == ([3, 5, 2] if default == 3 else [7, 5, 2])
    assert got == expected
