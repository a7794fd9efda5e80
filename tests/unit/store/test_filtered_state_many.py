"""filtered_state over a wildcard that matches many subjects with messages on both sides of the
start (a consumer on ``plgd.*.<event>`` asking for its pending count): counted with one pass of
the tail, the same count, first and last as a message-by-message reckoning, removals included."""

from __future__ import annotations

import pytest

from natsd.clock import ManualClock
from natsd.store.base import StoreConfig
from natsd.store.memory import MemoryStreamStore

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]


def test_many_partial_subjects_are_counted_as_one_by_one():
    st = MemoryStreamStore(StoreConfig(name="S", subjects=[">"]), ManualClock())
    live = {}
    for i in range(3000):
        subject = "plgd.%d.%s" % (i % 40, ("on", "off", "x")[i % 3])
        seq, _ = st.store_msg(subject, None, b"p")
        live[seq] = subject
    for seq in range(5, 3000, 7):
        st.remove_msg(seq)
        del live[seq]
    for flt in ("plgd.*.on", "plgd.3.*", "plgd.*.*", "plgd.>"):
        for start in (1, 2, 17, 500, 1499, 2990, 3000, 3001):
            got = st.filtered_state(start, flt)
            prefix = flt.split("*")[0].rstrip(">")
            suffix = flt.split("*")[-1] if "*" in flt else ""

            def hit(subj, prefix=prefix, suffix=suffix, flt=flt):
                toks, ftoks = subj.split("."), flt.split(".")
                if ftoks[-1] == ">":
                    return subj.startswith(prefix)
                return len(toks) == len(ftoks) and all(f in ("*", t) for f, t in zip(ftoks, toks))

            seqs = sorted(s for s, subj in live.items() if s >= start and hit(subj))
            want = (len(seqs), seqs[0] if seqs else 0, seqs[-1] if seqs else 0)
            assert (got.msgs, got.first, got.last) == want, (flt, start)
    st.stop()
