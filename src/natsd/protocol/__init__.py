"""natsd.protocol: the sans-IO client protocol (no sockets, no asyncio).

``Parser`` turns bytes from a client into event tuples (``events``); ``encoder`` writes the
server's lines; ``headers`` builds and reads ``NATS/1.0`` header/status blocks; ``errors`` holds
the exact ``-ERR`` texts of the reference server.
"""

from natsd.protocol import encoder, errors, events, headers
from natsd.protocol.errors import LocalProtocolError, ProtocolError, RemoteProtocolError
from natsd.protocol.headers import build_header, build_status_header, get_header, parse_headers
from natsd.protocol.parser import Parser

__all__ = [
    "Parser",
    "ProtocolError",
    "RemoteProtocolError",
    "LocalProtocolError",
    "build_header",
    "build_status_header",
    "parse_headers",
    "get_header",
    "encoder",
    "errors",
    "events",
    "headers",
]
