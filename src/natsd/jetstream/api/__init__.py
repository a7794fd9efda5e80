"""The ``$JS.API`` layer: a thin JSON layer over :mod:`natsd.jetstream`.

:func:`register_all` installs the account- and stream-level handlers on an account's router;
the consumer handlers are registered by ``natsd.jetstream.consumer.setup_account``.
"""

from __future__ import annotations

from natsd.jetstream.api.router import ApiRouter

__all__ = ["register_all"]


def register_all(router: ApiRouter) -> None:
    from natsd.jetstream.api import account, streams
    account.register(router)
    streams.register(router)
