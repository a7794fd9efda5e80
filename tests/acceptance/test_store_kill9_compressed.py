"""kill -9 against a file store with ``compression: s2``: the writer of test_store_kill9 with
compressed blocks and small blocks, so that the process is killed while blocks are being sealed,
compressed on the compression thread and swapped in. The reopened store must hold every
acknowledged message byte for byte, most sealed blocks compressed, no compression leftovers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from natsd.clock import ManualClock
from natsd.store import open_stream_store
from natsd.store.base import MsgNotFound, StoreConfig
from natsd.store.file.compress import COMPRESS_TMP, MAGIC
from tests.acceptance.test_store_kill9 import WRITER, expected, keys_for

pytestmark = pytest.mark.acceptance

COMPRESSED_WRITER = WRITER.replace(
    'StoreConfig(name="K", storage="file")', 'StoreConfig(name="K", storage="file", compression="s2")'
)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("index_every", [50, 10**9], ids=["with-index", "full-scan"])
@pytest.mark.parametrize("cipher", ["", "aes"], ids=["plain", "encrypted"])
def test_sigkill_on_a_compressed_stream_loses_nothing_flushed(tmp_path, index_every, cipher):
    assert COMPRESSED_WRITER != WRITER
    d = str(tmp_path / "K")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.Popen(
        [sys.executable, "-c", COMPRESSED_WRITER, d, "16384", str(index_every), cipher],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    acked: set[int] = set()
    deleted: set[int] = set()
    try:
        while True:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"writer died: {proc.stderr.read().decode()}")
            kind, seq = line.split()
            if kind == b"t":
                if len(acked) >= 4000:
                    break
                continue
            (acked if kind == b"a" else deleted).add(int(seq))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    msgs_dir = os.path.join(d, "msgs")
    blocks = [n for n in os.listdir(msgs_dir) if n.endswith(".blk")]
    compressed = 0
    keys = keys_for(cipher)
    for n in blocks:
        with open(os.path.join(msgs_dir, n), "rb") as f:
            head = f.read(8)
        if keys is not None:  # an encrypted block: its first bytes through its compressed key stream
            bid = n.removesuffix(".blk")
            head = keys.open(os.path.join(msgs_dir, f"{bid}.key"), f"K:{bid}").keystream().compressed.xor(head, 0)
        compressed += head == MAGIC
    # Some blocks were compressed before the kill (how many depends on the machine's load: the
    # compression thread trails the writer).
    assert compressed >= 1, (compressed, len(blocks))

    cfg = StoreConfig(name="K", storage="file", compression="s2")
    store = open_stream_store(cfg, ManualClock(), d, block_size=16384, compress_inline=True, keys=keys)
    assert not [n for n in os.listdir(msgs_dir) if n.endswith(COMPRESS_TMP)]
    st = store.state()
    assert st.last_seq >= max(acked)
    assert not st.lost_msgs
    for seq in sorted(acked):
        if seq in deleted:
            with pytest.raises(MsgNotFound):
                store.load_msg(seq)
            continue
        m = store.load_msg(seq)
        assert (m.subject, m.hdr, m.msg) == expected(seq), f"message {seq} differs"
    # The sealed blocks the kill left plain were compressed at start (inline here).
    sealed = [b for b in store._blocks.values() if b is not store._lmb and b.flushed]
    assert sealed and all(b.compressed for b in sealed)
    nxt, _ = store.store_msg("after", None, b"restart")
    assert nxt == st.last_seq + 1
    store.stop()
