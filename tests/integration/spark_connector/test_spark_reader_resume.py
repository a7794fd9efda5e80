"""The per-task reader (no Spark) survives a server restart in the middle of a range."""

from __future__ import annotations

import pytest

from natsd.spark.reader import RangeSpec, read_range
from natsd.spark.wire import ConnectOptions
from natsd.spark.writer import Publisher
from tests.helpers.servers import reference_binary, start_server

from .conftest import make_stream

N = 30_000
PAD = b"." * 1000


@pytest.mark.parametrize("kind", [pytest.param("reference", marks=pytest.mark.reference), "natsd"])
def test_reader_resumes_after_server_restart(kind, tmp_path, monkeypatch):
    if kind == "reference" and reference_binary() is None:
        pytest.skip("reference nats-server binary not installed")
    store = tmp_path / "store"
    srv = start_server(kind, tmp_path, store_dir=store)
    try:
        make_stream(srv.url, "RS", ["rs.>"])
        opts = ConnectOptions(servers=srv.url)
        pub = Publisher(opts)
        for i in range(N):
            # 1 KB messages: 30 MB is far more than socket buffers plus a flow-control window,
            # so most of the range is still on the server when it restarts.
            pub.publish("rs.x", b"%08d" % i + PAD)
        assert pub.finish().published == N
        from natsd.spark import reader as reader_mod

        reconnects = []
        real = reader_mod._PushRange._reconnect
        monkeypatch.setattr(
            reader_mod._PushRange, "_reconnect", lambda self, seq: (reconnects.append(seq), real(self, seq))
        )
        seqs = []
        batches = read_range(opts, RangeSpec("RS", 1, N, batch_rows=2000, fetch_timeout=30))
        seqs.extend(next(batches).column("seq").to_pylist())
        # Restart the server (same port and store) while the reader is mid-range.
        port = srv.port
        srv.stop()
        srv = start_server(kind, tmp_path, store_dir=store, port=port)
        for b in batches:
            seqs.extend(b.column("seq").to_pylist())
        assert seqs == list(range(1, N + 1))  # nothing lost, nothing twice, in order
        assert len(reconnects) == 1 and 2000 < reconnects[0] + 1 <= N
    finally:
        srv.stop()
