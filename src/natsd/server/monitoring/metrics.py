"""``/metrics``: the monitoring data in the Prometheus text format, under the NATS Prometheus exporter's names.

The names and labels are those prometheus-nats-exporter gives the same data, so the community Grafana
dashboards for NATS and JetStream work against natsd with no exporter in between:

* ``gnatsd_varz_<field>{server_id}``: every number of ``/varz``, nested objects flattened with ``_``
  (``gnatsd_varz_jetstream_stats_memory``); ``start``/``config_load_time`` as Unix seconds;
  ``server_name``/``version``/``server_id`` as ``{server_id, value="..."} 1`` (the exporter's label gauges).
* ``gnatsd_connz_{num_connections,total,offset,limit,pending_bytes,subscriptions,in_msgs,out_msgs,in_bytes,
  out_bytes}{server_id}``: ``/connz``'s first page (1024 connections, as the exporter reads it) and its sums.
* ``jetstream_server_*``, ``jetstream_account_*``, ``jetstream_stream_*``, ``jetstream_consumer_*`` with the
  exporter's label sets (``server_id, server_name, cluster, domain, meta_leader, is_meta_leader``, then
  ``account, account_name, account_id, stream_name, stream_leader, is_stream_leader, stream_raft_group``, then
  ``consumer_name, consumer_leader, is_consumer_leader, consumer_desc``).

Every sample is a gauge (the exporter's connz byte/message totals are counters; prometheus-client would
rename a counter to ``*_total``, which would break the dashboards' queries, and ``rate()`` reads gauges too).
Stream source/mirror lag is not exported yet.

Scraping must not stall the message path: the numbers are read and the text written on the event loop in
slices of a few milliseconds (``await asyncio.sleep(0)`` between them, so clients are served in between).
The text format is prometheus-client's (``generate_latest``); for the per-stream and per-consumer families
the label text it renders is kept between scrapes (:class:`LabelCache`), which makes a scrape of 10,000
consumers several times cheaper.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import TYPE_CHECKING, Any, Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.utils import floatToGoString

from natsd.gotime import SECOND, parse_rfc3339

if TYPE_CHECKING:  # pragma: no cover
    from natsd.server.monitoring.endpoints import MonitorServer

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: Flattened /varz names the exporter leaves out, and string fields it turns into metrics.
_VARZ_SKIP = {
    "leaf",
    "trusted_operators_claim",
    "cluster_tls_timeout",
    "cluster_cluster_port",
    "cluster_auth_timeout",
    "gateway_port",
    "gateway_auth_timeout",
    "gateway_tls_timeout",
    "gateway_connect_retries",
}
_VARZ_LABEL_KEYS = {"server_id", "server_name", "version", "domain", "leader", "name", "start", "config_load_time"}

_SERVER_LABELS = ["server_id", "server_name", "cluster", "domain", "meta_leader", "is_meta_leader"]
_ACCOUNT_LABELS = _SERVER_LABELS + ["account", "account_name", "account_id"]
_STREAM_LABELS = _ACCOUNT_LABELS + ["stream_name", "stream_leader", "is_stream_leader", "stream_raft_group"]
_CONSUMER_LABELS = _STREAM_LABELS + ["consumer_name", "consumer_leader", "is_consumer_leader", "consumer_desc"]

#: How long one slice of the snapshot may hold the event loop before yielding to clients.
SLICE_SECONDS = 0.002


#: Unix seconds of ``YYYY-MM-DDTHH:MM:SS`` prefixes seen lately: a scrape reads two times per consumer, nearly all
#: within the same few seconds, so the calendar arithmetic is done once per second of them, not 20,000 times.
_SECOND_PREFIXES: dict[str, int] = {}


def _unix_seconds(text: str) -> float | None:
    """RFC 3339 (nanoseconds, ``Z``) to Unix seconds, or None when it is not a time."""
    if len(text) >= 20 and text[10] == "T" and text[-1] == "Z":  # the form /jsz writes: UTC, fraction optional
        base = _SECOND_PREFIXES.get(text[:19])
        tail = text[19:-1]
        if base is not None and (not tail or (tail[0] == "." and tail[1:].isdigit())):
            return base + (int(tail[1:]) / 10 ** (len(tail) - 1) if tail else 0.0)
    try:
        ns = parse_rfc3339(text)
    except ValueError:
        return None
    secs, frac = divmod(ns, SECOND)
    if len(text) >= 20 and text[10] == "T" and text[-1] == "Z":
        if len(_SECOND_PREFIXES) >= 4096:
            _SECOND_PREFIXES.clear()
        _SECOND_PREFIXES[text[:19]] = secs
    return secs + frac / SECOND


def _go_float(v: float | int) -> str:
    """prometheus-client's number text (Go's float formatting); integers from -10**15 to 999,999, nearly every
    sample, are written directly (it writes them as their digits and ``.0``; positive ones from a million on
    with an exponent, as Go does)."""
    if type(v) is int and -(10**15) < v < 1_000_000:
        return f"{v}.0"
    return floatToGoString(v)


def varz_families(varz: dict) -> list[GaugeMetricFamily]:
    """``gnatsd_varz_*`` from a ``/varz`` document, flattened as the exporter does."""
    sid = str(varz.get("server_id", ""))
    out: list[GaugeMetricFamily] = []

    def walk(obj: dict, path: list[str]) -> None:
        for key, value in obj.items():
            fqn = "_".join(path + [key]).replace("/", "_").strip("_")
            while "__" in fqn:
                fqn = fqn.replace("__", "_")
            if fqn in _VARZ_SKIP:
                continue
            if isinstance(value, dict):
                walk(value, path + [key])
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                g = GaugeMetricFamily(f"gnatsd_varz_{fqn}", fqn, labels=["server_id"])
                g.add_metric([sid], float(value))
                out.append(g)
            elif isinstance(value, str) and key in _VARZ_LABEL_KEYS:
                secs = _unix_seconds(value) if value[:1].isdigit() else None
                if secs is not None:
                    g = GaugeMetricFamily(f"gnatsd_varz_{fqn}", fqn, labels=["server_id"])
                    g.add_metric([sid], secs)
                else:
                    g = GaugeMetricFamily(f"gnatsd_varz_{fqn}", fqn, labels=["server_id", "value"])
                    g.add_metric([sid, value], 1.0)
                out.append(g)

    walk(varz, [])
    return out


def connz_families(connz: dict) -> list[GaugeMetricFamily]:
    """``gnatsd_connz_*`` from a ``/connz`` document (its page of connections summed)."""
    sid = str(connz.get("server_id", ""))
    conns = connz.get("connections") or []
    values = {
        "num_connections": connz.get("num_connections", 0),
        "total": connz.get("total", 0),
        "offset": connz.get("offset", 0),
        "limit": connz.get("limit", 0),
        "pending_bytes": sum(c.get("pending_bytes", 0) for c in conns),
        "subscriptions": sum(c.get("subscriptions", 0) for c in conns),
        "in_bytes": sum(c.get("in_bytes", 0) for c in conns),
        "out_bytes": sum(c.get("out_bytes", 0) for c in conns),
        "in_msgs": sum(c.get("in_msgs", 0) for c in conns),
        "out_msgs": sum(c.get("out_msgs", 0) for c in conns),
    }
    out = []
    for name, v in values.items():
        g = GaugeMetricFamily(f"gnatsd_connz_{name}", name, labels=["server_id"])
        g.add_metric([sid], float(v))
        out.append(g)
    return out


#: The exporter's per-stream and per-consumer metrics: (metric suffix, help).
_STREAM_METRICS = [
    ("total_messages", "Messages in a stream"),
    ("total_bytes", "Stored bytes of a stream"),
    ("first_seq", "First sequence of a stream"),
    ("last_seq", "Last sequence of a stream"),
    ("consumer_count", "Consumers of a stream"),
    ("subject_count", "Subjects in a stream"),
    ("limit_bytes", "max_bytes of a stream (-1: no limit)"),
    ("limit_messages", "max_msgs of a stream (-1: no limit)"),
]
_CONSUMER_METRICS = [
    ("delivered_consumer_seq", "Last consumer sequence delivered"),
    ("delivered_stream_seq", "Last stream sequence delivered"),
    ("last_delivery_seconds", "Seconds since the last delivery"),
    ("last_ack_seconds", "Seconds since the last ack"),
    ("num_ack_pending", "Messages awaiting an ack"),
    ("num_redelivered", "Messages redelivered"),
    ("num_waiting", "Waiting pull requests"),
    ("num_pending", "Messages not yet delivered"),
    ("ack_floor_stream_seq", "Ack floor stream sequence"),
    ("ack_floor_consumer_seq", "Ack floor consumer sequence"),
]
_SERVER_METRICS = [
    ("jetstream_disabled", "JetStream disabled or not"),
    ("total_streams", "Total number of streams"),
    ("total_consumers", "Total number of consumers"),
    ("total_messages", "Total number of stored messages"),
    ("total_message_bytes", "Total number of stored bytes"),
    ("max_memory", "JetStream Max Memory"),
    ("max_storage", "JetStream Max Storage"),
]
_ACCOUNT_METRICS = [
    ("max_memory", "Account Max Memory in bytes"),
    ("max_storage", "Account Max Storage in bytes"),
    ("storage_used", "Bytes used by JetStream storage"),
    ("memory_used", "Bytes used by JetStream memory"),
]


def _consumer_values(ci: dict) -> list[float | None]:
    """The :data:`_CONSUMER_METRICS` of one ``/jsz`` consumer entry, in order (None: not reported)."""
    d, a = ci.get("delivered") or {}, ci.get("ack_floor") or {}
    now = _unix_seconds(ci["ts"]) if ci.get("ts") else None

    def since(t: str | None) -> float | None:
        last = _unix_seconds(t) if (t and now is not None) else None
        return None if last is None else now - last  # type: ignore[operator]

    return [
        d.get("consumer_seq", 0),
        d.get("stream_seq", 0),
        since(d.get("last_active")),
        since(a.get("last_active")),
        ci.get("num_ack_pending", 0),
        ci.get("num_redelivered", 0),
        ci.get("num_waiting", 0),
        ci.get("num_pending", 0),
        a.get("stream_seq", 0),
        a.get("consumer_seq", 0),
    ]


class LabelCache:
    """The ``{name="value",...}`` text of label sets, made by prometheus-client once and then reused.

    A scrape of 10,000 consumers writes 100,000 samples with 17 labels each; having prometheus-client escape
    and join those labels on every scrape is most of its cost (about 60 µs a sample), while the labels of a
    stream or consumer only change when it is created or deleted. So each label set is rendered once, by
    ``generate_latest`` itself (the exact escaping of the text format), and kept while the scrapes still see it.
    """

    def __init__(self) -> None:
        self._text: dict[tuple, str] = {}
        self._used: dict[tuple, str] = {}

    async def blocks(self, names: list[str], rows: list[tuple], slicer: "_Slicer") -> list[str]:
        missing = [r for r in rows if r not in self._text]
        for start in range(0, len(missing), 16):  # new streams/consumers: a few per loop turn (~200 µs each)
            part = missing[start : start + 16]
            fam = GaugeMetricFamily("x", "x", labels=names)
            for r in part:
                fam.add_metric(list(r), 0.0)
            lines = _render([fam]).decode("utf-8").splitlines()[2:]  # after "# HELP" and "# TYPE"
            for r, line in zip(part, lines):
                self._text[r] = line[1 : line.rindex(" ")]  # x{...} 0.0 -> {...}
            await slicer.maybe_yield()
        out = []
        for r in rows:
            t = self._text[r]
            self._used[r] = t
            out.append(t)
        return out

    def end_scrape(self) -> None:
        """Forget label sets the last scrape did not use (deleted streams and consumers)."""
        self._text, self._used = self._used, {}


def _render(families: list[Any]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(families))
    return generate_latest(registry)


class _Slicer:
    """Yields to the event loop when the current slice has used :data:`SLICE_SECONDS`."""

    def __init__(self) -> None:
        self.end = time.perf_counter() + SLICE_SECONDS

    async def maybe_yield(self) -> None:
        if time.perf_counter() >= self.end:
            await asyncio.sleep(0)  # clients' messages go through here; the scrape goes on next turn
            self.end = time.perf_counter() + SLICE_SECONDS


#: ``# HELP``/``# TYPE`` text of a family, by (name, help, label names): prometheus-client's own rendering, done
#: once (one ``generate_latest`` costs milliseconds; a scrape writes 18 table families).
_HEADERS: dict[tuple[str, str, tuple[str, ...]], bytes] = {}


def _header(name: str, help_: str, labels: list[str]) -> bytes:
    key = (name, help_, tuple(labels))
    text = _HEADERS.get(key)
    if text is None:
        text = _HEADERS[key] = _render([GaugeMetricFamily(name, help_, labels=labels)])
    return text


async def _table_text(
    names: list[str],
    metrics_: list[tuple[str, str]],
    prefix: str,
    rows: list[tuple],
    columns: list[list[float | None]],
    cache: LabelCache,
    slicer: _Slicer,
) -> list[bytes]:
    """One family per metric, a sample per row: HELP/TYPE lines from prometheus-client, then the samples with
    cached label text and prometheus-client's number formatting. ``columns[i][n]`` is metric ``i`` of row ``n``
    (None: not reported): a list per metric rather than per row, so a scrape of 10,000 consumers keeps a dozen
    lists alive across its slices instead of 10,000 (fewer objects for the garbage collector to move through
    its generations: a full collection of a server with 10,000 consumers takes hundreds of milliseconds)."""
    blocks = await cache.blocks(names, rows, slicer)
    out: list[bytes] = []
    for (suffix, help_), column in zip(metrics_, columns):
        name = f"{prefix}_{suffix}"
        out.append(_header(name, help_, names))
        lines: list[str] = []
        for n, (block, v) in enumerate(zip(blocks, column)):
            if v is not None:
                lines.append(f"{name}{block} {_go_float(v)}\n")
            if n % 128 == 127:
                # encode as we go: the response is written as these chunks, never copied into one big buffer
                out.append("".join(lines).encode("utf-8"))
                lines.clear()
                await slicer.maybe_yield()
        out.append("".join(lines).encode("utf-8"))
        await slicer.maybe_yield()
    return out


async def jetstream_chunks(monitor: "MonitorServer", cache: LabelCache) -> list[bytes]:
    """``jetstream_*`` for the server, each account, stream and consumer (read in slices, see module doc)."""
    s = monitor.server
    slicer = _Slicer()
    top = monitor.jsz({"accounts": "true"})
    await asyncio.sleep(0)
    cfg = top.get("config") or {}
    server_labels = [s.server_id, s.server_name, "", cfg.get("domain", "") or "", "", "true"]
    small: list[GaugeMetricFamily] = []
    server_values = {
        "jetstream_disabled": 1.0 if top.get("disabled") else 0.0,
        "total_streams": top.get("streams", 0),
        "total_consumers": top.get("consumers", 0),
        "total_messages": top.get("messages", 0),
        "total_message_bytes": top.get("bytes", 0),
        "max_memory": cfg.get("max_memory", 0),
        "max_storage": cfg.get("max_storage", 0),
    }
    for suffix, help_ in _SERVER_METRICS:
        g = GaugeMetricFamily(f"jetstream_server_{suffix}", help_, labels=_SERVER_LABELS)
        g.add_metric(server_labels, float(server_values[suffix]))
        small.append(g)
    account_fams = {
        k: GaugeMetricFamily(f"jetstream_account_{k}", h, labels=_ACCOUNT_LABELS) for k, h in _ACCOUNT_METRICS
    }
    stream_rows: list[tuple] = []
    stream_columns: list[list[float | None]] = [[] for _ in _STREAM_METRICS]
    consumer_rows: list[tuple] = []
    consumer_columns: list[list[float | None]] = [[] for _ in _CONSUMER_METRICS]
    engine = s.jetstream
    for ad in top.get("account_details") or []:
        acc_labels = server_labels + [ad["name"], ad["name"], ad.get("id", ad["name"])]
        for key, field in (
            ("max_storage", "reserved_storage"),
            ("max_memory", "reserved_memory"),
            ("storage_used", "storage"),
            ("memory_used", "memory"),
        ):
            account_fams[key].add_metric(acc_labels, float(ad.get(field, 0)))
        acc = engine.accounts.get(ad["name"]) if engine is not None else None
        if acc is None:
            continue
        for stream in sorted(list(acc.streams.values()), key=lambda x: x.name):
            if stream.closed:
                continue
            state, _, _, _ = stream.state_json()
            sl = (*acc_labels, stream.name, s.server_name, "true", "")
            stream_rows.append(sl)
            for column, v in zip(
                stream_columns,
                (
                    state.get("messages", 0),
                    state.get("bytes", 0),
                    state.get("first_seq", 0),
                    state.get("last_seq", 0),
                    state.get("consumer_count", 0),
                    state.get("num_subjects", 0),
                    stream.config.max_bytes,
                    stream.config.max_msgs,
                ),
            ):
                column.append(v)
            for consumer in list(stream.all_consumers().values()):
                if consumer.closed:
                    continue
                try:
                    ci = consumer.jsz_info()
                except Exception:  # a consumer going away mid-scrape is skipped
                    continue
                desc = (ci.get("config") or {}).get("description", "") or ""
                consumer_rows.append((*sl, ci.get("name", consumer.name), "", "true", desc))
                for column, v in zip(consumer_columns, _consumer_values(ci)):
                    column.append(v)
                await slicer.maybe_yield()
            await slicer.maybe_yield()
    small.extend(account_fams.values())
    parts = [_render(small)]
    parts += await _table_text(
        _STREAM_LABELS, _STREAM_METRICS, "jetstream_stream", stream_rows, stream_columns, cache, slicer
    )
    parts += await _table_text(
        _CONSUMER_LABELS, _CONSUMER_METRICS, "jetstream_consumer", consumer_rows, consumer_columns, cache, slicer
    )
    cache.end_scrape()
    return parts


class _Snapshot:
    """A collector returning metric families gathered beforehand."""

    def __init__(self, families: list[Any]) -> None:
        self.families = families

    def collect(self) -> Iterable[Any]:
        return iter(self.families)


#: One label cache per monitoring server (dropped with it).
_CACHES: "weakref.WeakKeyDictionary[MonitorServer, LabelCache]" = weakref.WeakKeyDictionary()


async def render(monitor: "MonitorServer") -> list[bytes]:
    """The whole ``/metrics`` document, as chunks to write one after the other."""
    cache = _CACHES.get(monitor)
    if cache is None:
        cache = _CACHES[monitor] = LabelCache()
    # Each of these holds the loop for a few milliseconds at 1,000 streams (varz and jsz walk every stream's
    # state once): a turn each, so no single turn adds them up.
    varz = varz_families(monitor.varz({}))
    await asyncio.sleep(0)
    head = _render(varz + connz_families(monitor.connz({})))
    await asyncio.sleep(0)
    return [head, *await jetstream_chunks(monitor, cache)]
