"""What the server's rooms need of the server: :class:`ServerContext`, a typed protocol.

The rooms (``leaf/``, ``auth/``, ``monitoring/``, ``transport/``) and the per-connection code
(``connection``, ``writer``) are handed the :class:`~natsd.server.server.Server` at run time, but
they name it only through this protocol. So none of them imports ``server.server``, not even for
type checking, and the module graph has no circle through it: ``server.server`` imports its
rooms, the rooms import this module, and this module imports no room that would import it back.
A member a room needs is declared here (``Server`` has it; mypy checks that it does wherever a
``Server`` is passed as a ``ServerContext``); monitoring's longer list is its own protocol
(:class:`natsd.server.monitoring.endpoints.MonitoredServer`), and the client connection's
registration is :class:`natsd.server.connection.ConnectionHost`; both extend this one.

Nothing here runs: the module holds only protocols, so the per-message path is what it was
(attribute reads on the same ``Server`` object).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from natsd.protocolbase import Protocol

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Clock
    from natsd.config.jwt import AccountClaims
    from natsd.config.options import AccountJetStreamLimits, ServerOptions
    from natsd.jetstream.manager import JetStreamEngine
    from natsd.server.account import Account
    from natsd.server.auth.authenticator import Authenticator
    from natsd.server.transport.busypoll import BusyPoll
    from natsd.server.transport.flushbatch import FlushBatch
    from natsd.server.transport.tls import HandshakeQueue, TlsContexts

__all__ = ["ServerContext", "TrustView"]


class TrustView(Protocol):
    """What a room asks of operator mode (:class:`natsd.server.auth.trust.Trust`): an account's
    claims as the resolver holds them now (``None``: unknown or not valid)."""

    system_account: str

    def lookup(self, account: str) -> AccountClaims | None: ...


class ServerContext(Protocol):
    """The server as its rooms see it: time, loop, options, identity, accounts, auth, counters."""

    # Read-only members are properties here (a Server attribute or property satisfies them, and
    # a narrower type, e.g. Trust for TrustView, is accepted); the counters are plain attributes
    # because the connections bump them.

    # the injected clock (timers, deadlines, expiry) and the loop the server runs on (set by
    # start(); the rooms run only after it)
    @property
    def clock(self) -> Clock: ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None: ...

    @property
    def options(self) -> ServerOptions: ...

    @property
    def server_id(self) -> str: ...

    @property
    def server_name(self) -> str: ...

    # who may connect and as what
    @property
    def auth(self) -> Authenticator: ...

    @property
    def trust(self) -> TrustView | None: ...

    @property
    def tls(self) -> TlsContexts: ...

    @property
    def handshakes(self) -> HandshakeQueue: ...  # the TLS handshakes' worker (start() makes it)

    # accounts and clients
    @property
    def accounts(self) -> dict[str, Account]: ...

    @property
    def global_account(self) -> Account: ...

    @property
    def jetstream(self) -> JetStreamEngine | None: ...

    @property
    def busy_poll(self) -> BusyPoll: ...

    @property
    def flush_batch(self) -> FlushBatch: ...

    # counters the connections bump (shown by /varz)
    slow_consumers: int
    stale_connections: int
    stalled_clients: int

    def next_cid(self) -> int: ...

    def get_account(self, name: str) -> Account: ...

    def apply_js_limits(self, acc: Account, limits: AccountJetStreamLimits | None) -> None: ...
