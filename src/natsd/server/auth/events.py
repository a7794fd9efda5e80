"""Authentication error advisories (nats-server's ``sendAuthErrorEvent``, events.go).

A client refused at CONNECT (wrong user, password, token, nkey or JWT, an auth callout's refusal)
is announced in the system account, when there is one, on ``$SYS.SERVER.<server id>.CLIENT.AUTH.ERR``,
and in the account the connection was in (``$G``) on ``$SYS.ACCOUNT.CLIENT.AUTH.ERR`` (seen by the
users of the global account: ``authorization { users }`` without accounts), as a
``client_disconnect`` advisory::

    {"type": "io.nats.server.advisory.v1.client_disconnect", "id", "timestamp",
     "server": {...ServerInfo...},
     "client": {"start", "stop", "host", "id", "acc", "user"?, "name"?, "lang"?, "ver"?, "jwt"?,
                "name_tag", "kind": "Client", "client_type": "nats"},
     "sent": {"msgs": 0, "bytes": 0}, "received": {"msgs": 0, "bytes": 0},
     "reason": "Authentication Failure"}

``acc`` is the account the connection was in when refused: ``$G`` (nats-server registers every new
connection with the global account), and ``user`` what nats-server's ``getRawAuthUser`` shows: the
nkey, else the user name, else the JWT's subject, else ``[REDACTED]`` for a token (a secret never
goes out). With an auth callout, the account advisory is the callout's
(:mod:`natsd.server.auth.callout`: in the callout account, its refusal's text as the reason).

A refused login costs one JSON document, sent only when a system account exists.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from natsd.config import jwt_tokens as J
from natsd.gotime import format_rfc3339
from natsd.nuid import nuid as next_nuid
from natsd.server.msgtrace import server_info
from natsd.server.ports import ServerPorts
from natsd.protocolbase import Protocol

if TYPE_CHECKING:  # pragma: no cover
    from natsd.server.context import ServerContext

__all__ = ["AUTH_FAILURE", "Refused", "raw_auth_user", "disconnect_advisory", "send_auth_error_event"]


class Refused(Protocol):
    """What the advisory shows of a refused connection (a client's or a leafnode link's)."""

    cid: int
    ip: str
    start_ns: int


AUTH_FAILURE = "Authentication Failure"  # nats-server's AuthenticationViolation closed state
_DISCONNECT = "io.nats.server.advisory.v1.client_disconnect"
_ACCOUNT_AUTH_ERR = "$SYS.ACCOUNT.CLIENT.AUTH.ERR"


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


def disconnect_advisory(
    server: ServerContext, client: Refused, opts: dict, acc: str, reason: str, leaf: bool = False
) -> dict[str, Any]:
    """The ``client_disconnect`` advisory of a connection refused at its CONNECT (``opts``). A
    leafnode connection is of kind ``Leafnode``, in no account yet (``N/A``), with no client type
    nor account name tag."""
    now = server.clock.time_ns()
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
        "name_tag": "" if leaf else "$G",  # the global account's: where a refused client still is
        "kind": "Leafnode" if leaf else "Client",
        "client_type": "" if leaf else "nats",
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


def send_auth_error_event(
    server: ServerContext, client: Refused, opts: dict, acc: str = "$G", account_event: bool = True, leaf: bool = False
) -> None:
    """The advisories of a refused login: ``$SYS.ACCOUNT.CLIENT.AUTH.ERR`` in the account the
    connection was in (``account_event``: not when an auth callout decides, which sends its own,
    natsd.server.auth.callout), and ``$SYS.SERVER.<id>.CLIENT.AUTH.ERR`` in the system account
    when there is one (nats-server's sendAccountAuthErrorEvent and sendAuthErrorEvent). A
    leafnode connection (``leaf``, its CONNECT ``opts``) is in no account: the server's only."""
    account = server.accounts.get(acc) if account_event and not leaf else None
    if account is not None:
        body = disconnect_advisory(server, client, opts, acc, AUTH_FAILURE)
        ServerPorts(account).publish(_ACCOUNT_AUTH_ERR, "", None, json.dumps(body, separators=(",", ":")).encode())
    trust = server.trust
    name = server.options.system_account or (trust.system_account if trust is not None else "")
    sys_acc = server.accounts.get(name) if name else None
    if sys_acc is None:
        return
    body = disconnect_advisory(server, client, opts, "N/A" if leaf else acc, AUTH_FAILURE, leaf)
    data = json.dumps(body, separators=(",", ":")).encode()
    ServerPorts(sys_acc).publish(f"$SYS.SERVER.{server.server_id}.CLIENT.AUTH.ERR", "", None, data)
