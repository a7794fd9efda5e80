"""Narrow, typed views of a stream, an account and the engine, for the parts that only need a
few of their members.

The concrete classes (:class:`natsd.jetstream.stream.Stream`,
:class:`natsd.jetstream.manager.JsAccount`, :class:`natsd.jetstream.manager.JetStreamEngine`,
:class:`natsd.jetstream.consumer.Consumer`) satisfy these protocols structurally. Consumers,
snapshots, advisories, templates, domain mappings and the consumer registry name these views
instead of the classes, so no part imports (even for type checking only) the whole it belongs
to: the package's import graph has no cycle, type-only imports included (print it with
``python -m tests.unit.test_layering --graph jetstream``).

A member appears here because a part uses it; add one the same way (the type checker proves
every implementation has it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from natsd.protocolbase import Protocol

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Clock
    from natsd.config.options import AccountJetStreamLimits, ServerOptions
    from natsd.jetstream.config.batch_limits import BatchLimits
    from natsd.jetstream.config.consumer_config import ConsumerConfig
    from natsd.jetstream.config.models import StreamConfig
    from natsd.jetstream.errors import ApiError
    from natsd.jetstream.ports import MsgHandler, Ports
    from natsd.store.base import ConsumerState, StreamStore
    from natsd.store.file.encryption import AccountKeys

__all__ = ["ApiView", "EngineView", "AccountView", "StreamView", "ConsumerView", "AckView", "LazyConsumersView"]


class ApiView(Protocol):
    """What a stream needs of the ``$JS.API`` layer: its DIRECT.GET handlers."""

    def direct_get_handlers(self, stream: "StreamView") -> tuple["MsgHandler", "MsgHandler"]: ...


class EngineView(Protocol):
    """Server-wide JetStream as the parts of an account see it (:class:`JetStreamEngine`)."""

    options: "ServerOptions"
    domain: str
    server_name: str
    sync_always: bool
    sync_interval_ns: int
    batch_limits: "BatchLimits"
    #: [memory, file] bytes stored server-wide, kept current by the streams
    used: list[int]
    max_memory: int
    max_store: int
    #: consumers per stream when the stream sets none (jetstream { limits { default_max_consumers } })
    default_max_consumers: int
    #: feature flag js_ack_fc_v2: consumers use the v2 ack and flow-control subjects
    ack_v2: bool

    @property
    def api(self) -> ApiView | None: ...

    @property
    def accounts(self) -> Mapping[str, "AccountView"]: ...

    def resources_exceeded(self, storage: str) -> None: ...

    def keys_for(self, account: str) -> "AccountKeys | None": ...


class AccountView(Protocol):
    """One JetStream account (:class:`JsAccount`) as its streams, consumers, snapshots,
    templates and advisories see it."""

    name: str
    clock: "Clock"
    ports: "Ports"
    directory: str
    limits: "AccountJetStreamLimits | None"
    limits_enforced: bool

    @property
    def engine(self) -> EngineView: ...

    @property
    def streams(self) -> Mapping[str, "StreamView"]: ...

    def send_advisory(self, subject: str, obj: dict[str, Any] | Any) -> None: ...

    def num_consumers(self, limitable: bool = False) -> int: ...

    def stream_dir(self, name: str) -> str: ...

    def add_stream(
        self, cfg: "StreamConfig", created_ns: int | None = None, subscribe: bool = True
    ) -> "StreamView": ...

    def adopt_stream(
        self, cfg: "StreamConfig", store: "StreamStore", created_ns: int, subscribe: bool = True
    ) -> "StreamView": ...

    def delete_stream(self, name: str) -> None: ...

    def usage(self) -> tuple[int, int]: ...

    def check_store_limits(self, storage: str, size: int) -> "ApiError | None": ...

    def note_stored(self, storage: str, size: int) -> None: ...

    def note_removed(self, storage: str, bytes_delta: int) -> None: ...

    def check_new_stream_limits(self, cfg: "StreamConfig", existing: "StreamConfig | None" = None) -> None: ...

    def stream_config_changed(self, old: "StreamConfig", new: "StreamConfig") -> None: ...


class AckView(Protocol):
    """A consumer's ack processing, as the account's ``$JS.ACK`` subscription calls it."""

    def process(self, sseq: int, dseq: int, dc: int, reply: str, body: bytes) -> None: ...

    def ack(self, sseq: int, dseq: int, dc: int, sample: bool) -> bool: ...

    def ack_run(self, sseqs: list[int]) -> None: ...

    def run_ok(self, sseqs: list[int]) -> bool: ...


class ConsumerView(Protocol):
    """A consumer as its stream sees it (:class:`natsd.jetstream.consumer.Consumer`): the
    stream tells it about new, removed and purged messages and asks it about acks."""

    name: str
    closed: bool
    filters: list[str]

    @property
    def cfg(self) -> "ConsumerConfig": ...

    @property
    def config(self) -> "ConsumerConfig": ...

    @property
    def acks(self) -> AckView: ...

    def state(self) -> "ConsumerState": ...

    def filter_matches(self, subject: str) -> bool: ...

    def is_acked(self, sseq: int) -> bool: ...

    def list_info(self) -> dict[str, Any]: ...

    def jsz_info(self) -> dict[str, Any]: ...

    def on_new_messages(self, last_seq: int) -> None: ...

    def wants_new(self) -> bool: ...

    def on_purge(self, first_seq: int) -> None: ...

    def on_msg_removed(self, seq: int, subject: str | None = None, purged: bool = False) -> None: ...

    def stop(self) -> None: ...

    def delete(self, advisory: bool = True) -> None: ...


class LazyConsumersView(Protocol):
    """A woken stream's consumers not recovered yet (:class:`natsd.jetstream.dormant.LazyConsumers`)."""

    names: set[str]

    def __len__(self) -> int: ...

    def recover(self, name: str) -> ConsumerView | None: ...

    def recover_all(self) -> None: ...

    def close(self) -> None: ...


class StreamView(Protocol):
    """A stream (:class:`natsd.jetstream.stream.Stream`) as its consumers, the consumer
    registry and snapshots see it."""

    name: str
    config: "StreamConfig"
    store: "StreamStore"
    clock: "Clock"
    closed: bool
    created_ns: int
    snapshots_running: int
    lseq: int
    #: the last sequence consumers were told about (an idle consumer reads it lazily)
    notified_seq: int

    @property
    def account(self) -> AccountView: ...

    def wake_on_new(self, consumer: ConsumerView) -> None: ...

    #: name -> consumer; the consumer registry (natsd.jetstream.consumer_registry) adds and
    #: removes entries, so every value is a :class:`natsd.jetstream.consumer.Consumer`
    consumers: dict[str, ConsumerView]

    def consumer(self, name: str) -> ConsumerView | None:
        """Consumer ``name``, recovered now if the woken stream had not yet (None: no such consumer)."""
        ...

    def all_consumers(self) -> dict[str, ConsumerView]:
        """``consumers`` with every consumer recovered."""
        ...

    def num_consumers(self) -> int:
        """How many consumers, recovered or not."""
        ...

    def add_consumer(self, consumer: ConsumerView) -> None: ...

    def remove_consumer(self, name: str) -> None: ...

    def ack_processed(self, consumer: ConsumerView, sseq: int) -> None: ...

    def check_workqueue_filters(self, new_filters: list[str], exclude_name: str | None = None) -> None: ...

    def begin_snapshot(self) -> None: ...

    def end_snapshot(self) -> None: ...

    def info(
        self, subjects_filter: str = "", deleted_details: bool = False, offset: int = 0, dynamic_metadata: bool = True
    ) -> tuple[dict[str, Any], int, int, int]: ...

    def state_json(
        self, subjects_filter: str = "", deleted_details: bool = False, offset: int = 0
    ) -> tuple[dict[str, Any], int, int, int]: ...
