"""Typed server options: the nats-server config tree and command-line flags land here.

Defaults are nats-server's. Durations are nanoseconds (``*_ns``) or seconds where the reference
exposes seconds; sizes are bytes. Parsing lives in :mod:`natsd.config.parser` (text -> tree) and
``from_tree``/``apply_flags`` below (tree/flags -> options).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "ServerOptions", "JetStreamOptions", "UserOptions", "Permissions", "SubjectPermission",
    "AccountOptions", "AccountJetStreamLimits",
]

SECOND_NS = 1_000_000_000


@dataclass(slots=True)
class SubjectPermission:
    allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Permissions:
    """publish/subscribe allow/deny lists; ``allow_responses`` lets a user reply to requests
    it received (``max`` replies within ``expires_ns``; nats-server: max 1, no expiry)."""

    publish: SubjectPermission | None = None
    subscribe: SubjectPermission | None = None
    allow_responses: bool = False
    responses_max: int = 1
    responses_expires_ns: int = 0


@dataclass(slots=True)
class UserOptions:
    """A user: ``password`` may be plain or a bcrypt hash (``$2a$``/``$2b$``)."""

    user: str = ""
    password: str = ""
    permissions: Permissions | None = None
    account: str = "$G"


@dataclass(slots=True)
class AccountJetStreamLimits:
    """Per-account JetStream limits; -1 = unlimited (``jetstream: enabled`` gives all -1)."""

    max_memory: int = -1
    max_storage: int = -1
    max_streams: int = -1
    max_consumers: int = -1
    max_ack_pending: int = -1
    memory_max_stream_bytes: int = -1
    storage_max_stream_bytes: int = -1
    max_bytes_required: bool = False


@dataclass(slots=True)
class AccountOptions:
    name: str
    users: list[UserOptions] = field(default_factory=list)
    jetstream: AccountJetStreamLimits | None = None  # None: JetStream disabled for this account


@dataclass(slots=True)
class JetStreamOptions:
    enabled: bool = False
    store_dir: str = ""  # "" = <system temp>/nats/jetstream, as the reference
    max_memory_store: int = -1  # -1 = computed default (75% of memory)
    max_file_store: int = -1  # -1 = computed default (as the reference, from free disk)
    domain: str = ""
    sync_interval_ns: int = 120 * SECOND_NS
    sync_always: bool = False
    unique_tag: str = ""


@dataclass(slots=True)
class ServerOptions:
    host: str = "0.0.0.0"
    port: int = 4222
    server_name: str = ""
    http_host: str = "0.0.0.0"
    http_port: int = 0  # 0 = monitoring off
    max_payload: int = 1024 * 1024
    max_connections: int = 64 * 1024
    max_control_line: int = 4096
    max_pending: int = 64 * 1024 * 1024
    max_subscriptions: int = 0  # 0 = unlimited
    ping_interval_ns: int = 120 * SECOND_NS
    ping_max: int = 2
    write_deadline_ns: int = 10 * SECOND_NS
    auth_timeout_ns: int = 2 * SECOND_NS
    lame_duck_duration_ns: int = 120 * SECOND_NS
    lame_duck_grace_period_ns: int = 10 * SECOND_NS
    # authorization {}: single user, token, or users list
    username: str = ""
    password: str = ""
    authorization: str = ""  # token
    users: list[UserOptions] = field(default_factory=list)
    no_auth_user: str = ""
    accounts: list[AccountOptions] = field(default_factory=list)
    system_account: str = ""
    jetstream: JetStreamOptions = field(default_factory=JetStreamOptions)
    debug: bool = False
    trace: bool = False
    logtime: bool = True
    log_file: str = ""
    pid_file: str = ""
    ports_file_dir: str = ""
    config_file: str = ""
    pedantic_config: bool = False
    # Where each option came from (key -> "file:line:col"), for error messages and -t.
    origins: dict[str, str] = field(default_factory=dict)
