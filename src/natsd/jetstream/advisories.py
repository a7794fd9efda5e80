"""JetStream advisories (JSON events on ``$JS.EVENT.ADVISORY.>``), shaped as nats-server's.

Every advisory starts with ``{"type": ..., "id": <nuid>, "timestamp": <RFC 3339>}``. They are
only built when someone listens (``JsAccount.send_advisory`` checks ``Ports.has_interest`` and
takes a builder callable), so the common case costs one interest lookup.

- ``$JS.EVENT.ADVISORY.STREAM.{CREATED,UPDATED,DELETED}.<stream>``:
  ``io.nats.jetstream.advisory.v1.stream_action`` with ``stream``, ``action``
  (``create``/``modify``/``delete``) and ``domain`` when set.
- ``$JS.EVENT.ADVISORY.API``: ``io.nats.jetstream.advisory.v1.api_audit`` with ``server``,
  ``client``, ``subject``, ``request`` (omitted when empty), ``response``, ``domain``.
  Our ``client`` object only carries ``acc`` (and ``server``): the Ports seam does not pass
  the requesting connection's details (the reference fills kind, id, host, user...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from natsd.gotime import format_rfc3339_or_zero as rfc3339  # (models.rfc3339; not models: issue 26, start-up time)
from natsd.nuid import nuid

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.views import AccountView

__all__ = ["stream_action", "api_audit", "ADVISORY_PREFIX", "API_AUDIT_SUBJECT"]

ADVISORY_PREFIX = "$JS.EVENT.ADVISORY."
API_AUDIT_SUBJECT = "$JS.EVENT.ADVISORY.API"


def _typed(acct: "AccountView", typ: str) -> dict:
    return {"type": typ, "id": nuid(), "timestamp": rfc3339(acct.clock.time_ns())}


def stream_action(acct: "AccountView", stream: str, action: str) -> dict:
    adv = _typed(acct, "io.nats.jetstream.advisory.v1.stream_action")
    adv["stream"] = stream
    adv["action"] = action
    if acct.engine.domain:
        adv["domain"] = acct.engine.domain
    return adv


def api_audit(acct: "AccountView", req: Any, response: bytes) -> None:
    """Publish the api_audit advisory for one handled request (when someone listens)."""

    def build() -> dict:
        adv = _typed(acct, "io.nats.jetstream.advisory.v1.api_audit")
        eng = acct.engine
        adv["server"] = eng.server_name
        adv["client"] = {"acc": acct.name, "server": eng.server_name}
        adv["subject"] = req.subject
        if req.payload:
            adv["request"] = req.payload.decode("utf-8", "replace")
        adv["response"] = response.decode("utf-8", "replace")
        if eng.domain:
            adv["domain"] = eng.domain
        return adv

    acct.send_advisory(API_AUDIT_SUBJECT, build)
