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

Scraping must not stall the message path: the numbers are read on the event loop in slices of a few
milliseconds (``await asyncio.sleep(0)`` between them, so clients are served in between), and the text is
rendered by ``prometheus_client.generate_latest`` in a worker thread from the finished snapshot.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

if TYPE_CHECKING:  # pragma: no cover
    from natsd.server.monitor import MonitorServer

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: Flattened /varz names the exporter leaves out, and string fields it turns into metrics.
_VARZ_SKIP = {"leaf", "trusted_operators_claim", "cluster_tls_timeout", "cluster_cluster_port",
              "cluster_auth_timeout", "gateway_port", "gateway_auth_timeout", "gateway_tls_timeout",
              "gateway_connect_retries"}
_VARZ_LABEL_KEYS = {"server_id", "server_name", "version", "domain", "leader", "name", "start", "config_load_time"}

_SERVER_LABELS = ["server_id", "server_name", "cluster", "domain", "meta_leader", "is_meta_leader"]
_ACCOUNT_LABELS = _SERVER_LABELS + ["account", "account_name", "account_id"]
_STREAM_LABELS = _ACCOUNT_LABELS + ["stream_name", "stream_leader", "is_stream_leader", "stream_raft_group"]
_CONSUMER_LABELS = _STREAM_LABELS + ["consumer_name", "consumer_leader", "is_consumer_leader", "consumer_desc"]

#: How long one slice of the snapshot may hold the event loop before yielding to clients.
SLICE_SECONDS = 0.002


def _unix_seconds(text: str) -> float | None:
    """RFC 3339 (nanoseconds, ``Z``) to Unix seconds, or None when it is not a time."""
    try:
        head, _, frac = text.rstrip("Z").partition(".")
        base = datetime.fromisoformat(head + "+00:00").timestamp()
        return base + (float("0." + frac) if frac else 0.0)
    except ValueError:
        return None


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
        "num_connections": connz.get("num_connections", 0), "total": connz.get("total", 0),
        "offset": connz.get("offset", 0), "limit": connz.get("limit", 0),
        "pending_bytes": sum(c.get("pending_bytes", 0) for c in conns),
        "subscriptions": sum(c.get("subscriptions", 0) for c in conns),
        "in_bytes": sum(c.get("in_bytes", 0) for c in conns), "out_bytes": sum(c.get("out_bytes", 0) for c in conns),
        "in_msgs": sum(c.get("in_msgs", 0) for c in conns), "out_msgs": sum(c.get("out_msgs", 0) for c in conns),
    }
    out = []
    for name, v in values.items():
        g = GaugeMetricFamily(f"gnatsd_connz_{name}", name, labels=["server_id"])
        g.add_metric([sid], float(v))
        out.append(g)
    return out


class _JsFamilies:
    """The ``jetstream_*`` families, filled one stream at a time."""

    SERVER = {"jetstream_disabled": "JetStream disabled or not", "total_streams": "Total number of streams",
              "total_consumers": "Total number of consumers", "total_messages": "Total number of stored messages",
              "total_message_bytes": "Total number of stored bytes", "max_memory": "JetStream Max Memory",
              "max_storage": "JetStream Max Storage"}
    ACCOUNT = {"max_memory": "Account Max Memory in bytes", "max_storage": "Account Max Storage in bytes",
               "storage_used": "Bytes used by JetStream storage", "memory_used": "Bytes used by JetStream memory"}
    STREAM = {"total_messages": "Messages in a stream", "total_bytes": "Stored bytes of a stream",
              "first_seq": "First sequence of a stream", "last_seq": "Last sequence of a stream",
              "consumer_count": "Consumers of a stream", "subject_count": "Subjects in a stream",
              "limit_bytes": "max_bytes of a stream (-1: no limit)", "limit_messages": "max_msgs of a stream (-1: no limit)"}
    CONSUMER = {"delivered_consumer_seq": "Last consumer sequence delivered",
                "delivered_stream_seq": "Last stream sequence delivered",
                "last_delivery_seconds": "Seconds since the last delivery", "last_ack_seconds": "Seconds since the last ack",
                "num_ack_pending": "Messages awaiting an ack", "num_redelivered": "Messages redelivered",
                "num_waiting": "Waiting pull requests", "num_pending": "Messages not yet delivered",
                "ack_floor_stream_seq": "Ack floor stream sequence", "ack_floor_consumer_seq": "Ack floor consumer sequence"}

    def __init__(self) -> None:
        def fams(kind: str, table: dict[str, str], labels: list[str]) -> dict[str, GaugeMetricFamily]:
            return {k: GaugeMetricFamily(f"jetstream_{kind}_{k}", h, labels=labels) for k, h in table.items()}

        self.server = fams("server", self.SERVER, _SERVER_LABELS)
        self.account = fams("account", self.ACCOUNT, _ACCOUNT_LABELS)
        self.stream = fams("stream", self.STREAM, _STREAM_LABELS)
        self.consumer = fams("consumer", self.CONSUMER, _CONSUMER_LABELS)

    def all(self) -> Iterable[GaugeMetricFamily]:
        for group in (self.server, self.account, self.stream, self.consumer):
            yield from group.values()

    def add_consumer(self, labels: list[str], ci: dict) -> None:
        f = self.consumer
        d, a = ci.get("delivered") or {}, ci.get("ack_floor") or {}
        now = _unix_seconds(ci["ts"]) if ci.get("ts") else None
        if now is not None and d.get("last_active"):
            last = _unix_seconds(d["last_active"])
            if last is not None:
                f["last_delivery_seconds"].add_metric(labels, now - last)
        if now is not None and a.get("last_active"):
            last = _unix_seconds(a["last_active"])
            if last is not None:
                f["last_ack_seconds"].add_metric(labels, now - last)
        for key, v in (("delivered_consumer_seq", d.get("consumer_seq", 0)),
                       ("delivered_stream_seq", d.get("stream_seq", 0)),
                       ("num_ack_pending", ci.get("num_ack_pending", 0)),
                       ("num_redelivered", ci.get("num_redelivered", 0)),
                       ("num_waiting", ci.get("num_waiting", 0)), ("num_pending", ci.get("num_pending", 0)),
                       ("ack_floor_stream_seq", a.get("stream_seq", 0)),
                       ("ack_floor_consumer_seq", a.get("consumer_seq", 0))):
            f[key].add_metric(labels, float(v))


async def jetstream_families(monitor: "MonitorServer") -> list[GaugeMetricFamily]:
    """``jetstream_*`` for the server, each account, stream and consumer (read in slices, see module doc)."""
    s = monitor.server
    fam = _JsFamilies()
    top = monitor.jsz({"accounts": "true"})
    cfg = top.get("config") or {}
    server_labels = [s.server_id, s.server_name, "", cfg.get("domain", "") or "", "", "true"]
    srv = fam.server
    srv["jetstream_disabled"].add_metric(server_labels, 1.0 if top.get("disabled") else 0.0)
    srv["max_memory"].add_metric(server_labels, float(cfg.get("max_memory", 0)))
    srv["max_storage"].add_metric(server_labels, float(cfg.get("max_storage", 0)))
    for key, field in (("total_streams", "streams"), ("total_consumers", "consumers"),
                       ("total_messages", "messages"), ("total_message_bytes", "bytes")):
        srv[key].add_metric(server_labels, float(top.get(field, 0)))
    engine = s.jetstream
    if engine is None:
        return list(fam.all())
    loop_time = time.perf_counter
    slice_end = loop_time() + SLICE_SECONDS
    for ad in top.get("account_details") or []:
        acc_labels = server_labels + [ad["name"], ad["name"], ad.get("id", ad["name"])]
        a = fam.account
        a["max_storage"].add_metric(acc_labels, float(ad.get("reserved_storage", 0)))
        a["max_memory"].add_metric(acc_labels, float(ad.get("reserved_memory", 0)))
        a["storage_used"].add_metric(acc_labels, float(ad.get("storage", 0)))
        a["memory_used"].add_metric(acc_labels, float(ad.get("memory", 0)))
        acc = engine.accounts.get(ad["name"])
        if acc is None:
            continue
        for stream in sorted(list(acc.streams.values()), key=lambda x: x.name):
            if getattr(stream, "closed", False):
                continue
            state, _, _, _ = stream.state_json()
            sl = acc_labels + [stream.name, s.server_name, "true", ""]
            st = fam.stream
            for key, v in (("total_messages", state.get("messages", 0)), ("total_bytes", state.get("bytes", 0)),
                           ("first_seq", state.get("first_seq", 0)), ("last_seq", state.get("last_seq", 0)),
                           ("consumer_count", state.get("consumer_count", 0)),
                           ("subject_count", state.get("num_subjects", 0)),
                           ("limit_bytes", stream.config.max_bytes), ("limit_messages", stream.config.max_msgs)):
                st[key].add_metric(sl, float(v))
            for consumer in list(stream.consumers.values()):
                if getattr(consumer, "closed", False):
                    continue
                try:
                    ci = consumer.jsz_info()
                except Exception:  # noqa: BLE001 - a consumer going away mid-scrape is skipped
                    continue
                desc = (ci.get("config") or {}).get("description", "") or ""
                fam.add_consumer(sl + [ci.get("name", consumer.name), "", "true", desc], ci)
                if loop_time() >= slice_end:
                    await asyncio.sleep(0)  # let clients' messages through, then go on
                    slice_end = loop_time() + SLICE_SECONDS
            if loop_time() >= slice_end:
                await asyncio.sleep(0)
                slice_end = loop_time() + SLICE_SECONDS
    return list(fam.all())


class _Snapshot:
    """A collector returning metric families gathered beforehand (so the text renders off the event loop)."""

    def __init__(self, families: list[Any]) -> None:
        self.families = families

    def collect(self) -> Iterable[Any]:
        return iter(self.families)


async def render(monitor: "MonitorServer") -> bytes:
    """The whole ``/metrics`` document."""
    families: list[Any] = varz_families(monitor.varz({}))
    await asyncio.sleep(0)
    families += connz_families(monitor.connz({}))
    await asyncio.sleep(0)
    families += await jetstream_families(monitor)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(families))
    return await asyncio.get_running_loop().run_in_executor(None, generate_latest, registry)
