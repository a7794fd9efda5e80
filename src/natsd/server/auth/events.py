"""Authentication error advisories (nats-server's ``sendAuthErrorEvent``, events.go).

A client refused at CONNECT (wrong user, password, token, nkey or JWT, an auth callout's refusal)
is announced in the system account, when there is one, on ``$SYS.SERVER.<server id>.CLIENT.AUTH.ERR``
as a ``client_disconnect`` advisory::

    {"type": "io.nats.server.advisory.v1.client_disconnect", "id", "timestamp",
     "server": {...ServerInfo...},
     "client": {"start", "stop", "host", "id", "acc", "user"?, "name"?, "lang"?, "ver"?, "jwt"?,
                "name_tag", "kind": "Client", "client_type": "nats"},
     "sent": {"msgs": 0, "bytes": 0}, "received": {"msgs": 0, "bytes": 0},
     "reason": "Authentication Failure"}

``acc`` is the account the connection was in when refused: ``$G`` (nats-server registers every new
connection with the global account), and ``user`` what nats-server's ``getRawAuthUser`` shows: the
nkey, else the user name, else the JWT's subject, else ``[REDACTED]`` for a token (a secret never
goes out). An auth callout's refusal also goes to ``$SYS.ACCOUNT.CLIENT.AUTH.ERR`` in the callout
account (:mod:`natsd.server.auth.callout`), with the same body.

A refused login costs one JSON document, sent only when a system account exists.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from natsd.config import jwt as J
from natsd.gotime import format_rfc3339
from natsd.nuid import nuid as next_nuid
from natsd.server.msgtrace import server_info
from natsd.server.ports import ServerPorts

if TYPE_CHECKING:  # pragma: no cover
    from natsd.server.auth.authenticator import CalloutApplicant
    from natsd.server.context import ServerContext

__all__ = ["AUTH_FAILURE", "raw_auth_user", "disconnect_advisory", "send_auth_error_event"]

AUTH_FAILURE = "Authentication Failure"  # nats-server's AuthenticationViolation closed state
_DISCONNECT = "io.nats.server.advisory.v1.client_disconnect"


def raw_auth_user(opts: dict) -> str:
    """nats-server's ``getRawAuthUser`` over a CONNECT's fields."""
    if opts.get("nkey"):
        return str(opts["nkey"])
    if opts.get("user"):
        return str(opts["user"])
    if opts.get("jwt"):
        try:
            return str(J.decode(str(opts["jwt"])).get("sub") or "")
        except (J.JWTError, ValueError, TypeError, KeyError):
            return ""
    if opts.get("auth_token"):
        return "[REDACTED]"
    return ""


def disconnect_advisory(server: ServerContext, client: CalloutApplicant, acc: str, reason: str) -> dict[str, Any]:
    """The ``client_disconnect`` advisory of a connection refused at CONNECT."""
    now = server.clock.time_ns()
    opts = client.connect_opts or {}
    fields = {
        "start": format_rfc3339(client.start_ns),
        "stop": format_rfc3339(now),
        "host": client.ip,
        "id": client.cid,
        "acc": acc,
        "user": raw_auth_user(opts),
        "name": opts.get("name") or "",
        "lang": opts.get("lang") or "",
        "ver": opts.get("version") or "",
        "jwt": opts.get("jwt") or "",
        "name_tag": "$G",  # the global account's: where a refused connection still is
        "kind": "Client",
        "client_type": "nats",
    }
    return {
        "type": _DISCONNECT,
        "id": next_nuid(),
        "timestamp": format_rfc3339(now),
        "server": server_info(server),
        "client": {k: v for k, v in fields.items() if v},
        "sent": {"msgs": 0, "bytes": 0},
        "received": {"msgs": 0, "bytes": 0},
        "reason": reason,
    }


def send_auth_error_event(server: ServerContext, client: CalloutApplicant, acc: str = "$G") -> None:
    """``$SYS.SERVER.<id>.CLIENT.AUTH.ERR`` in the system account (nothing without one)."""
    trust = server.trust
    name = server.options.system_account or (trust.system_account if trust is not None else "")
    sys_acc = server.accounts.get(name) if name else None
    if sys_acc is None:
        return
    body = disconnect_advisory(server, client, acc, AUTH_FAILURE)
    data = json.dumps(body, separators=(",", ":")).encode()
    ServerPorts(sys_acc).publish(f"$SYS.SERVER.{server.server_id}.CLIENT.AUTH.ERR", "", None, data)
