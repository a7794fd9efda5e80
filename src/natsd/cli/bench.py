"""``natsctl bench …``: throughput of core publish/subscribe and of JetStream publish/fetch.

``bench pubsub SUBJECT --pub N --sub M`` runs publishers and subscribers together (each its own process,
subscribers first), like ``nats bench``. ``bench pub|sub SUBJECT`` and ``bench js pub|fetch SUBJECT`` take
``--clients N`` (default 1),
``--msgs`` (total over all clients), ``--size`` (payload bytes). With more than one client each one is
a separate process (``python -m natsd.cli.bench --worker JSON``), so the benchmark is not limited to one
Python core. Results are messages/s and MB/s (MB = 10^6 bytes, as ``nats bench`` prints them), in total and
per client.

Worker protocol (worker stdout, one line each): ``progress <messages so far>`` now and then, and finally
``result {"msgs": n, "bytes": n, "seconds": s}``. The parent starts all workers, then sums messages and
divides by the slowest worker's time.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import signal
import statistics
import sys
import time
from typing import Any

from natsd.cli.common import ApiError, CliError, ConnOptions, comma, connect, parse_int, parse_size
from natsd.cli.context import Ctx

BENCH_STREAM = "benchstream"
BENCH_CONSUMER = "natsctl-bench"


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("bench", help="benchmarks: pubsub, pub, sub, js pub, js fetch")
    s = p.add_subparsers(dest="bench_cmd", metavar="VERB", parser_class=type(p))
    s.required = True

    def flags(q: argparse.ArgumentParser) -> None:
        q.add_argument("subject")
        q.add_argument("--clients", default="1", help="concurrent clients, each its own process when > 1")
        q.add_argument("--msgs", default="100000", help="messages in total")
        q.add_argument("--size", default="128", help="payload size, e.g. 128 or 1KB")

    bp = s.add_parser("pub", parents=[common], help="core NATS publish rate")
    flags(bp)
    bp.set_defaults(func=cmd_bench, bench_kind="pub")

    bs = s.add_parser("sub", parents=[common], help="core NATS receive rate (run a publisher alongside)")
    flags(bs)
    bs.set_defaults(func=cmd_bench, bench_kind="sub")

    ps = s.add_parser("pubsub", parents=[common], help="publishers and subscribers at once (like `nats bench`)")
    ps.add_argument("subject")
    ps.add_argument("--pub", default="1", help="publishers, each its own process")
    ps.add_argument("--sub", default="1", help="subscribers, each its own process; each receives every message")
    ps.add_argument("--msgs", default="100000", help="messages published in total")
    ps.add_argument("--size", default="128", help="payload size, e.g. 128 or 1KB")
    ps.set_defaults(func=cmd_pubsub)

    js = s.add_parser("js", help="JetStream benchmarks")
    jss = js.add_subparsers(dest="bench_js_cmd", metavar="VERB", parser_class=type(p))
    jss.required = True
    jp = jss.add_parser("pub", parents=[common], help="JetStream publish rate (acknowledged)")
    flags(jp)
    jp.add_argument("--stream", default=BENCH_STREAM, help="stream to publish into (created when missing)")
    jp.add_argument("--storage", default="file", choices=["file", "memory"])
    jp.add_argument("--purge", action="store_true", help="purge the stream first")
    jp.add_argument("--batch", default="100", help="publishes in flight before waiting for their acks (1 = sync)")
    jp.set_defaults(func=cmd_bench, bench_kind="jspub")
    jf = jss.add_parser("fetch", parents=[common], help="JetStream pull-consumer fetch rate")
    flags(jf)
    jf.add_argument("--stream", default=BENCH_STREAM)
    jf.add_argument("--consumer", default=BENCH_CONSUMER, help="durable pull consumer (created when missing)")
    jf.add_argument("--batch", default="100", help="messages per fetch")
    jf.add_argument("--ack", default="explicit", choices=["explicit", "none"])
    jf.set_defaults(func=cmd_bench, bench_kind="jsfetch")


# ---------------------------------------------------------------------------------------------------------------
# One client (runs in-process for --clients 1, or in a worker process)
# ---------------------------------------------------------------------------------------------------------------


async def run_client(params: dict, report=None) -> dict:
    """Run one benchmark client; ``report(n)`` is called with the running message count now and then."""
    conn = ConnOptions(**params["conn"])
    kind, subject, n, size = params["kind"], params["subject"], params["msgs"], params["size"]
    payload = b"x" * size
    step = max(n // 20, 1)
    nc = await connect(conn, pending_size=64 * 1024 * 1024)
    count = 0
    t0 = time.perf_counter()
    interrupted = False
    try:
        if kind == "pub":
            t0 = time.perf_counter()
            for i in range(n):
                await nc.publish(subject, payload)
                count = i + 1
                if count % 256 == 0:
                    await asyncio.sleep(0)  # publishing may never wait: let Ctrl-C (a cancellation) in
                if report and count % step == 0:
                    report(count)
            await nc.flush(timeout=60)
        elif kind == "sub":
            done = asyncio.get_running_loop().create_future()
            t0 = 0.0

            async def cb(_msg) -> None:
                nonlocal count, t0
                if count == 0:
                    t0 = time.perf_counter()
                count += 1
                if report and count % step == 0:
                    report(count)
                if count >= n and not done.done():
                    done.set_result(None)

            await nc.subscribe(subject, cb=cb, pending_msgs_limit=-1, pending_bytes_limit=-1)
            await nc.flush()
            if report:
                report(0)  # subscribed: the parent may start publishers now
            # Until every message arrived; core NATS may drop under overload, so once messages flow a
            # quiet `idle` period ends the run with what arrived.
            deadline = time.monotonic() + params.get("wait", 300)
            last = -1
            while not done.done() and time.monotonic() < deadline:
                await asyncio.wait({done}, timeout=params.get("idle", 5.0))
                if count and count == last:
                    break
                last = count
            if count == 0:
                t0 = time.perf_counter()
        elif kind == "jspub":
            js = nc.jetstream(timeout=conn.timeout, prefix=conn.api_prefix)
            batch = max(params.get("batch", 100), 1)
            t0 = time.perf_counter()
            if batch == 1:
                for i in range(n):
                    await js.publish(subject, payload)
                    count = i + 1
                    if report and count % step == 0:
                        report(count)
            else:
                pending: list = []
                for i in range(n):
                    pending.append(await js.publish_async(subject, payload))
                    if len(pending) >= batch:
                        await asyncio.gather(*pending)
                        count += len(pending)  # acknowledged ones only
                        pending.clear()
                    if report and (i + 1) % step == 0:
                        report(i + 1)
                if pending:
                    await asyncio.gather(*pending)
                    count += len(pending)
        elif kind == "jsfetch":
            js = nc.jetstream(timeout=conn.timeout, prefix=conn.api_prefix)
            psub = await js.pull_subscribe_bind(params["consumer"], stream=params["stream"])
            batch = max(params.get("batch", 100), 1)
            ack = params.get("ack", "explicit") != "none"
            t0 = time.perf_counter()
            me = asyncio.current_task()
            while count < n:
                # nats-py's fetch loses a cancellation that arrives as a message does (its inner next_msg task
                # completes instead of raising), so Ctrl-C is checked here, once per batch.
                if me is not None and me.cancelling():
                    raise asyncio.CancelledError
                try:
                    msgs = await psub.fetch(min(batch, n - count), timeout=max(conn.timeout, 1.0))
                except Exception:  # nothing more to fetch within the timeout
                    break
                for m in msgs:
                    if ack:
                        await m.ack()
                count += len(msgs)
                if report:
                    report(count)
            await nc.flush()
        else:
            raise CliError(f"unknown benchmark {kind}")
    except asyncio.CancelledError:
        # Ctrl-C: report what was done so far instead of nothing (the caller prints it and exits 130).
        interrupted = True
    finally:
        elapsed = max(time.perf_counter() - t0, 1e-9)
        try:
            await nc.close()
        except Exception:  # closing after an interrupt must not hide the result
            pass
    res: dict[str, Any] = {"msgs": count, "bytes": count * size, "seconds": elapsed}
    if interrupted:
        res["interrupted"] = True
    return res


def _worker_main(spec: str) -> int:
    params = json.loads(spec)

    def report(n: int) -> None:
        sys.stdout.write(f"progress {n}\n")
        sys.stdout.flush()

    try:
        res = asyncio.run(run_client(params, report))
    except CliError as exc:
        sys.stdout.write("error " + json.dumps(str(exc)) + "\n")
        return 1
    sys.stdout.write("result " + json.dumps(res) + "\n")
    sys.stdout.flush()
    return 0


# ---------------------------------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------------------------------


async def _create_unless_exists(api: Any, what: str, create_body: dict) -> bool:
    """Create ``what`` (``STREAM.<name>`` or ``CONSUMER.<stream>.<name>``) unless its INFO answers; True if created."""
    kind, name = what.split(".", 1)
    try:
        await api.request(f"{kind}.INFO.{name}")
    except ApiError as exc:
        if exc.code != 404:
            raise
        await api.request(f"{kind}.CREATE.{name}", create_body)
        return True
    return False


async def _prepare_js(ctx: Ctx, kind: str, a: argparse.Namespace) -> None:
    api = await ctx.api()
    if kind == "jspub":
        created = await _create_unless_exists(
            api,
            f"STREAM.{a.stream}",
            {"name": a.stream, "subjects": [a.subject], "storage": a.storage, "retention": "limits"},
        )
        if not created and a.purge:
            await api.request(f"STREAM.PURGE.{a.stream}", {})
    elif kind == "jsfetch":
        await _create_unless_exists(
            api,
            f"CONSUMER.{a.stream}.{a.consumer}",
            {
                "stream_name": a.stream,
                "config": {
                    "durable_name": a.consumer,
                    "name": a.consumer,
                    "ack_policy": a.ack,
                    "deliver_policy": "all",
                    "filter_subject": a.subject,
                    "max_ack_pending": -1,
                },
            },
        )


async def cmd_bench(ctx: Ctx) -> int:
    a = ctx.args
    kind = a.bench_kind
    clients = max(parse_int(a.clients, flag="--clients"), 1)
    total = parse_int(a.msgs, flag="--msgs")
    size = parse_size(a.size, flag="--size")
    if kind in ("jspub", "jsfetch"):
        await _prepare_js(ctx, kind, a)
    per = [total // clients + (1 if i < total % clients else 0) for i in range(clients)]
    base: dict[str, Any] = {
        "kind": kind,
        "subject": a.subject,
        "size": size,
        "conn": dataclasses.asdict(ctx.conn),  # every connection setting, context ones included
    }
    for k in ("batch",):
        if hasattr(a, k):
            base[k] = parse_int(getattr(a, k), flag=f"--{k}")
    for k in ("stream", "consumer", "ack"):
        if hasattr(a, k):
            base[k] = getattr(a, k)
    label = {"pub": "NATS Pub", "sub": "NATS Sub", "jspub": "JetStream Pub", "jsfetch": "JetStream Fetch"}[kind]
    if not ctx.json:
        ctx.out.print(
            f"Starting {label} benchmark [subject={a.subject}, msgs={comma(total)}, size={size}, clients={clients}]"
        )
        sys.stdout.flush()

    counts = [0] * clients
    ready: set[int] = set()
    bar_ctx = _Bar(ctx, total, label)
    with bar_ctx as bar:

        def reporter(i: int):
            def report(n: int) -> None:
                counts[i] = n
                bar.update(sum(counts))
                if kind == "sub" and i not in ready:
                    ready.add(i)
                    if len(ready) == clients:
                        # Publishers can start now; on stderr so stdout stays the report (or JSON).
                        sys.stderr.write(f"All {clients} subscribers are ready\n")
                        sys.stderr.flush()

            return report

        if clients == 1:
            results = [await run_client({**base, "msgs": per[0]}, reporter(0))]
        else:
            tasks = [asyncio.ensure_future(_spawn({**base, "msgs": per[i]}, reporter(i))) for i in range(clients)]
            try:
                await asyncio.wait(tasks)
            except asyncio.CancelledError:
                # Ctrl-C: each client is told to stop (see _spawn) and reports what it did so far.
                for t in tasks:
                    t.cancel()
                await asyncio.wait(tasks)
            results = [t.result() for t in tasks]
    interrupted = ctx.interrupted or any(r.get("interrupted") for r in results)
    msgs = sum(r["msgs"] for r in results)
    nbytes = sum(r["bytes"] for r in results)
    seconds = max(r["seconds"] for r in results)
    summary = {
        "benchmark": kind,
        "subject": a.subject,
        "clients": clients,
        "msgs": msgs,
        "bytes": nbytes,
        "size": size,
        "seconds": round(seconds, 6),
        "msgs_per_sec": round(msgs / seconds, 1),
        "mb_per_sec": round(nbytes / seconds / 1e6, 3),
        "interrupted": interrupted,
        "per_client": [
            {"msgs": r["msgs"], "seconds": round(r["seconds"], 6), "msgs_per_sec": round(r["msgs"] / r["seconds"], 1)}
            for r in results
        ],
    }
    if ctx.json:
        ctx.out.json_out(summary)
    else:
        _print_bench(ctx, label, summary, size)
    if interrupted:
        sys.stderr.write(
            f"natsctl: interrupted: {label} benchmark stopped after {comma(msgs)} of {comma(total)} messages\n"
        )
        ctx.interrupted = True  # exit code 130
        return 130
    if msgs < total:
        sys.stderr.write(f"natsctl: warning: only {msgs} of {total} messages were received\n")
        return 1
    return 0


def _print_bench(ctx: Ctx, label: str, summary: dict, size: int) -> None:
    """cmd_bench's report as the nats CLI prints it (per client and min/avg/max when several)."""
    ctx.out.print(
        f"\n{label} stats: {comma(int(summary['msgs_per_sec']))} msgs/sec ~ {summary['mb_per_sec']:.2f} MB/sec"
    )
    rates = [c["msgs_per_sec"] for c in summary["per_client"]]
    if summary["clients"] > 1:
        for i, c in enumerate(summary["per_client"], 1):
            ctx.out.print(
                f" [{i}] {comma(int(c['msgs_per_sec']))} msgs/sec ~ "
                f"{c['msgs_per_sec'] * size / 1e6:.2f} MB/sec ({comma(c['msgs'])} msgs)"
            )
        ctx.out.print(
            f" min {comma(int(min(rates)))} | avg {comma(int(statistics.mean(rates)))} | "
            f"max {comma(int(max(rates)))} | stddev {comma(int(statistics.pstdev(rates)))} msgs"
        )


def _stats(results: list[dict], size: int) -> dict:
    msgs = sum(r["msgs"] for r in results)
    seconds = max((r["seconds"] for r in results), default=1e-9)
    return {
        "clients": len(results),
        "msgs": msgs,
        "bytes": msgs * size,
        "seconds": round(seconds, 6),
        "msgs_per_sec": round(msgs / seconds, 1),
        "mb_per_sec": round(msgs * size / seconds / 1e6, 3),
        "per_client": [
            {"msgs": r["msgs"], "seconds": round(r["seconds"], 6), "msgs_per_sec": round(r["msgs"] / r["seconds"], 1)}
            for r in results
        ],
    }


def _print_pubsub(ctx: Ctx, both: dict, pub_s: dict, sub_s: dict, size: int) -> None:
    """cmd_pubsub's report: both sides together, then each side per client."""
    ctx.out.print(
        f"\nNATS Pub/Sub stats: {comma(int(both['msgs_per_sec']))} msgs/sec ~ {both['mb_per_sec']:.2f} MB/sec"
    )
    for label, st in (("Pub", pub_s), ("Sub", sub_s)):
        if st["clients"]:
            ctx.out.print(f" {label} stats: {comma(int(st['msgs_per_sec']))} msgs/sec ~ {st['mb_per_sec']:.2f} MB/sec")
            for i, c in enumerate(st["per_client"], 1):
                ctx.out.print(
                    f"  [{i}] {comma(int(c['msgs_per_sec']))} msgs/sec ~ "
                    f"{c['msgs_per_sec'] * size / 1e6:.2f} MB/sec ({comma(c['msgs'])} msgs)"
                )


async def cmd_pubsub(ctx: Ctx) -> int:
    """Start the subscribers, wait until all are subscribed, then run the publishers; report both sides."""
    a = ctx.args
    pubs = max(parse_int(a.pub, flag="--pub"), 0)
    subs = max(parse_int(a.sub, flag="--sub"), 0)
    total = parse_int(a.msgs, flag="--msgs")
    size = parse_size(a.size, flag="--size")
    if pubs == 0:
        raise CliError("--pub must be at least 1")
    base: dict[str, Any] = {
        "subject": a.subject,
        "size": size,
        "conn": dataclasses.asdict(ctx.conn),  # every connection setting, context ones included
    }
    if not ctx.json:
        ctx.out.print(
            f"Starting Core NATS pub/sub benchmark [subject={a.subject}, msgs={comma(total)}, size={size}, "
            f"pubs={pubs}, subs={subs}]"
        )
        sys.stdout.flush()
    ready = asyncio.Event()
    seen: set[int] = set()
    if subs == 0:
        ready.set()

    def sub_report(i: int):
        def report(_n: int) -> None:
            seen.add(i)
            if len(seen) == subs:
                ready.set()

        return report

    sub_tasks = [
        asyncio.ensure_future(_spawn({**base, "kind": "sub", "msgs": total}, sub_report(i))) for i in range(subs)
    ]
    waiter = asyncio.ensure_future(ready.wait())
    pub_tasks: list[asyncio.Task[dict]] = []
    try:
        # A subscriber that dies before it is ready must not leave us waiting forever.
        await asyncio.wait([waiter, *sub_tasks], return_when=asyncio.FIRST_COMPLETED)
        if not ready.is_set():
            waiter.cancel()
            for t in sub_tasks:
                exc = t.exception() if t.done() else None
                if exc is not None:
                    raise exc
        per = [total // pubs + (1 if i < total % pubs else 0) for i in range(pubs)]
        pub_tasks = [
            asyncio.create_task(_spawn({**base, "kind": "pub", "msgs": per[i]}, lambda n: None)) for i in range(pubs)
        ]
        await asyncio.wait(pub_tasks)
        if sub_tasks:
            await asyncio.wait(sub_tasks)
    except asyncio.CancelledError:
        if not ctx.interrupted:
            raise
        # Ctrl-C: every client is told to stop (see _spawn) and reports what it did so far.
        waiter.cancel()
        for t in (*pub_tasks, *sub_tasks):
            t.cancel()
        if pub_tasks or sub_tasks:
            await asyncio.wait([*pub_tasks, *sub_tasks])
    pub_results = [t.result() for t in pub_tasks]
    sub_results = [t.result() for t in sub_tasks]
    pub_s, sub_s = _stats(pub_results, size), _stats(sub_results, size)
    both = _stats(list(pub_results) + list(sub_results), size)
    summary = {
        "benchmark": "pubsub",
        "subject": a.subject,
        "size": size,
        "pub": pub_s,
        "sub": sub_s,
        "msgs_per_sec": both["msgs_per_sec"],
        "mb_per_sec": both["mb_per_sec"],
        "interrupted": ctx.interrupted,
    }
    if ctx.json:
        ctx.out.json_out(summary)
    else:
        _print_pubsub(ctx, both, pub_s, sub_s, size)
    if ctx.interrupted:
        sys.stderr.write(
            f"natsctl: interrupted: pub/sub benchmark stopped after {comma(pub_s['msgs'])} of "
            f"{comma(total)} messages published ({comma(sub_s['msgs'])} received)\n"
        )
        return 130
    missing = sum(total - r["msgs"] for r in sub_results)
    if missing:
        sys.stderr.write(f"natsctl: warning: subscribers missed {missing} messages (core NATS drops when overloaded)\n")
    return 0


class _Bar:
    """A rich progress bar on a terminal unless --no-progress; otherwise nothing."""

    def __init__(self, ctx: Ctx, total: int, label: str):
        self.enabled = ctx.out.show_progress() and not ctx.json
        self.total, self.label = total, label
        self._prog: Any = None  # rich's Progress, imported only when shown

    def __enter__(self) -> "_Bar":
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            self._prog = Progress(
                "{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
            )
            self._prog.__enter__()
            self._task = self._prog.add_task(self.label, total=self.total)
        return self

    def update(self, n: int) -> None:
        if self._prog is not None:
            self._prog.update(self._task, completed=n)

    def __exit__(self, *exc) -> None:
        if self._prog is not None:
            self._prog.__exit__(*exc)


async def _spawn(params: dict, report) -> dict:
    """Run one client in its own process. Cancelling this (Ctrl-C in the parent) sends the worker one SIGINT,
    which stops its loop; its partial result is still read and returned. Workers run in their own session, so
    a Ctrl-C typed on the terminal reaches only the parent, which forwards it exactly once."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "natsd.cli.bench",
        "--worker",
        json.dumps(params),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    result: dict | None = None
    error = ""
    stdout = proc.stdout
    assert stdout is not None

    async def read_all() -> None:
        nonlocal result, error
        async for raw in stdout:
            line = raw.decode().strip()
            if line.startswith("progress "):
                report(int(line.split()[1]))
            elif line.startswith("result "):
                result = json.loads(line[7:])
            elif line.startswith("error "):
                error = json.loads(line[6:])

    reader = asyncio.ensure_future(read_all())
    try:
        await asyncio.shield(reader)
    except asyncio.CancelledError:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
        await reader
        if result is None:  # interrupted before it even started its loop (e.g. still importing)
            result = {"msgs": 0, "bytes": 0, "seconds": 1e-9, "interrupted": True}
    stderr = (await proc.stderr.read()).decode(errors="replace") if proc.stderr else ""
    await proc.wait()
    if result is None:
        raise CliError(f"benchmark client failed: {error or stderr.strip()[-500:] or proc.returncode}")
    return result


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        raise SystemExit(_worker_main(sys.argv[2]))
    sys.stderr.write("usage: python -m natsd.cli.bench --worker JSON (used by natsctl bench)\n")
    raise SystemExit(2)
