"""A stream's set of consumers: the one path that creates, recovers, restores and deletes them.

A consumer comes into being three ways, and all three end the same way (registered in
``stream.consumers``, its store attached, its start position chosen, started):

* :func:`create` -- a ``CONSUMER.CREATE`` request, after the API layer parsed it; this is the
  reference's ``addConsumerWithAction``: the config gets its defaults and checks, an identical
  existing consumer is returned as is, a different one is updated (``action`` permitting), the
  work-queue rules are applied, a name is chosen, the durable store opened;
* :func:`recover` / :func:`recover_all` -- a server restart: the config and state come back
  from the stream's store (``consumer_store(name, None)``);
* :func:`restore` -- a stream restored from a snapshot: the config and state come from the
  archive, and a durable's store is written with that state before the consumer starts.

The API handlers (:mod:`natsd.jetstream.api.consumers`) parse a request, call one of these and
render the reply; nothing here knows about requests or replies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from natsd.gotime import format_rfc3339, parse_rfc3339
from natsd.jetstream.consumer import Consumer, create_consumer_name
from natsd.jetstream.config.consumer_config import (
    MAX_NAME_LEN,
    ConsumerConfig,
    check_update,
    is_valid_asset_name,
)
from natsd.jetstream.errors import ApiError, ApiErrors
from natsd.jetstream.features.metadata import parse_consumer
from natsd.jetstream.config.models import AckPolicy
from natsd.store.base import ConsumerState, StoreError

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.views import AccountView, StreamView
    from natsd.store.base import ConsumerStore

__all__ = ["create", "upgrade_sourcing", "recover", "recover_all", "recover_one", "restore", "lookup", "delete"]


def upgrade_sourcing(stream: "StreamView", cfg: ConsumerConfig) -> None:
    """A stream sourcing this one from another server asks for a ``direct`` + ``sourcing``
    consumer under a stable name (``JS_SRC_<hash>``; nats-server 2.14+ ``trySetupSourceConsumer``).
    As the reference's consumer create does for a single server, before the config's defaults
    and checks:

    * interest or work-queue retention: the consumer becomes a durable of that name acked by
      flow control (``ack_policy: flow_control``, no ack wait, unlimited deliveries, never
      inactive). What the sourcing side has not confirmed in a flow-control reply stays in the
      stream and is delivered again to the re-created consumer after a link drop, so a message
      in flight when the network fails is not lost (an ack-none consumer would have removed it);
    * limits retention: stays an ephemeral ack-none consumer, and a random suffix is appended
      to the stable name so every setup gets a consumer of its own.

    The upgrade does not depend on the API level the request requires: a hub only sends
    ``sourcing: true`` with its level-4/5 requests, which a server advertising a lower level
    refuses (412/10185) before this runs, and the hub then falls back to a plain ephemeral."""
    if not (cfg.direct and cfg.sourcing and cfg.name):
        return
    if stream.config.retention in ("interest", "workqueue"):
        cfg.direct = False
        cfg.durable_name = cfg.name
        cfg.ack_policy = AckPolicy.FLOW_CONTROL
        cfg.ack_wait = 0
        cfg.max_deliver = 0
        cfg.inactive_threshold = 0
    else:
        cfg.name = f"{cfg.name}-{create_consumer_name()}"


def create(stream: "StreamView", cfg: ConsumerConfig, action: str = "", pedantic: bool = False) -> Consumer:
    """Create (or update, or return the identical existing) consumer of ``stream``
    (``addConsumerWithAction``). Raises ApiError as the reference."""
    existing_name = cfg.durable_name or cfg.name
    existing = _get(stream, existing_name) if existing_name else None
    if existing is not None:
        cfg.pause_until = existing.cfg.pause_until
        if cfg.sourcing and cfg.durable_name:
            # A durable sourcing consumer set up again (the link dropped, the sourcing stream
            # restarted): it resumes from its own ack floor, not from where the request says.
            ec = existing.cfg
            cfg.deliver_policy, cfg.opt_start_seq, cfg.opt_start_time = (
                ec.deliver_policy,
                ec.opt_start_seq,
                ec.opt_start_time,
            )
    cfg.set_default_metadata()
    acc_map = _acc_max_ack_pending(stream.account)
    cfg.set_defaults(stream.config.consumer_limits, acc_map, pedantic)
    cfg.check(stream.config, acc_map)
    # natsd.* feature keys (19xxx when invalid; a partition key needs a plain explicit-ack pull consumer)
    parse_consumer(
        cfg.metadata,
        stream.config.subjects,
        cfg.filters(),
        "a partition key needs a pull consumer"
        if cfg.deliver_subject
        else "a partition key needs ack policy explicit"
        if cfg.ack_policy != "explicit"
        else "a partition key can not be combined with priority groups"
        if cfg.priority_policy != "none"
        else "",
    )
    retention = stream.config.retention

    if existing is not None:
        if action == "create" and not cfg.same_as(existing.cfg):
            raise ApiErrors.CONSUMER_ALREADY_EXISTS()
        if retention == "workqueue":
            stream.check_workqueue_filters(cfg.filters(), existing.name)
        if cfg.same_as(existing.cfg):
            return existing
        has_int = bool(
            existing.cfg.deliver_subject
            and cfg.deliver_subject != existing.cfg.deliver_subject
            and stream.account.ports.has_interest(existing.cfg.deliver_subject)
        )
        check_update(existing.cfg, cfg, has_int)
        existing.update_config(cfg)
        if cfg.sourcing:
            _restart_sourcing(existing)
        return existing
    if action == "update":
        raise ApiErrors.CONSUMER_DOES_NOT_EXIST()

    if retention == "workqueue" and not cfg.direct and not cfg.sourcing:
        if cfg.ack_policy not in ("explicit", "flow_control"):
            raise ApiErrors.CONSUMER_WQ_REQUIRES_EXPLICIT_ACK()
        if cfg.deliver_policy != "all":
            raise ApiErrors.CONSUMER_WQ_CONSUMER_NOT_DELIVER_ALL()
        if stream.consumers:
            stream.check_workqueue_filters(cfg.filters(), None)

    if cfg.durable_name:
        if len(cfg.durable_name) > MAX_NAME_LEN:
            raise ApiErrors.CONSUMER_NAME_TOO_LONG(max=MAX_NAME_LEN)
        name = cfg.durable_name
    elif cfg.name:
        name = cfg.name
    else:
        name = create_consumer_name()
        while stream.consumer(name) is not None:
            name = create_consumer_name()
        # The generated name is the consumer's, not part of its config: the reference's replies
        # leave config.name out for a consumer created without one.
    if not is_valid_asset_name(name):
        raise ApiErrors.CONSUMER_BAD_DURABLE_NAME()

    created = stream.clock.time_ns()
    o = Consumer(stream, cfg, name, created)
    stream.add_consumer(o)  # max_consumers (10026)
    try:
        o.store = _open_store(stream, o)
        o.select_start()
        o.start()
    except Exception:
        stream.consumers.pop(name, None)
        o.closed = True
        raise
    if cfg.sourcing:
        _restart_sourcing(o)
    o._advisory("CREATED", "consumer_action", {"stream": stream.name, "consumer": name, "action": "create"})
    return o


def _restart_sourcing(o: Consumer) -> None:
    """A sourcing consumer (re)created or updated starts over from its ack floor, as the
    reference's single server does: what was delivered and not confirmed is delivered again,
    under consumer sequences from 1, to the sourcing side's new subscription (which drops
    what it already stored by stream sequence). A flow-control request the old subscription
    never answered is forgotten, or delivery would wait for the stalled-heartbeat round trip."""
    o.reset(0)
    if o.push is not None:
        o.push.reset_flow_control()


def _acc_max_ack_pending(account: "AccountView") -> int:
    lim = account.limits
    return lim.max_ack_pending if lim is not None else -1


def _open_store(stream: "StreamView", o: Consumer) -> "ConsumerStore | None":
    """Durable, file-backed consumers persist their state through the stream's store;
    ephemerals and ``mem_storage`` consumers keep it in memory only."""
    if not o.cfg.durable_name or o.cfg.mem_storage:
        return None
    try:
        return stream.store.consumer_store(o.name, o.meta())
    except Exception as e:
        raise ApiErrors.CONSUMER_STORE_FAILED(err=str(e)) from None


def recover(stream: "StreamView", name: str, first: int | None = None) -> Consumer | None:
    """Re-create consumer ``name`` from its persisted meta and state (server restart).
    ``first``: the stream's first sequence to clamp to (None: its first sequence now; see
    ``Consumer.clamp_to_stream``)."""
    cs = stream.store.consumer_store(name, None)
    meta = cs.meta
    if not meta or "config" not in meta:
        return None
    cfg = ConsumerConfig.from_json(meta["config"])
    created = parse_rfc3339(meta["created"]) if meta.get("created") else stream.clock.time_ns()
    state: ConsumerState = cs.state()
    # A durable that never delivered anything and starts "last per subject" picks its start
    # again; every other consumer resumes exactly where its persisted state says (creation
    # wrote delivered.stream_seq = start - 1, so "new" does not skip what arrived meanwhile).
    fresh = (
        state.delivered.stream_seq == 0
        and state.delivered.consumer_seq == 0
        and not state.pending
        and cfg.deliver_policy == "last_per_subject"
    )
    damaged = bool(cs.state_damaged)
    o = Consumer(stream, cfg, name, created, store=cs, state=None if fresh or damaged else state)
    stream.consumers[name] = o
    if damaged:
        o.restart_after_damage()
    elif fresh:
        o.select_start()
    else:
        o.clamp_to_stream(first)
    o.start()
    if o.dead_letters is not None:
        # natsd.dead_letter: copies a crash left unconfirmed go again once every stream is back
        # (the dead-letter stream may recover after this one).
        o.clock.call_soon(o.dead_letters.recover)
    return o


def recover_all(stream: "StreamView", names: list[str] | None = None) -> None:
    """Re-create the consumers persisted with ``stream`` (after the stream was recovered);
    ``names``: those of them (the caller listed them already)."""
    if names is None:
        try:
            names = stream.store.consumer_names()
        except StoreError:
            return
    for name in names:
        recover_one(stream, name)


def recover_one(stream: "StreamView", name: str, first: int | None = None) -> Consumer | None:
    """:func:`recover`; a consumer whose config no longer loads is skipped (None), not fatal
    for the stream."""
    try:
        return recover(stream, name, first)
    except (ApiError, StoreError, ValueError, KeyError, TypeError):
        return None


def restore(stream: "StreamView", name: str, cfg: ConsumerConfig, state: ConsumerState) -> Consumer:
    """Recreate consumer ``name`` of a stream restored from a snapshot, with the archive's state:
    a durable's store is written with it first, so a crash right after still has it."""
    created = stream.clock.time_ns()
    store = None
    if cfg.durable_name and not cfg.mem_storage:
        meta = {"stream_name": stream.name, "name": name, "created": format_rfc3339(created), "config": cfg.to_json()}
        store = stream.store.consumer_store(name, meta)
        store.update(state)
        store.flush()
    # As recover(): only a "last per subject" durable that never delivered picks its start again;
    # the others resume at the archive's state (a "new" consumer made on an empty stream has
    # delivered {0, 0} and must still deliver what arrived since, e.g. an MQTT session's backlog).
    fresh = (
        state.delivered.stream_seq == 0
        and state.delivered.consumer_seq == 0
        and not state.pending
        and cfg.deliver_policy == "last_per_subject"
    )
    o = Consumer(stream, cfg, name, created, store=store, state=None if fresh else state)
    stream.consumers[name] = o
    if fresh:
        o.select_start()
    o.start()
    return o


def _get(stream: "StreamView", name: str) -> Consumer | None:
    # The stream sees its consumers through ConsumerView; this module is the only one that
    # puts entries into ``stream.consumers`` and each one is a Consumer it made. (A woken
    # stream's consumer not recovered yet is recovered here: Stream.consumer.)
    return cast("Consumer | None", stream.consumer(name))


def lookup(stream: "StreamView", name: str) -> Consumer:
    """Consumer ``name`` of ``stream``; 404/10014 when there is none."""
    o = _get(stream, name)
    if o is None:
        raise ApiErrors.CONSUMER_NOT_FOUND()
    return o


def delete(stream: "StreamView", name: str) -> None:
    """Delete consumer ``name``: its waiting pulls are answered, its store dropped, the DELETED
    advisory sent (:meth:`Consumer.delete_from_stream`)."""
    lookup(stream, name).delete_from_stream()
