"""What JSON Schema validation at publish (natsd.schema.<subject>, issue 27) costs.

Two measurements, in-process, no sockets (the engine on an in-memory port and a ManualClock):

1. the validator libraries on a typical order schema (an object with 6 typed properties, two
   required, a nested array of items): ``jsonschema`` (Draft 2020-12 validator, reused) against
   ``fastjsonschema`` (compiled), µs per valid payload;
2. natsd's publish path (``Stream.process_msg`` with a reply, PubAck included) on a memory
   stream without a schema and the same stream with the schema inline, µs per publish.

    .venv/bin/python bench/bench_schemas.py [--n 20000]

The figures are CPU time of this process (``time.process_time``), best of 3 rounds.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SCHEMA = {
    "type": "object",
    "required": ["id", "qty"],
    "properties": {
        "id": {"type": "string", "minLength": 1},
        "qty": {"type": "integer", "minimum": 1},
        "price": {"type": "number"},
        "customer": {"type": "string"},
        "express": {"type": "boolean"},
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["sku"],
                "properties": {"sku": {"type": "string"}, "n": {"type": "integer"}},
            },
        },
    },
}
DOC = {
    "id": "o-123",
    "qty": 3,
    "price": 12.5,
    "customer": "acme",
    "express": False,
    "lines": [{"sku": "a", "n": 1}, {"sku": "b", "n": 2}],
}
PAYLOAD = json.dumps(DOC).encode()


def _best(fn, n: int) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        fn(n)
        best = min(best, time.process_time() - t0)
    return best / n * 1e6


def bench_libraries(n: int) -> dict:
    import fastjsonschema
    import jsonschema

    v = jsonschema.Draft202012Validator(SCHEMA)
    f = fastjsonschema.compile(SCHEMA)

    def run_js(k: int) -> None:
        for _ in range(k):
            v.validate(json.loads(PAYLOAD))

    def run_fast(k: int) -> None:
        for _ in range(k):
            f(json.loads(PAYLOAD))

    return {"jsonschema_us": _best(run_js, n), "fastjsonschema_us": _best(run_fast, n)}


def bench_publish(n: int) -> dict:
    from tests.helpers.fakeports import JsEnv

    out = {}
    for label, md in (("no_schema_us", None), ("schema_us", {"natsd.schema.orders.*": json.dumps(SCHEMA)})):
        with tempfile.TemporaryDirectory() as d:
            env = JsEnv(d)
            cfg: dict = {"name": "ORD", "subjects": ["orders.>"], "storage": "memory"}
            if md:
                cfg["metadata"] = md
            env.api("$JS.API.STREAM.CREATE.ORD", cfg)
            stream = env.account.streams["ORD"]
            clock = env.clock

            def run(k: int, stream=stream, clock=clock, env=env) -> None:
                pm = stream.process_msg
                for i in range(k):
                    pm("orders.new", "_INBOX.b", None, PAYLOAD)
                    if i & 255 == 255:
                        clock.run_soon()  # the turn's flush: PubAcks
                clock.run_soon()
                env.inbox.msgs.clear()

            out[label] = _best(run, n)
            assert stream.store.state().msgs == 3 * n
            env.stop()
    out["schema_cost_us"] = out["schema_us"] - out["no_schema_us"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000)
    a = ap.parse_args()
    libs = bench_libraries(a.n)
    pub = bench_publish(a.n)
    print(
        json.dumps(
            {
                **libs,
                "fast_speedup": round(libs["jsonschema_us"] / libs["fastjsonschema_us"], 1),
                **pub,
                "publish_ratio": round(pub["schema_us"] / pub["no_schema_us"], 2),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
