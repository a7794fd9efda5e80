"""CPU per message of the sans-IO parser alone (natsd.protocol.parser), per input shape.

Each shape is one 200-message chunk fed again and again to one parser (as a connection's reads);
figures are ``time.process_time`` per message, best of 30 rounds of 50 feeds:

* ``same_line_batch``: one publisher streaming one subject (core pub->sub; batch mode, one run event);
* ``same_line_plain``: the same without batch mode (one event per message);
* ``alt_subjects``: two subjects alternating (no run to merge);
* ``reply_inbox``: a reply inbox per message (requests, JetStream publishes);
* ``acks``: reply-less PUBs to ever new subjects (JetStream acks: OP_PUB_RUN);
* ``hpub_reply``: HPUB with headers and a reply per message.

    PYTHONPATH=src .venv/bin/python bench/bench_parser.py
"""

import time

from natsd.protocol.parser import Parser

BODY = b"x" * 128
SHAPES = {
    "same_line_batch": (True, b"".join(b"PUB fa 128\r\n%s\r\n" % BODY for _ in range(200))),
    "same_line_plain": (False, b"".join(b"PUB fa 128\r\n%s\r\n" % BODY for _ in range(200))),
    "alt_subjects": (True, b"".join(b"PUB fa 128\r\n%s\r\nPUB fb 128\r\n%s\r\n" % (BODY, BODY) for _ in range(100))),
    "reply_inbox": (True, b"".join(b"PUB one _INBOX.abc.%d 128\r\n%s\r\n" % (i, BODY) for i in range(200))),
    "acks": (True, b"".join(b"PUB $JS.ACK.s.c.1.%d.%d.1700000000.0 4\r\n+ACK\r\n" % (i, i) for i in range(200))),
    "hpub_reply": (
        True,
        b"".join(b"HPUB h r.%d 18 146\r\nNATS/1.0\r\nA: b\r\n\r\n%s\r\n" % (i, BODY) for i in range(200)),
    ),
}


def measure(batch: bool, data: bytes, msgs: int = 200, rounds: int = 30, feeds: int = 50) -> float:
    p = Parser(batch=batch)
    p.feed(data)
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(feeds):
            p.feed(data)
        best = min(best, (time.process_time() - t0) / (feeds * msgs) * 1e6)
    return best


def main() -> None:
    for name, (batch, data) in SHAPES.items():
        print(f"{name:<18} {measure(batch, data):.3f} us/msg")


if __name__ == "__main__":
    main()
