"""Leafnode connections: the accepting side and the soliciting remotes (nats-server's leafnode.go).

``node`` is one leafnode connection (an ``asyncio.Protocol``), ``manager`` dials and re-dials the
remotes, ``handshake`` runs INFO/CONNECT both ways, ``auth`` checks a remote's credentials and
``compress`` is the S2 stream compression negotiated in the handshake. Imported only when the
configuration has a ``leafnodes`` block.
"""
