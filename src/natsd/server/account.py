"""Accounts: isolated subject spaces.

Every account owns its own :class:`~natsd.subjects.sublist.Sublist`; a message published by a
client of account A can only ever reach subscriptions in A's Sublist. ``$G`` is the global
account that users without an explicit account belong to (as in nats-server).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from natsd.subjects.sublist import Sublist

if TYPE_CHECKING:  # pragma: no cover
    from natsd.config.options import AccountJetStreamLimits
    from natsd.jetstream.manager import JsAccount
    from natsd.server.ports import ServerPorts
    from natsd.server.subscription import Subscription
    from natsd.subjects.mapping import SubjectMapper

__all__ = ["Account", "GLOBAL_ACCOUNT"]

GLOBAL_ACCOUNT = "$G"


class Account:
    """One subject space plus its counters and client-interest listeners."""

    __slots__ = (
        "name",
        "sublist",
        "interest_handlers",
        "clients",
        "jetstream",
        "js_limits",
        "ports",
        "js_disabled_subs",
        "links",
        "mapper",
        "trace_dest",
        "trace_sampling",
        "__weakref__",
    )

    def __init__(self, name: str, cache: bool = True) -> None:
        self.name = name
        self.sublist: Sublist = Sublist(cache=cache)
        # Callbacks (subject, added) for client SUB/UNSUB; see natsd.jetstream.ports.
        self.interest_handlers: list[Callable[[str, bool], None]] = []
        self.clients: set = set()
        self.jetstream: JsAccount | None = None  # the engine's per-account object when JetStream is enabled
        self.js_limits: AccountJetStreamLimits | None = None
        self.ports: ServerPorts | None = None  # when JetStream is enabled here
        self.js_disabled_subs: list[Subscription] = []  # the "JetStream not enabled" API answerers
        self.links: list = []  # internal subscriptions this account's JWT imports installed
        # Subject mappings (natsd.server.mapping); None when the account has none, so a publish
        # pays nothing for the feature (the connection reads this once per batch of events).
        self.mapper: SubjectMapper | None = None
        # msg_trace { dest, sampling }: where sampled W3C traceparent publishes are traced
        # (natsd.server.msgtrace); "" = not configured.
        self.trace_dest = ""
        self.trace_sampling = 0

    def notify_interest(self, subject: str, added: bool) -> None:
        for h in tuple(self.interest_handlers):
            try:
                h(subject, added)
            except Exception:  # a listener's bug must not break the subscribing client
                import logging

                logging.getLogger("natsd.server").exception("interest handler failed")

    def __repr__(self) -> str:
        return f"<Account {self.name}>"
