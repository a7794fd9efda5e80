"""natsd.nuid: NATS-shaped unique ids, unique across calls, threads and a fork."""

from __future__ import annotations

import os
import re
import threading

import pytest

from natsd.nuid import nuid

_SHAPE = re.compile(r"[0-9A-Za-z]{22}")


def test_shape_and_uniqueness():
    ids = [nuid() for _ in range(20_000)]
    assert all(_SHAPE.fullmatch(i) for i in ids)
    assert len(set(ids)) == len(ids)
    # one generator: a shared random prefix, a sequence in the last ten characters
    assert len({i[:12] for i in ids}) <= 2


def test_unique_across_threads():
    out: list[list[str]] = [[] for _ in range(4)]

    def work(k: int) -> None:
        out[k].extend(nuid() for _ in range(5_000))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = [i for part in out for i in part]
    assert len(set(ids)) == len(ids) == 20_000


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_does_not_repeat_the_parents_ids():
    nuid()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        os.write(w, nuid().encode())
        os._exit(0)
    os.close(w)
    child = os.read(r, 64).decode()
    os.close(r)
    os.waitpid(pid, 0)
    parent = nuid()
    assert _SHAPE.fullmatch(child)
    assert child[:12] != parent[:12]


def test_the_sequence_rolls_over_to_a_new_prefix():
    from natsd import nuid as mod

    g = mod._Nuid()
    g.seq = mod._MAX_SEQ - 1
    before = g.prefix
    a = g.next()
    assert _SHAPE.fullmatch(a) and g.prefix != before and a.startswith(g.prefix)


def test_importing_it_loads_no_client_library():
    import subprocess
    import sys

    code = "import sys, natsd.nuid; print('nats' in sys.modules, 'aiohttp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["False", "False"]  # 13 MB of idle server RSS when it did
