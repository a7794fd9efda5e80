"""Stream identity (nats-server 2.15, JetStream API level 5): detecting a recreated stream.

A stream's identity is nats-server's ``getHash`` of its creation time as RFC 3339 with
nanoseconds (the ``created`` of its info): a stream deleted and created again under the same name
has another one. A sourcing (or mirroring) stream sends the identity it saw last in a
``Nats-Stream-Identity`` header of its consumer create (and reset) requests:

* ``CONSUMER.CREATE`` of a ``direct``/``sourcing`` consumer: a non-empty header that differs from
  the stream's identity is refused with 10225 "consumer's stream identity does not match:
  <identity>"; otherwise the reply carries ``Nats-Stream-Identity: <identity>`` in its header;
* ``CONSUMER.RESET`` with the header present (any value): never refused, the reply's header
  carries the identity.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from natsd import nats_headers as NH
from natsd.gohash import get_hash
from natsd.jetstream.config.models import rfc3339
from natsd.protocol.headers import get_header

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.views import StreamView

__all__ = ["H_STREAM_IDENTITY", "identity_header", "requested_identity", "stream_identity"]

H_STREAM_IDENTITY = NH.STREAM_IDENTITY.decode()


def stream_identity(stream: StreamView) -> str:
    return get_hash(rfc3339(stream.created_ns))


def requested_identity(hdr: bytes | None) -> str | None:
    """The request's ``Nats-Stream-Identity`` (None when absent; "" when empty)."""
    return get_header(hdr, H_STREAM_IDENTITY) if hdr else None


def identity_header(identity: str) -> bytes:
    return b"NATS/1.0\r\n" + H_STREAM_IDENTITY.encode() + b": " + identity.encode() + b"\r\n\r\n"
