"""kill -9 against the file store writing on its writer thread (natsd.store.file.writer, issue 15):
a writer process runs an asyncio loop, appends a few messages per turn, hands each turn to
``flush_async`` and reports a turn acknowledged only once ``written_token`` says its write is
done, as the stream releases PubAcks. Killed with SIGKILL while writes are in flight, the
reopened store must hold every acknowledged message byte for byte (and none of the acknowledged
deletes). Small blocks make the writes cross block rolls."""

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
from tests.acceptance.test_store_kill9 import keys_for

WRITER = textwrap.dedent(
    """
    import asyncio, hashlib, sys
    from natsd.clock import SystemClock
    from natsd.store.base import StoreConfig
    from natsd.store.file import FileStreamStore
    from natsd.store.file.writer import BlockWriter

    from natsd.store.file.encryption import Encryption, StoreCipher

    directory, block_size, cipher = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    keys = Encryption(StoreCipher(cipher), "kill-9-key").for_account("$G") if cipher else None
    out = sys.stdout

    async def main():
        store = FileStreamStore(StoreConfig(name="K", storage="file"), SystemClock(), directory,
                                block_size=block_size, writer=BlockWriter(threshold=1), keys=keys)
        waiting = []  # (token, lines) per turn, in order

        def written():
            assert store.take_rollback() is None
            done = store.written_token
            lines = []
            while waiting and waiting[0][0] <= done:
                lines += waiting.pop(0)[1] + ["t 0"]
            if lines:
                out.write("\\n".join(lines) + "\\n")
                out.flush()

        turn = 0
        while True:
            turn += 1
            lines = []
            for _ in range(1 + turn % 7):
                n = store.state().last_seq + 1
                body = (hashlib.sha256(b"%d" % n).digest() * 100)[: n % 3000]
                hdr = b"NATS/1.0\\r\\nNats-Msg-Id: %d\\r\\n\\r\\n" % n if n % 3 == 0 else None
                seq, _ = store.store_msg("kill.%d" % (n % 5), hdr, body)
                assert seq == n
                lines.append("a %d" % seq)
            if turn % 4 == 0:
                victim = store.state().last_seq - 3
                if store.remove_msg(victim):
                    lines.append("d %d" % victim)
            token = store.flush_async(written)
            waiting.append((token or (waiting[-1][0] if waiting else 0), lines))
            written()
            await asyncio.sleep(0)

    asyncio.run(main())
    """
)


def expected(n: int) -> tuple[str, bytes | None, bytes]:
    body = (hashlib.sha256(b"%d" % n).digest() * 100)[: n % 3000]
    hdr = b"NATS/1.0\r\nNats-Msg-Id: %d\r\n\r\n" % n if n % 3 == 0 else None
    return "kill.%d" % (n % 5), hdr, body


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cipher", ["", "chachapoly"], ids=["plain", "encrypted"])
def test_sigkill_with_writes_in_flight_loses_nothing_acknowledged(tmp_path, cipher):
    d = str(tmp_path / "K")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, d, "65536", cipher], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
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
                if len(acked) >= 3000:
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
    # A write killed halfway (a pwrite of many pages can be cut short by SIGKILL) leaves a torn
    # tail, which recovery cuts off and reports: only ever records nobody was told about.
    assert all(seq > max(acked) for seq in st.lost_msgs or ()), st.lost_msgs
    for seq in sorted(acked):
        if seq in deleted:
            with pytest.raises(MsgNotFound):
                store.load_msg(seq)
            continue
        m = store.load_msg(seq)
        assert (m.subject, m.hdr, m.msg) == expected(seq), f"message {seq} differs"
    nxt, _ = store.store_msg("after", None, b"restart")
    assert nxt == st.last_seq + 1
    store.stop()
