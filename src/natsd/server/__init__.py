"""natsd.server: the only package that owns sockets.

``Server`` (listener, accounts, lifecycle), ``ClientConnection`` (one client, an
``asyncio.Protocol`` around the sans-IO parser), ``route`` (the publish path), ``ServerPorts``
(the JetStream seam) and the monitoring HTTP endpoints.
"""

from natsd.server.server import Server

__all__ = ["Server"]
