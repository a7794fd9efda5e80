"""What ``natsd.keep_last_under_max_age`` (issue 27) costs the store: KV-style puts on many keys with
age expiry running, with the option against plain ``max_age``.

In-process, memory store, ManualClock: ``--keys`` subjects with one message each, all older than
max_age; then ``--puts`` puts on random keys with an expiry pass (next_expiry + expire) every 100
puts. With the option every key's last message stays; without it each pass removes what is due.
Prints µs per put (expiry passes included) for both, and the ratio.

    .venv/bin/python bench/bench_keep_last.py [--keys 100000] [--puts 20000]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from natsd.clock import ManualClock
from natsd.store.base import StoreConfig
from natsd.store.memory import MemoryStreamStore

SEC = 1_000_000_000


def run(keys: int, puts: int, keep_last: bool) -> float:
    clock = ManualClock()
    s = MemoryStreamStore(
        StoreConfig(name="KV", subjects=["k.>"], max_age_ns=SEC, keep_last_under_max_age=keep_last), clock
    )
    for i in range(keys):
        s.store_msg(f"k.{i}", None, b"v")
    clock.advance(2 * SEC)
    s.expire(clock.time_ns())
    rng = random.Random(1)
    names = [f"k.{rng.randrange(keys)}" for _ in range(puts)]
    t0 = time.process_time()
    for j, name in enumerate(names):
        s.store_msg(name, None, b"w")
        if j % 100 == 0:
            s.next_expiry()
            s.expire(clock.time_ns())
            clock.advance(SEC // 100)
    dt = time.process_time() - t0
    s.stop()
    return dt / puts * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--puts", type=int, default=20_000)
    a = ap.parse_args()
    plain = min(run(a.keys, a.puts, False) for _ in range(3))
    keep = min(run(a.keys, a.puts, True) for _ in range(3))
    print(
        json.dumps(
            {
                "plain_max_age_us_per_put": round(plain, 2),
                "keep_last_us_per_put": round(keep, 2),
                "ratio": round(keep / plain, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
