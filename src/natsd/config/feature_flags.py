"""``feature_flags { <name>: true|false }`` (nats-server 2.14+): opt-ins to wire formats that a
later release makes the default. The flags a standalone nats-server 2.15.1 knows, with its
defaults, are below; ``/varz`` reports them merged with the configured values (an unknown name
is ignored there, as nats-server does). natsd acts on ``js_ack_fc_v2``: consumers then send the
v2 ack and flow-control subjects ``$JS.ACK.<domain>.<account hash>.<stream>.<consumer>...`` /
``$JS.FC.<domain>.<account hash>...`` (``_`` without a domain); both forms are accepted either way.
The others concern clustering or formats natsd does not emit.
"""

from __future__ import annotations

__all__ = ["DEFAULTS", "JS_ACK_FC_V2", "enabled", "merged"]

JS_ACK_FC_V2 = "js_ack_fc_v2"

DEFAULTS: dict[str, bool] = {
    JS_ACK_FC_V2: False,
    "js_api_reply_v2": False,
    "js_raft_delete_range": True,
    "js_snapshot_sources": False,
}


def merged(configured: dict[str, bool]) -> dict[str, bool]:
    out = dict(DEFAULTS)
    out.update((k, v) for k, v in configured.items() if k in DEFAULTS)
    return out


def enabled(configured: dict[str, bool], name: str) -> bool:
    return merged(configured).get(name, False)
