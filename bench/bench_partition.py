"""What a partition key (``natsd.partition_key``, issue 27) costs a pull consumer: 16 pulling
clients, 10,000 keys, against the same consumer without a key.

In-process (the engine on an in-memory port and a ManualClock, a memory stream): ``--msgs``
messages on ``ord.<key>`` over ``--keys`` keys, then 16 clients each keep one pull request of
``--batch`` messages waiting and ack everything they get at once, until the consumer is drained.
Prints messages/s (CPU of this process) for both consumers and the ratio; the partitioned run
also checks that each key went out in stream order, one at a time.

    .venv/bin/python bench/bench_partition.py [--msgs 50000] [--keys 10000] [--batch 50]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CLIENTS = 16
SEC = 1_000_000_000


def run(msgs: int, keys: int, batch: int, partitioned: bool) -> tuple[float, int]:
    from tests.helpers.fakeports import JsEnv

    with tempfile.TemporaryDirectory() as d:
        env = JsEnv(d)
        env.api("$JS.API.STREAM.CREATE.ORD", {"name": "ORD", "subjects": ["ord.>"], "storage": "memory"})
        stream = env.account.streams["ORD"]
        rng = random.Random(7)
        for i in range(msgs):
            stream.process_msg(f"ord.k{rng.randrange(keys)}", "", None, b"x" * 64)
        env.clock.run_soon()
        cfg = {"durable_name": "P", "ack_policy": "explicit", "filter_subject": "ord.*", "max_ack_pending": 20000}
        if partitioned:
            cfg["metadata"] = {"natsd.partition_key": "{{wildcard(1)}}"}
        env.api("$JS.API.CONSUMER.CREATE.ORD.P", {"stream_name": "ORD", "config": cfg})
        ports = env.ports
        inbox = env.inbox
        last: dict[str, int] = {}
        got = 0
        t0 = time.process_time()
        rounds = 0
        while got < msgs:
            rounds += 1
            if rounds > 20 * msgs // (CLIENTS * batch) + 100:
                raise RuntimeError(f"stalled at {got} of {msgs}")
            for c in range(CLIENTS):
                ports.request(
                    "$JS.API.CONSUMER.MSG.NEXT.ORD.P", {"batch": batch, "expires": 30 * SEC}, reply=f"_INBOX.c{c}"
                )
            env.clock.run_soon()
            new = inbox.msgs
            inbox.msgs = []
            for m in new:
                if not m.reply.startswith("$JS.ACK."):
                    continue
                if partitioned:
                    seq = int(m.reply.split(".")[5])
                    assert last.get(m.shown, 0) < seq, "a key went out of order"
                    last[m.shown] = seq
                ports.publish(m.reply, "", None, b"+ACK")
                got += 1
            env.clock.run_soon()
        dt = time.process_time() - t0
        env.stop()
        return dt, got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--msgs", type=int, default=50_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=50)
    a = ap.parse_args()
    plain, n = run(a.msgs, a.keys, a.batch, False)
    keyed, _ = run(a.msgs, a.keys, a.batch, True)
    print(
        json.dumps(
            {
                "clients": CLIENTS,
                "keys": a.keys,
                "msgs": n,
                "no_key_msgs_per_s": round(n / plain),
                "partition_key_msgs_per_s": round(n / keyed),
                "keyed_over_no_key": round(plain / keyed, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
