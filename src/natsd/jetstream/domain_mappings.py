"""JetStream domain mappings for KV and object stores.

With ``jetstream { domain: D }`` the reference maps ``$JS.D.API.<x>`` onto ``$JS.API.<x>`` (the
API itself: :meth:`natsd.jetstream.api.JetStreamApi.install` subscribes both prefixes) and also
``$JS.D.API.$KV.>`` onto ``$KV.>`` and ``$JS.D.API.$OBJ.>`` onto ``$OBJ.>``: a client that
addresses a KV bucket or object store "in domain D" (nats-py ``jetstream(domain=D)``, across a
leafnode link where ``$KV.>`` itself never crosses) publishes to the prefixed subject, and the
message must land in the bucket's stream as if published on ``$KV...``/``$OBJ...``.

Each mapping is one internal subscription that re-publishes the message, reply and headers
unchanged, on the mapped subject, in the same account.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.ports import Subscription
    from natsd.jetstream.views import AccountView

__all__ = ["setup_account"]

_MAPPED = ("$KV.", "$OBJ.")


def setup_account(js_account: "AccountView") -> list["Subscription"]:
    """Subscribe the account's domain mappings; returns the subscriptions (the account owns them)."""
    subs: list[Subscription] = []
    domain = js_account.engine.domain
    if not domain:
        return subs
    ports = js_account.ports
    for target in _MAPPED:
        prefix = f"$JS.{domain}.API.{target}"
        cut = len(prefix) - len(target)

        def forward(subject: str, reply: str, hdr: bytes | None, payload: bytes, _cut: int = cut) -> None:
            ports.publish(subject[_cut:], reply, hdr, payload)

        subs.append(ports.subscribe(prefix + ">", forward))
    return subs
