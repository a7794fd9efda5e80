"""A stream's consumers as the rest of natsd reaches them (:class:`StreamConsumers`, a part of
:class:`~natsd.jetstream.stream.core.Stream`).

A sleeping stream (natsd.jetstream.dormant, ADR 0008) or a woken one that has not recovered all
its consumers yet (``stream.lazy``, ADR 0014) holds in ``consumers`` only those recovered. So:

* :meth:`StreamConsumers.consumer` is the lookup by name (recovers that one on a miss);
* :meth:`StreamConsumers.all_consumers` is for anything that needs every consumer (recovers the
  rest: delete, update, purge, snapshots, monitoring with consumers);
* :meth:`StreamConsumers.num_consumers` and :meth:`StreamConsumers.consumer_names` count and
  name them without recovering any.

``add_consumer`` and ``check_workqueue_filters`` are the limits a consumer create checks. The
retention side (acks, removals, interest) stays with the stream (``core``): it runs on the
messages' paths.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from natsd.jetstream.errors import ApiErrors
from natsd.subjects.tokens import subjects_collide

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.config.models import StreamConfig
    from natsd.jetstream.views import AccountView, ConsumerView, LazyConsumersView

__all__ = ["StreamConsumers"]


class StreamConsumers:
    """The consumer accessors of :class:`~natsd.jetstream.stream.core.Stream` (its base class)."""

    # (the stream's own, set by Stream.__init__: named here for the type checker)
    account: AccountView
    config: StreamConfig
    consumers: dict[str, ConsumerView]
    lazy: LazyConsumersView | None
    wakers: dict[str, ConsumerView]
    _workqueue: bool

    def add_consumer(self, consumer: ConsumerView) -> None:
        """Register ``consumer`` (``.name``). Enforces the stream's max_consumers and the
        account's max_consumers (10026 "maximum consumers limit reached")."""
        name = consumer.name
        if name not in self.consumers and not _is_direct(consumer):
            # internal (direct: mirror / source) consumers do not count, as the reference's
            # numLimitableConsumers
            mc = self.config.max_consumers
            if mc <= 0:
                mc = self.account.engine.default_max_consumers
            # The exact (limitable) counts walk every consumer: only when the plain count could
            # reach the limit, so adding the n-th consumer is not O(n) (issue 31).
            # (consumers not recovered yet are durables, none direct)
            consumers = self.consumers
            lazy = len(self.lazy) if self.lazy is not None else 0
            if (
                mc > 0
                and len(consumers) + lazy >= mc
                and sum(1 for c in consumers.values() if not _is_direct(c)) + lazy >= mc
            ):
                raise ApiErrors.MAXIMUM_CONSUMERS_LIMIT()
            lim = self.account.limits
            if (
                lim is not None
                and lim.max_consumers > 0
                and self.account.num_consumers() >= lim.max_consumers
                and self.account.num_consumers(limitable=True) >= lim.max_consumers
            ):
                raise ApiErrors.MAXIMUM_CONSUMERS_LIMIT()
        self.consumers[name] = consumer

    def consumer(self, name: str) -> ConsumerView | None:
        """Consumer ``name`` (None: there is none); one a woken stream has not recovered yet is
        recovered now (a sleeping stream wakes first: DormantConsumers)."""
        c = self.consumers.get(name)
        if c is None and self.lazy is not None:
            c = self.lazy.recover(name)
        return c

    def all_consumers(self) -> dict[str, ConsumerView]:
        """``consumers`` once every consumer is recovered (a sleeping stream wakes first)."""
        consumers = self.consumers
        if type(consumers) is not dict:  # (DormantConsumers: asleep)
            consumers.keys()
        if self.lazy is not None:
            self.lazy.recover_all()
        return self.consumers

    def num_consumers(self) -> int:
        """How many consumers, recovered or not (asleep: the count the clean stop recorded)."""
        return len(self.consumers) + (len(self.lazy) if self.lazy is not None else 0)

    def consumer_names(self) -> list[str]:
        """Every consumer's name, sorted, without recovering any."""
        names = list(self.consumers)  # (asleep: wakes the stream)
        if self.lazy is not None:
            names += self.lazy.names
        return sorted(names)

    def wake_on_new(self, consumer: ConsumerView) -> None:
        """``consumer`` can take new messages now (push, or a pull request is waiting): tell it
        about them after each turn until it no longer ``wants_new()``."""
        self.wakers[consumer.name] = consumer

    def check_workqueue_filters(self, new_filters: list[str], exclude_name: str | None = None) -> None:
        """Work-queue rule at consumer add: at most one unfiltered consumer (10099) and no two
        consumers with overlapping filters (10100)."""
        if not self._workqueue:
            return
        others = [c for n, c in self.consumers.items() if n != exclude_name and not _is_direct(c)]
        if not others:
            return
        filters = [f for f in new_filters if f]
        if not filters:
            raise ApiErrors.CONSUMER_WQ_MULTIPLE_UNFILTERED()
        for c in others:
            existing = _consumer_filters(c)
            if not existing:
                raise ApiErrors.CONSUMER_WQ_CONSUMER_NOT_UNIQUE()
            for f in existing:
                for nf in filters:
                    if subjects_collide(f, nf):
                        raise ApiErrors.CONSUMER_WQ_CONSUMER_NOT_UNIQUE()


def _is_direct(c: "ConsumerView") -> bool:
    """An internal consumer (mirror / source feed): ``config.direct`` (or ``sourcing``) set."""
    cfg = c.config
    return cfg.direct or cfg.sourcing


def _consumer_filters(c: "ConsumerView") -> list[str]:
    return [f for f in c.filters if f]
