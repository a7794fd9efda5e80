"""Randomised differential testing of natsd against the reference nats-server.

A seeded generator writes a script of JetStream operations: API requests with valid bodies and
with malformed ones (syntax errors, wrong JSON kinds, unknown fields, truncations) on every kind of
subject, publishes with JetStream headers (dedup ids, expectations, rollups, TTLs, user headers),
pulls (no-wait, and with a short expiry), push consumers (created on an inbox, delivered to, then
deleted), ephemeral consumers, acks of every kind sent as requests (also to consumers since deleted
or taking no acks), purges, message and stream deletes, message gets and direct gets (batches, multi
last). The same script runs against a fresh nats-server and a fresh natsd; every observation (reply
JSON, status headers, delivered messages) is normalised (timestamps, server identity and version,
store byte counts, generated names and inboxes) and compared. On a divergence the script is
minimised (chunks of operations, then single operations, are dropped while the first divergence
stays) and reported as a short, replayable list.

Every operation waits for its answer before the next starts (acks are sent as requests, pulls use
``no_wait`` or an expiry they wait out, a push consumer is read to its announced pending count), so
both servers see the same order of events and the comparison needs no timing assumptions.

Run more seeds by hand (the suite runs a fixed set; ``NATSD_DIFF_SEEDS`` / ``NATSD_DIFF_OPS`` make
it run more)::

    .venv/bin/python -m tests.helpers.differential --seeds 200 --ops 60
    .venv/bin/python -m tests.helpers.differential --replay '[["api", "$JS.API.STREAM.CREATE.S1", ...]]'
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats

from tests.helpers.inproc import side_by_side

__all__ = ["generate", "run_script", "first_divergence", "minimise", "check_seed", "Verdict"]

STREAMS = ("S1", "S2")
# How long an answer may take before it counts as none (an ack of nothing pending gets no reply;
# a loaded machine must not turn a late reply into a divergence).
ACK_WAIT = 0.6
CONSUMERS = ("C1", "C2")
SUBJECTS = {"S1": ("s1.a", "s1.b", "s1.c.d"), "S2": ("s2.x", "s2.y")}


# ---------------------------------------------------------------------------------------------
# Generation


def _stream_config(rng: random.Random, name: str) -> dict:
    cfg: dict[str, Any] = {"name": name, "subjects": [name.lower() + rng.choice([".>", ".*", ".>"])]}
    if rng.random() < 0.3:
        cfg["retention"] = rng.choice(["limits", "interest", "workqueue"])
    if rng.random() < 0.3:
        cfg["storage"] = rng.choice(["file", "memory"])
    if rng.random() < 0.3:
        cfg["max_msgs"] = rng.choice([-1, 1, 3, 10])
    if rng.random() < 0.3:
        cfg["max_msgs_per_subject"] = rng.choice([-1, 1, 2])
    if rng.random() < 0.2:
        cfg["discard"] = rng.choice(["old", "new"])
    if rng.random() < 0.3:
        cfg["allow_rollup_hdrs"] = True
    if rng.random() < 0.3:
        cfg["allow_direct"] = True
    if rng.random() < 0.1:
        cfg["deny_delete"] = True
    if rng.random() < 0.1:
        cfg["first_seq"] = rng.choice([1, 5])
    if rng.random() < 0.05:
        cfg[rng.choice(["max_msg", "Durable", "foo"])] = 1  # unknown field
    if rng.random() < 0.05:
        cfg["max_msgs"] = rng.choice(["5", 1.5, True])  # wrong kind
    return cfg


def _consumer_config(rng: random.Random, stream: str, name: str | None) -> dict:
    cfg: dict[str, Any] = {"ack_policy": rng.choice(["explicit", "explicit", "none", "all"])}
    if name:
        cfg["durable_name"] = name
    else:  # an ephemeral must outlive the script on a loaded machine (default: 5 s idle)
        cfg["inactive_threshold"] = 120_000_000_000
    if rng.random() < 0.3:
        cfg["deliver_policy"] = rng.choice(["all", "last", "new", "last_per_subject"])
    if rng.random() < 0.3:
        cfg["filter_subject"] = rng.choice(SUBJECTS[stream] + (stream.lower() + ".>",))
    if rng.random() < 0.2:
        cfg["max_ack_pending"] = rng.choice([1, 2, 100])
    if rng.random() < 0.1:
        cfg["max_deliver"] = rng.choice([1, 2])
    return cfg


_WRONG = [5, "x", True, [1], {"a": 1}, None, -1, 1.5, "", 2**64]


def _malformed(rng: random.Random, s: str, c: str) -> list:
    """An API request with a body of the wrong shape, on a subject of any kind."""
    subject, body = rng.choice(
        [
            (f"$JS.API.STREAM.CREATE.{s}", {"name": s, "subjects": [s.lower() + ".>"]}),
            (f"$JS.API.STREAM.UPDATE.{s}", {"name": s, "subjects": [s.lower() + ".>"]}),
            (f"$JS.API.STREAM.INFO.{s}", {"subjects_filter": ">", "deleted_details": True, "offset": 0}),
            (f"$JS.API.STREAM.PURGE.{s}", {"filter": s.lower() + ".a", "keep": 1}),
            (f"$JS.API.STREAM.MSG.GET.{s}", {"seq": 1}),
            (f"$JS.API.STREAM.MSG.DELETE.{s}", {"seq": 1, "no_erase": True}),
            ("$JS.API.STREAM.NAMES", {"subject": s.lower() + ".a", "offset": 0}),
            ("$JS.API.STREAM.LIST", {"offset": 0}),
            (
                f"$JS.API.CONSUMER.CREATE.{s}.{c}",
                {"stream_name": s, "config": {"durable_name": c, "ack_policy": "explicit"}},
            ),
            (f"$JS.API.CONSUMER.INFO.{s}.{c}", {}),
            (f"$JS.API.CONSUMER.NAMES.{s}", {"offset": 0}),
            (f"$JS.API.CONSUMER.LIST.{s}", {"offset": 0}),
            (f"$JS.API.CONSUMER.PAUSE.{s}.{c}", {"pause_until": "2020-01-01T00:00:00Z"}),
        ]
    )
    how = rng.random()
    if how < 0.4 and body:  # a field of the wrong kind (or a nested one)
        key = rng.choice(list(body))
        if key == "config" and rng.random() < 0.7:
            body["config"][
                rng.choice(
                    [
                        "ack_policy",
                        "durable_name",
                        "max_deliver",
                        "ack_wait",
                        "deliver_policy",
                        "filter_subject",
                        "opt_start_time",
                        "backoff",
                    ]
                )
            ] = rng.choice(_WRONG)
        else:
            body[key] = rng.choice(_WRONG)
        return ["api", subject, body]
    if how < 0.6:  # an unknown field (a typo of a known one)
        body[rng.choice(["max_msg", "Durable", "foo", "SEQ", "subject"])] = 1
        return ["api", subject, body]
    text = json.dumps(body)
    if how < 0.8:  # truncated
        return ["api", subject, text[: rng.randint(0, max(0, len(text) - 1))]]
    return [
        "api",
        subject,
        rng.choice(["[1]", "5", '"s"', "null", "{}x", "{} {}", "{,}", " ", "{'a':1}", text.replace('"', "", 2)]),
    ]


def generate(seed: int, n: int) -> list[list]:
    """A script of ``n`` operations (JSON-serialisable lists) from ``seed``."""
    rng = random.Random(seed)
    ops: list[list] = []
    # One config per consumer name for the whole script: a repeated CREATE is idempotent. Updates
    # that change a filter are left out on purpose: nats-server 2.15.1 stops delivering to a
    # consumer whose filter_subject an update removed (it answers 404 with matching messages
    # stored), and natsd does not copy that.
    consumer_cfgs: dict[tuple[str, str], dict] = {}
    for s in STREAMS:
        if rng.random() < 0.8:
            ops.append(["api", f"$JS.API.STREAM.CREATE.{s}", _stream_config(rng, s)])
    while len(ops) < n:
        s = rng.choice(STREAMS)
        c = rng.choice(CONSUMERS)
        if rng.random() < 0.05:
            ops.append(_malformed(rng, s, c))
            continue
        r = rng.random()
        if r < 0.30:
            hdrs: dict[str, str] = {}
            x = rng.random()
            if x < 0.1:
                hdrs["Nats-Msg-Id"] = rng.choice(["m1", "m2", "m3"])
            elif x < 0.15:
                hdrs["Nats-Expected-Last-Sequence"] = str(rng.randint(0, 6))
            elif x < 0.2:
                hdrs["Nats-Expected-Last-Subject-Sequence"] = rng.choice(["", "0", "1", "3"])
            elif x < 0.25:
                hdrs["Nats-Rollup"] = rng.choice(["sub", "all", "bad"])
            elif x < 0.28:
                hdrs["Nats-Expected-Stream"] = rng.choice(STREAMS)
            elif x < 0.31:
                hdrs["Nats-TTL"] = rng.choice(["-1", "1h", "x", ""])
            elif x < 0.34:
                hdrs["Nats-Expected-Last-Msg-Id"] = rng.choice(["m1", "m2", ""])
            elif x < 0.40:
                hdrs["X-User"] = rng.choice(["a", "b c", ""])
            ops.append(["pub", rng.choice(SUBJECTS[s]), hdrs, f"m{len(ops)}"])
        elif r < 0.40:
            cfg = consumer_cfgs.get((s, c)) or consumer_cfgs.setdefault((s, c), _consumer_config(rng, s, c))
            ops.append(["api", f"$JS.API.CONSUMER.CREATE.{s}.{c}", {"stream_name": s, "config": cfg}])
        elif r < 0.52:
            ops.append(["pull", s, c, rng.choice([1, 2, 5])])
        elif r < 0.54:
            ops.append(["pull", s, c, rng.choice([1, 3]), 300_000_000])  # waits out a short expiry
        elif r < 0.555:
            if rng.random() < 0.5:
                ops.append(
                    [
                        "api",
                        f"$JS.API.CONSUMER.CREATE.{s}",
                        {"stream_name": s, "config": _consumer_config(rng, s, None)},
                    ]
                )
            else:  # ephemeral consumers are named E1, E2... in creation order (see run_script)
                ops.append(["pull", s, "E1", rng.choice([1, 3])])
        elif r < 0.68:
            ops.append(
                [
                    "ack",
                    rng.randint(0, 50),
                    rng.choice(["+ACK", "+ACK", "-NAK", "+TERM", "+WPI", "+NXT", "+TERM bye", "+ACK {}", "bogus"]),
                ]
            )
        elif r < 0.76:
            ops.append(["api", f"$JS.API.CONSUMER.INFO.{s}.{c}", ""])
        elif r < 0.82:
            ops.append(
                [
                    "api",
                    f"$JS.API.STREAM.INFO.{s}",
                    rng.choice(["", {"subjects_filter": ">"}, {"deleted_details": True}]),
                ]
            )
        elif r < 0.86:
            body = rng.choice(
                ["", {"filter": rng.choice(SUBJECTS[s])}, {"seq": rng.randint(1, 8)}, {"keep": rng.randint(0, 2)}]
            )
            ops.append(["api", f"$JS.API.STREAM.PURGE.{s}", body])
        elif r < 0.89:
            ops.append(["api", f"$JS.API.STREAM.MSG.DELETE.{s}", {"seq": rng.randint(0, 8)}])
        elif r < 0.93:
            ops.append(
                [
                    "api",
                    f"$JS.API.STREAM.MSG.GET.{s}",
                    rng.choice(
                        [
                            {"seq": rng.randint(0, 8)},
                            {"last_by_subj": rng.choice(SUBJECTS[s])},
                            {"next_by_subj": rng.choice(SUBJECTS[s]), "seq": rng.randint(0, 4)},
                        ]
                    ),
                ]
            )
        elif r < 0.95:
            ops.append(
                [
                    "direct",
                    s,
                    rng.choice(
                        [
                            {"seq": rng.randint(1, 6)},
                            {"last_by_subj": rng.choice(SUBJECTS[s])},
                            {"seq": 1, "batch": rng.choice([-1, 2, 3])},
                            {"next_by_subj": rng.choice(SUBJECTS[s]), "seq": rng.randint(0, 3), "batch": 2},
                            {"multi_last": [rng.choice(SUBJECTS[s]), s.lower() + ".>"]},
                            {"seq": 1, "batch": 5, "max_bytes": rng.choice([1, 100])},
                            {"seq": 1, "batch": 5, "up_to_seq": 2},
                            {"seq": "1"},
                            {"last_by_subj": 5},
                        ]
                    ),
                ]
            )
        elif r < 0.96:
            ops.append(["api", f"$JS.API.CONSUMER.DELETE.{s}.{c}", ""])
        elif r < 0.965:
            ops.append(["api", f"$JS.API.CONSUMER.NAMES.{s}", ""])
        elif r < 0.97:
            ops.append(["api", f"$JS.API.CONSUMER.LIST.{s}", ""])
        elif r < 0.975:
            if rng.random() < 0.3:
                ops.append(["api", f"$JS.API.STREAM.DELETE.{s}", ""])
            else:  # (re)create, or the same config again (idempotent)
                ops.append(["api", f"$JS.API.STREAM.CREATE.{s}", _stream_config(rng, s)])
        elif r < 0.99:
            ops.append(["push", s, _consumer_config(rng, s, None)])
        else:
            # An update keeps the stream's retention: after an update from limits to interest,
            # nats-server 2.15.1 keeps messages an ack-none consumer was given (interest streams
            # created as such drop them, as natsd does in both cases).
            cfg = _stream_config(rng, s)
            created = next((o[2] for o in ops if o[1] == f"$JS.API.STREAM.CREATE.{s}"), None)
            cfg.pop("retention", None)
            if isinstance(created, dict) and "retention" in created:
                cfg["retention"] = created["retention"]
            ops.append(["api", f"$JS.API.STREAM.UPDATE.{s}", cfg])
    return ops


# ---------------------------------------------------------------------------------------------
# Execution and normalisation

_DROP = {
    "ts",
    "created",
    "first_ts",
    "last_ts",
    "time",
    "last_active",
    "cluster",
    "server_id",
    "server_name",
    "bytes",
    "version",
    "domain",
}


def _norm(obj: Any) -> Any:
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in _DROP:
                continue
            if k == "metadata" and isinstance(v, dict):
                v = {mk: mv for mk, mv in v.items() if not mk.startswith("_nats.")} or None
                if v is None:
                    continue
            if k == "api" and isinstance(v, dict):
                v = {ak: av for ak, av in v.items() if ak != "level"}
            out[k] = _norm(v)
        return out
    if isinstance(obj, list):
        return [_norm(v) for v in obj]
    return obj


def _ack_tokens(reply: str) -> list[str]:
    # stream, consumer, delivery count, stream seq, consumer seq. The timestamp differs by nature;
    # the pending count is left out too: the reference keeps it lazily and its value at delivery
    # depends on the timing of its internal goroutines (the same script gives 0 or 1 from run to
    # run), while consumer info's num_pending, compared elsewhere, is settled.
    return reply.split(".")[2:7]


class _Names:
    """Names the servers choose (ephemeral consumers, inboxes) and the stable aliases a script
    uses for them: ephemerals are E1, E2... in creation order, inboxes <inbox>."""

    def __init__(self) -> None:
        self.alias: dict[str, str] = {}  # real -> alias
        self.real: dict[str, str] = {}  # alias -> real

    def add(self, real: str, alias: str) -> None:
        self.alias[real] = alias
        self.real[alias] = real

    def ephemeral(self, reply: Any) -> None:
        if isinstance(reply, dict) and isinstance(reply.get("name"), str) and "error" not in reply:
            if reply["name"] not in self.alias:
                self.add(reply["name"], f"E{sum(a.startswith('E') for a in self.real) + 1}")

    def subject(self, subject: str) -> str:
        return ".".join(self.real.get(t, t) for t in subject.split("."))

    def rename(self, obj: Any) -> Any:
        if not self.alias:
            return obj
        if isinstance(obj, str):
            return self.alias.get(obj, obj)
        if isinstance(obj, dict):
            out = {self.alias.get(k, k): self.rename(v) for k, v in obj.items()}
            names = out.get("consumers")
            if isinstance(names, list) and names != obj.get("consumers"):
                # both servers sort by the real names, which are random: compare as sets
                out["consumers"] = sorted(names, key=lambda c: json.dumps(c, sort_keys=True))
            return out
        if isinstance(obj, list):
            return [self.rename(v) for v in obj]
        return obj


async def run_script(url: str, ops: list[list]) -> list:
    """Observations of ``ops`` against the server at ``url``."""
    nc = await nats.connect(url, allow_reconnect=False)
    delivered: list[str] = []
    names = _Names()
    out: list = []
    try:
        for op in ops:
            out.append(names.rename(await _one(nc, op, delivered, names)))
    finally:
        await nc.close()
    return out


async def _request(nc, subject: str, data: bytes, headers=None, timeout: float = 2.0) -> Any:
    try:
        m = await nc.request(subject, data, timeout=timeout, headers=headers or None)
    except nats.errors.NoRespondersError:
        return "no responders"
    except nats.errors.TimeoutError:
        return "timeout"
    return _reply(m)


def _reply(m) -> Any:
    hdrs = dict(m.headers or {})
    if "Status" in hdrs:
        return {
            "status": hdrs["Status"],
            **{k: v for k, v in hdrs.items() if k.startswith("Nats-") and k not in ("Nats-Time-Stamp",)},
        }
    if hdrs:
        return {
            "hdrs": {k: v for k, v in hdrs.items() if k != "Nats-Time-Stamp"},
            "data": m.data.decode(errors="replace"),
        }
    if not m.data:
        return ""
    try:
        return json.loads(m.data)
    except ValueError:
        return {"raw": m.data.decode(errors="replace")}


async def _one(nc, op: list, delivered: list[str], names: _Names) -> Any:
    kind = op[0]
    if kind == "api":
        body = op[2]
        data = json.dumps(body).encode() if isinstance(body, dict) else body.encode()
        reply = await _request(nc, names.subject(op[1]), data)
        if op[1].startswith("$JS.API.CONSUMER.CREATE.") and op[1].count(".") == 4:
            names.ephemeral(reply)
        return _norm(reply)
    if kind == "pub":
        return _norm(await _request(nc, op[1], op[3].encode(), headers=op[2]))
    if kind == "ack":
        if not delivered:
            return None
        reply = delivered[op[1] % len(delivered)]
        return _norm(await _request(nc, reply, op[2].encode(), timeout=ACK_WAIT))
    if kind == "direct":
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        try:
            await nc.publish(f"$JS.API.DIRECT.GET.{op[1]}", json.dumps(op[2]).encode(), reply=inbox)
            got = []
            while True:
                try:
                    m = await sub.next_msg(timeout=ACK_WAIT)
                except nats.errors.TimeoutError:
                    break
                r = _reply(m)
                got.append(r)
                if isinstance(r, dict) and "status" in r or not op[2].get("batch"):
                    break
            return _norm(got)
        finally:
            await sub.unsubscribe()
    if kind == "push":
        return await _push(nc, op, delivered, names)
    if kind == "pull":
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        # ["pull", stream, consumer, batch] is a no-wait pull; a fifth item is an expiry (ns) to wait out
        expires = op[4] if len(op) > 4 else 0
        req = {"batch": op[3], "expires": expires} if expires else {"batch": op[3], "no_wait": True}
        try:
            await nc.publish(
                f"$JS.API.CONSUMER.MSG.NEXT.{op[1]}.{names.real.get(op[2], op[2])}",
                json.dumps(req).encode(),
                reply=inbox,
            )
            got = []
            while len(got) <= op[3]:
                try:
                    m = await sub.next_msg(timeout=ACK_WAIT + expires / 1e9)
                except nats.errors.TimeoutError:
                    got.append("timeout")
                    break
                hdrs = dict(m.headers or {})
                if "Status" in hdrs:
                    got.append({"status": hdrs["Status"]})
                    break
                if m.reply:
                    delivered.append(m.reply)
                got.append(
                    {
                        "subject": m.subject,
                        "data": m.data.decode(errors="replace"),
                        "ack": _ack_tokens(m.reply) if m.reply else None,
                    }
                )
                if len(got) == op[3]:
                    break
            return _norm(got)
        finally:
            await sub.unsubscribe()
    raise ValueError(f"unknown op {op!r}")


async def _push(nc, op: list, delivered: list[str], names: _Names) -> Any:
    """Create an ephemeral push consumer on a fresh inbox, read what it delivers until it goes quiet,
    delete it. Observed: the create reply, the messages, the delete reply."""
    inbox = nc.new_inbox()
    names.add(inbox, "<inbox>")
    sub = await nc.subscribe(inbox)
    stream = op[1]
    try:
        cfg = dict(op[2], deliver_subject=inbox)
        reply = await _request(
            nc, f"$JS.API.CONSUMER.CREATE.{stream}", json.dumps({"stream_name": stream, "config": cfg}).encode()
        )
        names.ephemeral(reply)
        if isinstance(reply, dict):  # its counters race the first deliveries on either server
            reply = {
                k: v
                for k, v in reply.items()
                if k not in ("delivered", "ack_floor", "num_pending", "num_ack_pending", "num_waiting", "push_bound")
            }
        got: list = [_norm(reply)]
        if not (isinstance(reply, dict) and "name" in reply and "error" not in reply):
            return got
        while True:
            try:
                m = await sub.next_msg(timeout=0.3)
            except nats.errors.TimeoutError:
                break
            hdrs = dict(m.headers or {})
            if "Status" in hdrs:
                got.append({"status": hdrs["Status"]})
                continue
            if m.reply:
                delivered.append(m.reply)
            got.append(
                {
                    "subject": m.subject,
                    "data": m.data.decode(errors="replace"),
                    "ack": _ack_tokens(m.reply)[2:] if m.reply else None,
                }
            )
        got.append(_norm(await _request(nc, f"$JS.API.CONSUMER.DELETE.{stream}.{reply['name']}", b"")))
        return got
    finally:
        await sub.unsubscribe()


# ---------------------------------------------------------------------------------------------
# Comparison and minimisation


async def _observe(ops: list[list], workdir: Path) -> tuple[list, list]:
    return await side_by_side(workdir, lambda url: run_script(url, ops))


def first_divergence(expected: list, got: list) -> int | None:
    for i, (e, g) in enumerate(zip(expected, got)):
        if e != g:
            return i
    return None if len(expected) == len(got) else min(len(expected), len(got))


async def minimise(ops: list[list], workdir: Path, budget: int = 60) -> list[list]:
    """A shorter script that still diverges (ends at its first divergence)."""
    expected, got = await _observe(ops, workdir)
    at = first_divergence(expected, got)
    if at is None:
        return ops
    ops = ops[: at + 1]
    chunk = max(1, len(ops) // 2)
    runs = 0
    while chunk >= 1 and runs < budget:
        i = 0
        changed = False
        while i < len(ops) - 1 and runs < budget:  # the last op shows the divergence: keep it
            trial = ops[:i] + ops[i + chunk :]
            runs += 1
            e, g = await _observe(trial, workdir)
            d = first_divergence(e, g)
            if d is not None:
                ops = trial[: d + 1]
                changed = True
            else:
                i += chunk
        if not changed:
            chunk //= 2
    return ops


@dataclass
class Verdict:
    """What a seed showed: ``report`` is None when both servers agreed; ``reproducible`` is False when
    the divergence went away on a second run of the same script (the timing of one server's
    background work, e.g. nats-server settling num_pending lazily on a loaded machine)."""

    report: str | None
    reproducible: bool = False


async def check_seed(seed: int, n: int, workdir: Path) -> Verdict:
    """Run the script of ``seed`` on both servers; minimise and report what differs."""
    ops = generate(seed, n)
    expected, got = await _observe(ops, workdir / f"seed{seed}")
    at = first_divergence(expected, got)
    if at is None:
        return Verdict(None)
    # Two more runs: nats-server's num_pending, settled in the background, was seen to lag twice in
    # a row under a full suite's load (natsd's figure right both times); a real divergence repeats.
    for again in range(2):
        e, g = await _observe(ops, workdir / f"seed{seed}-again{again}")
        if first_divergence(e, g) is None:
            break
    if first_divergence(e, g) is None:
        return Verdict(
            f"seed {seed}: natsd diverged from nats-server at op {at} of {n}, but not on a second run "
            f"(timing-dependent): {json.dumps(ops[at])}\n  reference: {json.dumps(expected[at])}\n"
            f"  natsd:     {json.dumps(got[at] if at < len(got) else None)}"
        )
    small = await minimise(ops, workdir / f"seed{seed}-min")
    e, g = await _observe(small, workdir / f"seed{seed}-show")
    last = first_divergence(e, g)
    if last is None:  # the minimised script lost it on this run: show the whole script's divergence
        small, e, g, last = ops, expected, got, at
    lines = [f"seed {seed}: natsd diverges from nats-server at op {at} of {n}; minimised to {len(small)} ops:"]
    lines += [f"  {json.dumps(op)}" for op in small]
    lines.append(f"  reference: {json.dumps(e[last] if last < len(e) else None)}")
    lines.append(f"  natsd:     {json.dumps(g[last] if last < len(g) else None)}")
    return Verdict("\n".join(lines), reproducible=True)


def main() -> None:  # pragma: no cover - a tool for developers
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--ops", type=int, default=60)
    ap.add_argument("--replay", help="a script (JSON list of operations) to run on both servers and show")
    args = ap.parse_args()

    async def go() -> None:
        with tempfile.TemporaryDirectory() as d:
            if args.replay:
                ops = json.loads(args.replay)
                expected, got = await _observe(ops, Path(d))
                for op, e, g in zip(ops, expected, got):
                    print(("   " if e == g else "!! ") + json.dumps(op))
                    print(f"     reference: {json.dumps(e)}" + ("" if e == g else f"\n     natsd:     {json.dumps(g)}"))
                return
            bad = 0
            for seed in range(args.first, args.first + args.seeds):
                verdict = await check_seed(seed, args.ops, Path(d))
                if verdict.report:
                    bad += verdict.reproducible
                    print(verdict.report, flush=True)
            print(f"{args.seeds - bad} of {args.seeds} seeds agree (or differ only by timing)")

    asyncio.run(go())


if __name__ == "__main__":  # pragma: no cover
    main()
