"""The JetStream domain prefix: ``$JS.<domain>.API.>`` as subject mappings.

With ``jetstream { domain: D }`` nats-server adds subject mappings to every JetStream account
(``generateJSMappingTable``): ``$JS.D.API.INFO``, ``STREAM.>``, ``CONSUMER.>``, ``DIRECT.>``,
``META.>``, ``SERVER.>`` and ``ACCOUNT.>`` onto the same subjects under ``$JS.API.``, and
``$JS.D.API.$KV.>`` / ``$JS.D.API.$OBJ.>`` onto ``$KV.>`` / ``$OBJ.>`` (a client that addresses a
KV bucket or object store "in domain D", nats-py ``jetstream(domain=D)``, across a leafnode link
where ``$KV.>`` itself never crosses). A mapping rewrites the subject *before* routing, so every
subject the API, a stream or a consumer answers -- the API table, ``DIRECT.GET.<stream>``,
``CONSUMER.MSG.NEXT.<stream>.<consumer>``, ``CONSUMER.RESET``, ``CONSUMER.UNPIN`` -- is reachable
under the prefix, and a request nobody answers after the rewrite gets "no responders".

Here each mapping is one internal subscription that re-publishes the message (reply and headers
unchanged) on the mapped subject in the same account, and declines it (returns False: the
router then counts no receiver and the publisher gets its 503) when nothing received the mapped
message. Anything else under ``$JS.D.API.`` is not mapped, as in nats-server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.ports import Subscription
    from natsd.jetstream.views import AccountView

__all__ = ["MAPPED_SUFFIXES", "setup_account"]

# (pattern under "$JS.<domain>.API.", True when the mapped subject keeps the "$JS.API." prefix)
MAPPED_SUFFIXES: tuple[tuple[str, bool], ...] = (
    ("INFO", True),
    ("STREAM.>", True),
    ("CONSUMER.>", True),
    ("DIRECT.>", True),
    ("META.>", True),
    ("SERVER.>", True),
    ("ACCOUNT.>", True),
    ("$KV.>", False),
    ("$OBJ.>", False),
)


def setup_account(js_account: "AccountView") -> list["Subscription"]:
    """Subscribe the account's domain mappings; returns the subscriptions (the account owns them)."""
    subs: list[Subscription] = []
    domain = js_account.engine.domain
    if not domain:
        return subs
    ports = js_account.ports
    prefix = f"$JS.{domain}.API."
    cut = len(prefix)

    def to_api(subject: str, reply: str, hdr: bytes | None, payload: bytes) -> bool:
        return ports.publish("$JS.API." + subject[cut:], reply, hdr, payload) != 0

    def to_view(subject: str, reply: str, hdr: bytes | None, payload: bytes) -> bool:
        return ports.publish(subject[cut:], reply, hdr, payload) != 0

    for suffix, api in MAPPED_SUFFIXES:
        subs.append(ports.subscribe(prefix + suffix, to_api if api else to_view))
    return subs
