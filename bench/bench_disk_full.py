"""The "disk full" measure of issue 14: a durable consumer, a full disk (a small tmpfs filled by a
filler file), space given back, kill -9 and restart; against natsd and nats-server.

Prints, per server: publishes acknowledged / refused (by error code) / unanswered in each phase,
acknowledged messages never delivered to the durable consumer ("lost"), acknowledged sequences
used twice, and whether publishing worked again after space returned without any operator action
(no purge, no restart). Needs root (it mounts a tmpfs); not a timed benchmark.

    sudo PYTHONPATH=src .venv/bin/python bench/bench_disk_full.py [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.diskfull import disk_full_run  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the raw results as JSON")
    ap.add_argument("--fs-mb", type=int, default=6)
    args = ap.parse_args()
    results = []
    for kind in ("natsd", "reference"):
        with tempfile.TemporaryDirectory(prefix=f"diskfull-{kind}-") as d:
            results.append(disk_full_run(kind, Path(d), fs_mb=args.fs_mb))
    if args.json:
        print(json.dumps([{k: v for k, v in r.items() if k not in ("acked", "delivered")} for r in results]))
        return
    for r in results:
        print(f"== {r['kind']}")
        for phase in ("before", "while_full", "space_back", "after_restart"):
            print(f"  {phase:14s} {r[phase]}")
        recovered = r["space_back"].get("acked", 0) > 0
        print(
            f"  acknowledged {len(r['acked'])}, lost {len(r['lost'])}, acked sequences used twice "
            f"{r['acked_twice']}, unanswered {r['unanswered']}, "
            f"publishing works again once space returns (no restart): {'yes' if recovered else 'no'}"
        )


if __name__ == "__main__":
    main()
