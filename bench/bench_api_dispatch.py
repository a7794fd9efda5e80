"""``$JS.API`` request dispatch: route lookup per request, and one API request end to end.

Socket-free (FakePorts + ManualClock), natsd only: the API is not the message hot path, this
only checks that dispatching through the API table (a Sublist) is no slower than before. Run:

    .venv/bin/python bench/bench_api_dispatch.py [--tree DIR]

``--tree`` measures another checkout (its ``src`` and ``tests``), e.g. the tree before a change;
both the old per-account trie (``JsAccount.router``) and the Sublist table are understood.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

SUBJECTS = [
    "$JS.API.STREAM.INFO.ORDERS",
    "$JS.API.CONSUMER.INFO.ORDERS.C1",
    "$JS.API.INFO",
    "$JS.API.CONSUMER.CREATE.ORDERS.C1.orders.>",
    "$JS.API.STREAM.TEMPLATE.NAMES",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--lookups", type=int, default=200_000)
    ap.add_argument("--requests", type=int, default=5_000)
    args = ap.parse_args()
    sys.path[:0] = [str(args.tree / "src"), str(args.tree)]
    from tests.helpers.fakeports import JsEnv

    with tempfile.TemporaryDirectory() as d:
        env = JsEnv(d)
        env.create("ORDERS", storage="memory")
        env.api(
            "$JS.API.CONSUMER.CREATE.ORDERS.C1",
            {"stream_name": "ORDERS", "config": {"durable_name": "C1", "ack_policy": "explicit"}},
        )
        acc = env.account
        if hasattr(acc, "router"):

            def lookup(s: str) -> object:
                return acc.router.lookup(s.split("."))

            tag = "per-account trie"
        else:
            from natsd.jetstream.api import ROUTES
            from natsd.jetstream.api.router import ApiDispatcher

            disp = ApiDispatcher(ROUTES)

            def lookup(s: str) -> object:  # the split is still made once per request (ApiRequest.tokens)
                return disp.lookup(s), s.split(".")

            tag = "Sublist table"
        n = args.lookups
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(n // len(SUBJECTS)):
                for s in SUBJECTS:
                    lookup(s)
            best = min(best, (time.perf_counter() - t) / n * 1e9)
        m = args.requests
        best_req = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            for _ in range(m):
                env.ports.request("$JS.API.CONSUMER.INFO.ORDERS.C1", b"")
            env.clock.run_soon()
            best_req = min(best_req, (time.perf_counter() - t) / m * 1e6)
        env.stop()
    print(f"{tag} ({args.tree}): route lookup {best:.0f} ns; CONSUMER.INFO request end to end {best_req:.1f} us")


if __name__ == "__main__":
    main()
