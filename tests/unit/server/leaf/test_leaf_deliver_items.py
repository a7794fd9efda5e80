"""A consumer's batch through a leaf link (``LeafConnection.deliver_items``, the sourcing feed's
path from ``router.deliver_many``) writes exactly the bytes the per-message ``deliver`` writes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from natsd.server.leaf.node import LeafConnection

pytestmark = pytest.mark.unit


class _Clock:
    def time_ns(self) -> int:
        return 0


def _link(headers: bool = True) -> LeafConnection:
    server = SimpleNamespace(
        next_cid=lambda: 1,
        clock=_Clock(),
        loop=SimpleNamespace(call_soon=lambda cb: None),
        options=SimpleNamespace(max_payload=1 << 20, max_pending=64 << 20),
    )
    c = LeafConnection(SimpleNamespace(server=server, options=SimpleNamespace(compression="off")))
    c.ready = True
    c.headers = headers
    return c


ITEMS = [
    (b"orders.1", b"$JS.ACK.O.C.1.5.1.1700000000000000000.3", None, b"one"),
    (b"orders.2", b"$JS.ACK.O.C.1.6.2.1700000000000000001.2", b"NATS/1.0\r\nK: v\r\n\r\n", b"two"),
    (b"orders.3", b"", None, b""),
    (b"$JSC.SI.x", b"$JS.ACK.O.C.1.7.3.1700000000000000002.0", None, b"same subject: no @"),
    (b"orders.4", b"$JS.ACK.O.C.1.8.4.1700000000000000003.0@orders.4", None, b"already suffixed"),
]


@pytest.mark.parametrize("headers", [True, False])
def test_batch_frames_equal_per_message_frames(headers: bool) -> None:
    sub = SimpleNamespace(closed=False, queue=None)
    a, b = _link(headers), _link(headers)
    assert a.deliver_items(sub, "$JSC.SI.x", ITEMS)
    for subject, reply, hdr, payload in ITEMS:
        data = (hdr or b"") + payload
        assert b.deliver(sub, object(), None, data, "$JSC.SI.x", len(hdr or b""), reply, subject)
    assert bytes(a.out) == bytes(b.out)
    assert (a.out_msgs, a.out_bytes) == (b.out_msgs, b.out_bytes) == (5, b.out_bytes)
    assert b"LMSG $JSC.SI.x $JS.ACK.O.C.1.5.1.1700000000000000000.3@orders.1 3\r\none\r\n" in a.out


def test_batch_declines_what_the_per_message_path_must_handle() -> None:
    sub = SimpleNamespace(closed=False, queue="q")
    assert not _link().deliver_items(sub, "$JSC.SI.x", ITEMS)  # a queue member
    sub = SimpleNamespace(closed=False, queue=None)
    c = _link()
    c.ready = False
    assert not c.deliver_items(sub, "$JSC.SI.x", ITEMS)
    assert not _link().deliver_items(sub, "$JS.API.INFO", ITEMS)  # never crosses a link
