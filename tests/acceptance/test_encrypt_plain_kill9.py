"""kill -9 while a stream stored unencrypted is being encrypted in place (natsd.store.file.
encrypt_plain): a process converts a plain store of many blocks and is killed at a different
moment each time; the next start finds every message, and the stream is either still plain (then
converted there) or encrypted, never a mix."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from natsd.clock import ManualClock
from natsd.store import list_stream_dirs, load_stream_meta, open_stream_store
from natsd.store.base import StoreConfig
from natsd.store.file.encryption import Encryption, StoreCipher

pytestmark = [pytest.mark.acceptance, pytest.mark.timeout(300)]

N = 6000
BODY = 2000  # ~12 MB in 24 blocks of 512 KiB: the conversion takes a while to kill into
KEY = "kill-9-conversion-key"

CONVERTER = textwrap.dedent(
    """
    import sys
    from natsd.store import list_stream_dirs, load_stream_meta
    from natsd.store.file.encryption import Encryption, StoreCipher

    keys = Encryption(StoreCipher(sys.argv[2]), sys.argv[3]).for_account("$G")
    dirs = list_stream_dirs(sys.argv[1])
    print("go", flush=True)
    for d in dirs:
        load_stream_meta(d, keys)
    print("done", flush=True)
    """
)


def _body(i: int) -> bytes:
    return (b"%08d" % i) * (BODY // 8)


def _plain(account: Path) -> None:
    s = open_stream_store(
        StoreConfig(storage="file", name="S"), ManualClock(), str(account / "streams" / "S"), block_size=512 * 1024
    )
    for i in range(1, N + 1):
        s.store_msg(f"s.{i % 7}", None, _body(i))
    s.flush()
    s.stop()


def _check(account: Path, keys) -> None:
    dirs = list_stream_dirs(str(account))
    assert load_stream_meta(dirs[0], keys)["name"] == "S"
    assert sorted(os.listdir(account / "streams")) == ["S"]
    s = open_stream_store(
        StoreConfig(storage="file", name="S"), ManualClock(), dirs[0], block_size=512 * 1024, keys=keys
    )
    try:
        st = s.state()
        assert st.msgs == N and not st.lost_msgs
        for seq in (1, 2, N // 2, N - 1, N):
            assert s.load_msg(seq).msg == _body(seq)
        assert all(s.load_msg(seq).msg[:8] == b"%08d" % seq for seq in range(1, N + 1))
    finally:
        s.stop()
    assert Path(dirs[0], "meta.key").exists()


@pytest.mark.parametrize("cipher", ["chachapoly", "aes"])
def test_kill9_during_encryption_in_place(tmp_path, cipher):
    pristine = tmp_path / "pristine"
    _plain(pristine)
    keys = Encryption(StoreCipher(cipher), KEY).for_account("$G")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "src") + os.pathsep + env.get("PYTHONPATH", "")
    outcomes = []
    for i, delay in enumerate((0.0, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8)):
        account = tmp_path / f"run{i}"
        shutil.copytree(pristine, account)
        proc = subprocess.Popen(
            [sys.executable, "-c", CONVERTER, str(account), cipher, KEY],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"go"
        time.sleep(delay)
        proc.kill()
        proc.wait(10)
        proc.stdout.close()
        streams = account / "streams"
        finished = sorted(os.listdir(streams)) == ["S"] and (streams / "S" / "meta.key").exists()
        outcomes.append(finished)
        _check(account, keys)
    # (the early kills cut the conversion: the settling and the restart were exercised)
    assert not all(outcomes), outcomes
