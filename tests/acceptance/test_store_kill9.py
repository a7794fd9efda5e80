"""kill -9 against the file store: a writer process appends, flush()es and reports what it
acknowledged over a pipe; it is killed with SIGKILL mid-stream; the reopened store must hold
every acknowledged message byte for byte (and none of the acknowledged deletes)."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from natsd.clock import ManualClock
from natsd.store import open_stream_store
from natsd.store.base import MsgNotFound, StoreConfig
from natsd.store.file.encryption import Encryption, StoreCipher

WRITER = textwrap.dedent(
    """
    import hashlib, sys
    from natsd.clock import SystemClock
    from natsd.store import open_stream_store
    from natsd.store.base import StoreConfig

    from natsd.store.file.encryption import Encryption, StoreCipher

    directory, block_size, index_every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    cipher = sys.argv[4] if len(sys.argv) > 4 else ""  # "": a plain store
    keys = Encryption(StoreCipher(cipher), "kill-9-key").for_account("$G") if cipher else None
    store = open_stream_store(StoreConfig(name="K", storage="file"), SystemClock(), directory,
                              block_size=block_size, keys=keys)
    out = sys.stdout
    turn = 0
    while True:
        turn += 1
        acked = []
        for _ in range(1 + turn % 7):          # one "loop turn": a few messages ...
            n = store.state().last_seq + 1
            body = (hashlib.sha256(b"%d" % n).digest() * 8)[: n % 200]
            hdr = b"NATS/1.0\\r\\nNats-Msg-Id: %d\\r\\n\\r\\n" % n if n % 3 == 0 else None
            seq, _ = store.store_msg("kill.%d" % (n % 5), hdr, body)
            assert seq == n
            acked.append("a %d" % seq)
        deleted = []
        if turn % 4 == 0:
            victim = store.state().last_seq - 3
            if store.remove_msg(victim):
                deleted.append("d %d" % victim)
        store.flush()                            # ... then one flush, then the acks
        out.write("\\n".join(acked + deleted + ["t 0"]) + "\\n")
        out.flush()
        if turn % index_every == 0:
            store.write_index()
    """
)


def keys_for(cipher: str):
    """The writer's encryption keys (None for a plain store)."""
    return Encryption(StoreCipher(cipher), "kill-9-key").for_account("$G") if cipher else None


def expected(n: int) -> tuple[str, bytes | None, bytes]:
    body = (hashlib.sha256(b"%d" % n).digest() * 8)[: n % 200]
    hdr = b"NATS/1.0\r\nNats-Msg-Id: %d\r\n\r\n" % n if n % 3 == 0 else None
    return "kill.%d" % (n % 5), hdr, body


@pytest.mark.timeout(120)
@pytest.mark.parametrize("index_every", [50, 10**9], ids=["with-index", "full-scan"])
@pytest.mark.parametrize("cipher", ["", "chachapoly"], ids=["plain", "encrypted"])
def test_sigkill_loses_nothing_flushed(tmp_path, index_every, cipher):
    d = str(tmp_path / "K")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, d, "65536", str(index_every), cipher],
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
            if kind == b"t":  # end of one flushed turn: stop on a turn boundary
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

    store = open_stream_store(
        StoreConfig(name="K", storage="file"), ManualClock(), d, block_size=65536, keys=keys_for(cipher)
    )
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
    # The store carries on from where the writer was killed.
    nxt, _ = store.store_msg("after", None, b"restart")
    assert nxt == st.last_seq + 1
    store.stop()
