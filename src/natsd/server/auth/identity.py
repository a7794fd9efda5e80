"""The identity side of a client connection (nkeys/JWT), kept apart from the transport code.

:class:`IdentityMixin` is a base of :class:`natsd.server.connection.ClientConnection`; it owns
the slots of its own state: the per-connection ``nonce`` sent in INFO, the expiry timer of a JWT user
(``-ERR 'User Authentication Expired'`` when its user or account JWT expires, on the injected
clock), and the user/account JWT ``subs``/``payload`` limits.
"""

from __future__ import annotations

import base64
import os
from typing import TYPE_CHECKING, Any

from natsd.protocol.errors import ERR_MAX_PAYLOAD, RemoteProtocolError
from natsd.protocol.events import OP_HPUB, OP_PUB, OP_PUB_BATCH, OP_PUB_RRUN, OP_PUB_RUN
from natsd.server.log import logger

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Timer
    from natsd.protocol.parser import Parser
    from natsd.server.auth.authenticator import AuthResult
    from natsd.server.context import ServerContext

__all__ = ["IdentityMixin", "REASON_AUTH_EXPIRED", "ERR_USER_EXPIRED"]

REASON_AUTH_EXPIRED = "Authentication Expired"
ERR_USER_EXPIRED = "User Authentication Expired"


class IdentityMixin:
    __slots__ = ("nonce", "jwt_iat", "_expire_timer", "jwt_max_subs", "jwt_max_payload")

    nonce: str
    jwt_iat: int | None
    _expire_timer: Timer | None
    jwt_max_subs: int
    jwt_max_payload: int

    if TYPE_CHECKING:  # what the mixin uses of ClientConnection
        server: ServerContext
        parser: Parser
        closed: bool
        prefix: str

        def process(self, events: list, start: int = 0, end: int | None = None) -> None: ...

        def protocol_error(self, e: RemoteProtocolError) -> None: ...

        def close_with_err(self, text: str, reason: str) -> None: ...

    def _init_identity(self) -> None:
        # nkeys/JWT: a fresh nonce per connection for the client to sign (11 random bytes,
        # base64url without padding: 15 characters, as nats-server sends it).
        self.nonce = (
            base64.urlsafe_b64encode(os.urandom(11)).rstrip(b"=").decode() if self.server.auth.nonce_required else ""
        )
        self.jwt_iat = None  # issued-at of the user JWT this client logged in with
        self._expire_timer = None
        self.jwt_max_subs = -1  # subscriptions allowed by the user/account JWT (-1: no JWT limit)
        self.jwt_max_payload = -1

    def _apply_jwt_limits(self, res: AuthResult) -> None:
        """JWT users: expiry timer, and the user/account ``subs``/``payload`` limits (a payload
        limit lowers this connection's parser limit: 'Maximum Payload Violation' and a close)."""
        self.jwt_iat = res.jwt_iat
        self._arm_expiry(res.expires)
        self.jwt_max_subs = res.max_subs
        self.jwt_max_payload = res.max_payload
        if res.max_payload >= 0:
            self.parser.max_payload = min(self.parser.max_payload, res.max_payload)

    def _arm_expiry(self, expires_s: int) -> None:
        """A JWT user is cut off when its (or its account's) JWT expires, as the reference."""
        if expires_s <= 0:
            return
        delay_ns = max(0, int(expires_s * 1_000_000_000 - self.server.clock.time_ns()))
        self._expire_timer = self.server.clock.call_later(delay_ns, self._expired)

    def _expired(self) -> None:
        self._expire_timer = None
        if not self.closed:
            logger.error("%s%s", self.prefix, ERR_USER_EXPIRED)
            self.close_with_err(ERR_USER_EXPIRED, REASON_AUTH_EXPIRED)

    def _payload_limit_rest(self, events: list, start: int) -> bool:
        """A JWT payload limit set by this CONNECT also holds for the operations the parser had
        already read behind it in the same chunk: run those up to the first oversized one, then
        fail as the parser would have. True when it closed the connection."""
        limit = self.jwt_max_payload
        for j in range(start, len(events)):
            ev = events[j]
            op = ev[0]
            sizes: Any
            if op == OP_PUB or op == OP_HPUB:
                sizes = (len(ev[4]),)
            elif op == OP_PUB_BATCH or op == OP_PUB_RUN or op == OP_PUB_RRUN:
                sizes = map(len, ev[1].payloads)
            else:
                continue
            if any(n > limit for n in sizes):
                self.process(events, start, j)
                if not self.closed:
                    self.protocol_error(RemoteProtocolError(ERR_MAX_PAYLOAD, "payload over the JWT limit"))
                return True
        return False
