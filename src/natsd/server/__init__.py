"""natsd.server: the only package that owns sockets.

The core, in this folder: ``Server`` (listener, accounts, lifecycle), ``ClientConnection`` (one
client, an ``asyncio.Protocol`` around the sans-IO parser, with its ``Writer``), ``route`` (the
publish path) and ``ServerPorts`` (the JetStream seam). The rooms beside it: ``leaf/``
(leafnodes), ``transport/`` (TLS, WebSocket, busy polling), ``auth/`` (authentication,
authorization, operator mode, account imports) and ``monitoring/`` (HTTP endpoints, metrics,
dashboard, system requests). A room sees the server only through
:class:`natsd.server.context.ServerContext` and never imports ``server.server``.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from natsd.server.server import Server

__all__ = ["Server"]


def __getattr__(name: str) -> Any:
    # ``natsd.server.Server`` on first use: ``natsd -v``/``-h``/``-t`` (natsd.server.main) answer
    # without loading the server, and its start pauses the collector while loading it (issue 26).
    if name == "Server":
        from natsd.server.server import Server

        return Server
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
