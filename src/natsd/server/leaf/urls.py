"""Which URL a leaf remote dials next, and when: nats-server's rules (its ``leafNodeCfg``).

* The remote's URLs are copied and shuffled once, when the remote is created, unless
  ``dont_randomize: true`` (or ``no_randomize``): a fleet of leaves configured with the same list
  spreads over the hub's nodes instead of all dialling the first.
* Each attempt takes the list's first URL; when that is the URL used last (the link to it just
  failed or died), it first moves to the end of the list. So a leaf whose hub node died dials the
  next node, and a list is walked in a circle.
* The hub's INFO names the leafnode URLs of its cluster (``leafnode_urls``, ``host:port``): the
  list becomes the configured URLs, in their configured order, followed by those the configuration
  lacks (nats-server's doUpdateLNURLs), so a leaf given one node of a cluster re-links to another.
  They carry no credentials: the configured URLs' user and password are used for them.
* A dial that fails waits ``reconnect`` plus a random jitter below ``reconnect`` (no exponential
  backoff); a link that was connected and closed (the hub node died, or refused the handshake)
  waits exactly ``reconnect`` (default 1 s) before the next dial: the 1.0 s re-link nats-server shows.

Sans-IO: the random source is passed in (seeded in tests), the delays are returned, not slept.
"""

from __future__ import annotations

import random
from urllib.parse import urlsplit

__all__ = ["RemoteUrls", "dial_failure_delay_ns", "link_closed_delay_ns"]


class RemoteUrls:
    """One remote's URL list in dialling order (nats-server's ``urls``/``curURL``/``pickNextURL``)."""

    __slots__ = ("urls", "current")

    def __init__(self, urls: list[str], *, randomize: bool, rng: random.Random) -> None:
        self.urls = list(urls)
        if randomize:
            rng.shuffle(self.urls)
        self.current: str | None = None

    def update_from_info(self, configured: list[str], discovered: list[str], scheme: str = "nats-leaf") -> None:
        """The hub's INFO ``leafnode_urls``: configured URLs first, then the new ``scheme://host:port`` ones."""
        have = {_host_port(u) for u in configured}
        urls = list(configured)
        for hp in discovered:
            if not isinstance(hp, str) or not hp:
                continue
            u = f"{scheme}://{hp}"
            if _host_port(u) not in have:
                have.add(_host_port(u))
                urls.append(u)
        self.urls = urls

    def pick_next(self) -> str:
        """The URL to dial now: the first of the list, after moving the last one used to the end."""
        if self.current is not None and len(self.urls) > 1 and self.urls[0] == self.current:
            self.urls.append(self.urls.pop(0))
        self.current = self.urls[0]
        return self.current


def _host_port(url: str) -> tuple[str, int | None]:
    sp = urlsplit(url if "://" in url else f"nats-leaf://{url}")
    try:
        port = sp.port
    except ValueError:
        port = None
    return (sp.hostname or "").lower(), port


def dial_failure_delay_ns(reconnect_ns: int, rng: random.Random) -> int:
    """After a failed dial: ``reconnect`` plus a jitter in [0, reconnect) (Go's ``rand.Int63n``)."""
    return reconnect_ns + (rng.randrange(reconnect_ns) if reconnect_ns > 0 else 0)


def link_closed_delay_ns(reconnect_ns: int) -> int:
    """After a connected link closed: exactly ``reconnect`` (nats-server's reConnectToRemoteLeafNode)."""
    return reconnect_ns
