"""Typed server options: the nats-server config tree and command-line flags land here.

Defaults are nats-server's. Durations are nanoseconds (``*_ns``) or seconds where the reference
exposes seconds; sizes are bytes. Parsing lives in :mod:`natsd.config.parser` (text -> tree),
:func:`options_from_tree` / :func:`options_from_file` below (tree -> options, with nats-server's
key names and aliases) and :mod:`natsd.config.flags` (command line -> options).
"""

from __future__ import annotations

from dataclasses import field

from natsd.lazydataclass import dataclass
from typing import TYPE_CHECKING, Any as _Any, Callable as _Callable

from natsd.config.lexer import ConfigError
from natsd.config.parser import ConfigList, ConfigMap, Pos, parse_file
from natsd.config.ports import check_tree_ports
from natsd.config.mappings import MappingList, parse_mappings
from natsd.config.jwt_tokens import is_public_nkey
from natsd.config.tls import TLSOptions, WebsocketOptions, parse_tls_block, parse_websocket_block
from natsd.config.trust import TRUST_KEYS, TrustOptions, parse_trust_key
from natsd.config.xkey import is_public_xkey
from natsd.gotime import format_duration, parse_duration
from natsd.subjects.tokens import is_valid_publish_subject, is_valid_subject

if TYPE_CHECKING:  # (the mqtt block's module loads with an mqtt {} block: issue 31, start-up time)
    from natsd.config.mqtt import MQTTOptions

__all__ = [
    "ServerOptions",
    "JetStreamOptions",
    "UserOptions",
    "Permissions",
    "SubjectPermission",
    "AccountOptions",
    "AccountJetStreamLimits",
    "ConfigError",
    "ConfigErrors",
    "options_from_tree",
    "options_from_file",
    "parse_duration",
    "config_digest",
]

SECOND_NS = 1_000_000_000


@dataclass(slots=True)
class SubjectPermission:
    """``allow`` / ``deny`` subject lists of one direction (publish or subscribe)."""

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
class AuthCalloutOptions:
    """``authorization { auth_callout {...} }`` (see natsd.server.auth.callout): users not in
    ``auth_users`` are authorized by a service answering ``$SYS.REQ.USER.AUTH`` in ``account``."""

    issuer: str
    account: str = "$G"
    auth_users: list[str] = field(default_factory=list)
    xkey: str = ""
    allowed_accounts: list[str] = field(default_factory=list)


@dataclass(slots=True)
class UserOptions:
    """A user: ``password`` may be plain or a bcrypt hash (``$2a$``/``$2b$``); an nkey user has
    ``nkey`` (a ``U...`` public key) instead of ``user``/``password``."""

    user: str = ""
    password: str = ""
    permissions: Permissions | None = None
    account: str = "$G"
    nkey: str = ""


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
    tier: str = ""  # "R1"...: these are one tier of an account JWT's tiered limits


@dataclass(slots=True)
class AccountOptions:
    """One account of the ``accounts {}`` block."""

    name: str
    users: list[UserOptions] = field(default_factory=list)
    jetstream: AccountJetStreamLimits | None = None  # None: JetStream disabled for this account
    # mappings {}: (source, destinations) in config order (natsd.subjects.mapping).
    mappings: MappingList = field(default_factory=list)
    # msg_trace { dest, sampling } (alias trace_dest): traces of sampled W3C traceparent publishes.
    trace_dest: str = ""
    trace_sampling: int = 0


@dataclass(slots=True)
class JetStreamOptions:
    """The ``jetstream {}`` block (``-js``, ``-sd``)."""

    enabled: bool = False
    store_dir: str = ""  # "" = <system temp>/nats/jetstream, as the reference
    max_memory_store: int = -1  # -1 = computed default (75% of memory)
    max_file_store: int = -1  # -1 = computed default (as the reference, from free disk)
    domain: str = ""
    sync_interval_ns: int = 120 * SECOND_NS
    sync_always: bool = False
    unique_tag: str = ""
    # limits { batch { max_msgs, max_inflight_per_stream, max_inflight_total, timeout } }; 0 = the
    # reference's default (natsd.jetstream.config.batch_limits.BatchLimits)
    batch_max_msgs: int = 0
    batch_max_inflight_per_stream: int = 0
    batch_max_inflight_total: int = 0
    batch_timeout_ns: int = 0
    # limits { default_max_consumers }: consumers per stream whose max_consumers is unset
    # (nats-server 2.15: 1000; -1 = unlimited).
    default_max_consumers: int = 1000
    # Encryption at rest (natsd.store.file.encryption): ``cipher`` is the StoreCipher value
    # (``chachapoly`` or ``aes``), ``key``/``prev_key`` "" = none. Kept out of every repr.
    cipher: str = "chachapoly"
    key: str = field(default="", repr=False)
    prev_key: str = field(default="", repr=False)


@dataclass(slots=True)
class ServerOptions:
    """Every server option, nats-server's defaults (a docstring also spares dataclass the
    signature it would render as one: start-up time, issue 26)."""

    host: str = "0.0.0.0"
    port: int = 4222
    server_name: str = ""
    # Top-level mappings {}: the global account's ($G) subject mappings.
    mappings: MappingList = field(default_factory=list)
    # server_tags (a list, or a comma-separated string) and server_metadata (a string map), shown
    # in /varz, statsz and INFO as nats-server shows them.
    server_tags: list[str] = field(default_factory=list)
    server_metadata: dict[str, str] = field(default_factory=dict)
    http_host: str = "0.0.0.0"
    http_port: int = 0  # 0 = monitoring off
    # Secure transports (natsd.config.tls): client-port TLS, HTTPS monitoring, WebSocket listener.
    tls: TLSOptions | None = None
    https_port: int = 0  # 0 = no HTTPS monitoring; needs `tls`
    websocket: WebsocketOptions = field(default_factory=WebsocketOptions)
    http_dashboard: bool = True  # natsd only: the live dashboard page on the monitoring port (`http_dashboard: false`)
    # natsd only: the busy-polling window after each request (natsd.server.transport.busypoll); -1 = the
    # default (200 µs with two CPUs or more, else off). `busy_poll: false` or "0s" turns it off.
    busy_poll_ns: int = -1
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
    # feature_flags { name: bool } as configured (natsd.config.feature_flags).
    feature_flags: dict[str, bool] = field(default_factory=dict)
    # Users that authenticate with an nkey signature (``users: [{nkey: U...}]``), as nats-server's
    # Options.Nkeys; and decentralized auth (operator, trusted keys, resolver), see config/trust.py.
    nkeys: list[UserOptions] = field(default_factory=list)
    trust: TrustOptions = field(default_factory=TrustOptions)
    auth_callout: AuthCalloutOptions | None = None
    jetstream: JetStreamOptions = field(default_factory=JetStreamOptions)
    debug: bool = False
    trace: bool = False
    logtime: bool = True
    log_file: str = ""
    # Log destinations and their rotation, as nats-server (see natsd.server.logfile).
    logtime_utc: bool = False
    log_size_limit: int = 0
    log_max_num: int = 0
    syslog: bool = False
    remote_syslog: str = ""
    max_traced_msg_len: int = 0  # -V: a traced payload longer than this is cut, with "..."
    pid_file: str = ""
    ports_file_dir: str = ""
    config_file: str = ""
    pedantic_config: bool = False
    # Where each option came from (key -> "file:line:col"), for error messages and -t.
    origins: dict[str, str] = field(default_factory=dict)
    # disable_sublist_cache / no_sublist_cache: match every publish against the trie.
    no_sublist_cache: bool = False
    # The command-line arguments the options were built from (without the program name);
    # reload_options() re-reads config_file and re-applies these so flags keep overriding.
    cli_flags: list[str] = field(default_factory=list)
    # Non-fatal findings while loading ("file:line:col: ..."); main prints them to stderr and
    # `-t` fails on them, as nats-server does with its config warnings.
    config_warnings: list[str] = field(default_factory=list)
    # Valid nats-server settings natsd ignores (cluster, leafnodes, server_tags, ...): printed,
    # but they do not fail `-t`, since the reference accepts the file.
    config_notices: list[str] = field(default_factory=list)
    # sha256 digest of the parsed config (as `nats-server -t` prints it); "" without a file.
    config_digest: str = ""
    # leafnodes {}: natsd.config.leafnodes.LeafNodeOptions, None when the block is absent.
    leafnodes: _Any = None
    # mqtt {}: None when the block is absent.
    mqtt: MQTTOptions | None = None


# ---------------------------------------------------------------------------------------------
# Config tree -> ServerOptions
# ---------------------------------------------------------------------------------------------


# nats-server's DEFAULT_ALLOW_RESPONSE_MAX_MSGS / _EXPIRATION.
_RESP_MAX_DEFAULT = 1
_RESP_EXPIRES_DEFAULT_NS = 0
_LAME_DUCK_MIN_NS = 30 * SECOND_NS
_GLOBAL_ACCOUNT = "$G"


class ConfigErrors(ConfigError):
    """Several configuration errors at once (nats-server reports all of them together).

    ``errors`` lists them; position attributes are those of the first; ``str()`` has one
    ``file:line:col: message`` per line.
    """

    def __init__(self, errors: list[ConfigError]) -> None:
        self.errors = errors
        first = errors[0]
        super().__init__(first.message, first.file, first.line, first.column)

    def __str__(self) -> str:
        return "\n".join(ConfigError.__str__(e) for e in self.errors)


# -- processing context ---------------------------------------------------------------------


def _type_name(v: _Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "string"
    if isinstance(v, dict):
        return "map"
    if isinstance(v, list):
        return "array"
    return type(v).__name__  # (the parser's datetime values: "datetime")


class _Ctx:
    """Collects errors and warnings while walking the tree (all are reported together)."""

    def __init__(self, pedantic: bool) -> None:
        self.pedantic = pedantic
        self.errors: list[ConfigError] = []
        self.warnings: list[str] = []
        self.notices: list[str] = []
        self._notice_at: list[tuple[str, int, int]] = []  # where each notice's key is, for -t's order

    def error(self, pos: Pos | None, message: str) -> None:
        if pos is None:
            self.errors.append(ConfigError(message))
        else:
            self.errors.append(ConfigError(message, pos.file, pos.line, pos.column))

    def warn(self, pos: Pos | None, message: str) -> None:
        self.warnings.append(f"{pos}: {message}" if pos is not None else message)

    def unknown(self, m: ConfigMap, key: str) -> None:
        """An unknown field: a warning, or an error in pedantic mode. Keys that were used as
        ``$variables`` are definitions, not typos (as nats-server treats them)."""
        if key in m.used_vars:
            return
        if self.pedantic:
            self.error(m.pos(key), f'unknown field "{key}"')
        else:
            self.warn(m.pos(key), f'unknown field "{key}"')

    def unsupported(self, m: ConfigMap, key: str) -> None:
        pos = m.pos(key)
        msg = f'field "{key}" is not supported by natsd and is ignored'
        self.notices.append(f"{pos}: {msg}" if pos is not None else msg)
        self._notice_at.append((pos.file, pos.line, pos.column) if pos is not None else ("", 0, 0))

    def sorted_notices(self) -> list[str]:
        """The notices in file order (accounts are read first, so collection order is not)."""
        order = sorted(range(len(self.notices)), key=self._notice_at.__getitem__)
        return [self.notices[i] for i in order]

    # Typed getters: report a located error and return None on a wrong type.

    def int_(self, m: ConfigMap, key: str) -> int | None:
        v = m[key]
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        self.error(m.pos(key), f"{key}: expected an integer, got {_type_name(v)} {v!r}")
        return None

    def str_(self, m: ConfigMap, key: str) -> str | None:
        v = m[key]
        if isinstance(v, str):
            return v
        self.error(m.pos(key), f"{key}: expected a string, got {_type_name(v)} {v!r}")
        return None

    def bool_(self, m: ConfigMap, key: str) -> bool | None:
        v = m[key]
        if isinstance(v, bool):
            return v
        self.error(m.pos(key), f"{key}: expected a boolean, got {_type_name(v)} {v!r}")
        return None

    def map_(self, m: ConfigMap, key: str) -> ConfigMap | None:
        v = m[key]
        if isinstance(v, ConfigMap):
            return v
        self.error(m.pos(key), f"{key}: expected a map, got {_type_name(v)} {v!r}")
        return None

    def duration(self, m: ConfigMap, key: str, *, seconds_ok: bool = True) -> int | None:
        """A duration string, or (deprecated, with a warning) an integer number of seconds."""
        v = m[key]
        if isinstance(v, str):
            try:
                return parse_duration(v)
            except ValueError as e:
                self.error(m.pos(key), f"error parsing {key}: {e}")
                return None
        if seconds_ok and isinstance(v, int) and not isinstance(v, bool):
            self.warn(m.pos(key), f'invalid use of field "{key}": {key} should be converted to a duration')
            return v * SECOND_NS
        self.error(m.pos(key), f"{key}: expected a duration string, got {_type_name(v)} {v!r}")
        return None

    def int32(self, m: ConfigMap, key: str) -> int | None:
        v = self.int_(m, key)
        if v is not None and v > (1 << 31) - 1:
            self.error(m.pos(key), f"{key} value is too big")
            return None
        return v


# Keys nats-server accepts that natsd does not implement: a warning, never an error, so a
# reference config still boots (clustering, leaf nodes, gateways, websockets, MQTT, ...).
_UNSUPPORTED_TOP = frozenset(
    """
client_advertise trace_headers default_sentinel
http_base_path cluster gateway prof_port prof_block_rate proxy_protocol
max_sub_tokens max_subscription_tokens ocsp allow_non_tls write_timeout operator operators roots
root root_operators root_operator resolver account_resolver accounts_resolver resolver_tls
resolver_preload resolver_pinned_accounts no_system_account no_system no_sys_acc
no_header_support trusted trusted_keys connect_error_reports reconnect_error_reports
default_js_domain ocsp_cache
no_fast_producer_stall max_closed_clients proxies
""".split()
)

_UNSUPPORTED_JS = frozenset(
    """
strict extension_hint tpm
max_outstanding_catchup max_buffered_size max_buffered_msgs request_queue_limit info_queue_limit
meta_compact meta_compact_size meta_compact_sync max_concurrent_io
""".split()
)


# -- permissions ------------------------------------------------------------------------------


def _perm_subjects(ctx: _Ctx, v: _Any, pos: Pos | None, allow_queue: bool) -> list[str] | None:
    if isinstance(v, str):
        subjects = [v]
    elif isinstance(v, list):
        subjects = []
        for i, s in enumerate(v):
            if not isinstance(s, str):
                ipos = v.pos(i) if isinstance(v, ConfigList) else pos
                ctx.error(ipos, "Subject in permissions array cannot be cast to string")
                return None
            subjects.append(s)
    else:
        ctx.error(pos, f"Expected subject permissions to be a subject, or array of subjects, got {_type_name(v)}")
        return None
    for s in subjects:
        if is_valid_subject(s):
            continue
        # Subscribe permissions may name a queue group: "subject queue".
        parts = s.split()
        if not allow_queue or len(parts) != 2:
            ctx.error(pos, f'subject "{s}" is not a valid subject')
            return None
        if not is_valid_subject(parts[0]):
            ctx.error(pos, f'subject "{parts[0]}" is not a valid subject')
            return None
        if not is_valid_subject(parts[1]):
            ctx.error(pos, f'queue "{parts[1]}" is not a valid queue')
            return None
    return subjects


def _subject_permission(ctx: _Ctx, v: _Any, pos: Pos | None, allow_queue: bool) -> SubjectPermission | None:
    if isinstance(v, ConfigMap):
        # New style: {allow: ..., deny: ...}
        if not v:
            return None
        sp = SubjectPermission()
        for k in v:
            kl = k.lower()
            if kl in ("allow", "deny"):
                subjects = _perm_subjects(ctx, v[k], v.pos(k), allow_queue)
                if subjects is not None:
                    setattr(sp, kl, subjects)
            elif k not in v.used_vars:
                ctx.error(
                    v.pos(k),
                    f"Unknown field name \"{k}\" parsing subject permissions, only 'allow' or 'deny' are permitted",
                )
        return sp
    # Old style: a subject or a list of subjects, all allowed.
    subjects = _perm_subjects(ctx, v, pos, allow_queue)
    return None if subjects is None else SubjectPermission(allow=subjects)


def _permissions(ctx: _Ctx, v: _Any, pos: Pos | None) -> Permissions | None:
    if not isinstance(v, ConfigMap):
        ctx.error(pos, f"Expected permissions to be a map/struct, got {_type_name(v)}")
        return None
    p = Permissions()
    for k in v:
        kl = k.lower()
        kpos = v.pos(k)
        if kl in ("pub", "publish", "import"):
            p.publish = _subject_permission(ctx, v[k], kpos, allow_queue=False)
        elif kl in ("sub", "subscribe", "export"):
            p.subscribe = _subject_permission(ctx, v[k], kpos, allow_queue=True)
        elif kl in ("publish_allow_responses", "allow_responses"):
            rv = v[k]
            if isinstance(rv, bool):
                p.allow_responses = rv
            elif isinstance(rv, ConfigMap):
                p.allow_responses = True
                p.responses_max = _RESP_MAX_DEFAULT
                p.responses_expires_ns = _RESP_EXPIRES_DEFAULT_NS
                for rk in rv:
                    rkl = rk.lower()
                    if rkl in ("max", "max_msgs", "max_messages", "max_responses"):
                        n = ctx.int_(rv, rk)
                        if n:  # 0 keeps the default; negative means unlimited
                            p.responses_max = n
                    elif rkl in ("expires", "expiration", "ttl"):
                        if not isinstance(rv[rk], str):
                            ctx.error(rv.pos(rk), "error parsing expires, not a duration string")
                            continue
                        try:
                            ttl = parse_duration(rv[rk])
                        except ValueError as e:
                            ctx.error(rv.pos(rk), f"error parsing expires: {e}")
                            continue
                        if ttl:
                            p.responses_expires_ns = ttl
                    elif rk not in rv.used_vars:
                        ctx.error(rv.pos(rk), f'Unknown field "{rk}" parsing permissions')
            else:
                ctx.error(kpos, "error parsing response permissions, expected a boolean or a map")
            if p.allow_responses and p.publish is None:
                # As the reference: allowing responses turns off the blanket publish allow;
                # an empty allow list here means "only replies" to the permission checker.
                p.publish = SubjectPermission()
        elif k not in v.used_vars:
            ctx.error(kpos, f'Unknown field "{k}" parsing permissions')
    return p


# -- users, authorization, accounts -------------------------------------------------------------


def _users(ctx: _Ctx, v: _Any, pos: Pos | None, account: str) -> list[UserOptions]:
    if not isinstance(v, list):
        ctx.error(pos, f"Expected users field to be an array, got {_type_name(v)}")
        return []
    users: list[UserOptions] = []
    for i, entry in enumerate(v):
        epos = v.pos(i) if isinstance(v, ConfigList) else pos
        if not isinstance(entry, ConfigMap):
            ctx.error(epos, f"Expected user entry to be a map/struct, got {_type_name(entry)}")
            continue
        u = UserOptions(account=account)
        for k in entry:
            kl = k.lower()
            if kl in ("user", "username"):
                u.user = ctx.str_(entry, k) or ""
            elif kl in ("pass", "password"):
                pw = entry[k]
                # An unquoted all-digit password lexes as an integer; keep its text.
                u.password = str(pw) if isinstance(pw, int) and not isinstance(pw, bool) else (ctx.str_(entry, k) or "")
            elif kl in ("permission", "permissions", "authorization"):
                u.permissions = _permissions(ctx, entry[k], entry.pos(k))
            elif kl == "nkey":
                u.nkey = ctx.str_(entry, k) or ""
                if not is_public_nkey(u.nkey, "U"):
                    ctx.error(entry.pos(k), "Not a valid public nkey for a user")
                    u.nkey = "-"  # reported; keep it out of the users list
            elif kl in ("allowed_connection_types", "connection_types", "clients", "proxy_required"):
                ctx.unsupported(entry, k)
            else:
                ctx.unknown(entry, k)
        if u.nkey:
            if u.user or u.password:
                ctx.error(epos, "Nkey users do not take usernames or passwords")
            elif u.nkey != "-":
                users.append(u)
            continue
        if not u.user:
            ctx.error(epos, "User entry requires a user")
            continue
        users.append(u)
    return users


def _take_nkeys(ctx: _Ctx, o: ServerOptions, users: list[UserOptions], pos: Pos | None) -> list[UserOptions]:
    """Move the nkey users of ``users`` to ``o.nkeys`` (duplicates are errors); return the rest."""
    rest = []
    for u in users:
        if not u.nkey:
            rest.append(u)
        elif any(n.nkey == u.nkey for n in o.nkeys):
            ctx.error(pos, f'Duplicate nkey "{u.nkey}" detected')
        else:
            o.nkeys.append(u)
    return rest


def _strings(ctx: _Ctx, m: ConfigMap, k: str, what: str) -> list[str] | None:
    v = m[k]
    if not isinstance(v, ConfigList) or not all(isinstance(x, str) for x in v):
        ctx.error(m.pos(k), f"Expected {what} field to be an array, got {_type_name(v)}")
        return None
    return [str(x) for x in v]


def _auth_callout(ctx: _Ctx, m: ConfigMap, key: str) -> AuthCalloutOptions | None:
    """nats-server's parseAuthCallout: its fields, texts and checks."""
    v = m[key]
    if not isinstance(v, ConfigMap):
        ctx.error(m.pos(key), f"Expected authorization callout to be a map/struct, got {v!r}")
        return None
    ac = AuthCalloutOptions(issuer="")
    for k in v:
        kl, pos = k.lower(), v.pos(k)
        if kl == "issuer":
            ac.issuer = ctx.str_(v, k) or ""
            if not is_public_nkey(ac.issuer, "A"):
                ctx.error(pos, f'Expected callout user to be a valid public account nkey, got "{ac.issuer}"')
                return None
        elif kl in ("account", "acc"):
            ac.account = ctx.str_(v, k) or ""
        elif kl in ("auth_users", "users"):
            ac.auth_users = _strings(ctx, v, k, "auth_users") or []
        elif kl in ("xkey", "key"):
            ac.xkey = ctx.str_(v, k) or ""
            if not is_public_xkey(ac.xkey):
                ctx.error(pos, f'Expected callout xkey to be a valid public xkey, got "{ac.xkey}"')
                return None
        elif kl == "allowed_accounts":
            ac.allowed_accounts = _strings(ctx, v, k, "allowed accounts") or []
        elif k not in v.used_vars:
            ctx.error(pos, f'Unknown field "{k}" parsing authorization callout')
    ac.account = ac.account or "$G"
    if not ac.issuer:
        ctx.error(m.pos(key), "Authorization callouts require an issuer to be specified")
        return None
    if not ac.auth_users:
        ctx.error(m.pos(key), "Authorization callouts require authorized users to be specified")
        return None
    return ac


def _authorization(ctx: _Ctx, o: ServerOptions, m: ConfigMap, key: str) -> None:
    a = ctx.map_(m, key)
    if a is None:
        return
    pos = m.pos(key)
    user = password = token = ""
    users: list[UserOptions] | None = None
    default_perms: Permissions | None = None
    for k in a:
        kl = k.lower()
        if kl in ("user", "username"):
            user = ctx.str_(a, k) or ""
        elif kl in ("pass", "password"):
            pw = a[k]
            password = str(pw) if isinstance(pw, int) and not isinstance(pw, bool) else (ctx.str_(a, k) or "")
        elif kl == "token":
            token = ctx.str_(a, k) or ""
        elif kl == "timeout":
            tv = a[k]
            if isinstance(tv, bool):
                ctx.error(a.pos(k), "error parsing authorization config, 'timeout' wrong type")
                continue
            if isinstance(tv, (int, float)):
                ns = int(tv * SECOND_NS)
            elif isinstance(tv, str):
                try:
                    ns = parse_duration(tv)
                except ValueError as e:
                    ctx.error(a.pos(k), f"error parsing authorization config, 'timeout' {e}")
                    continue
            else:
                ctx.error(a.pos(k), "error parsing authorization config, 'timeout' wrong type")
                continue
            if ns > 60 * SECOND_NS:
                ctx.warn(
                    a.pos(k),
                    f'invalid use of field "{k}": timeout of {tv} ({ns / SECOND_NS:f} '
                    "seconds) is high, consider keeping it under 60 seconds. possibly "
                    "caused by unquoted duration; use '1m' instead of 1m, for example",
                )
            o.auth_timeout_ns = ns
        elif kl == "users":
            users = _take_nkeys(ctx, o, _users(ctx, a[k], a.pos(k), _GLOBAL_ACCOUNT), a.pos(k))
        elif kl in ("default_permission", "default_permissions", "permissions"):
            default_perms = _permissions(ctx, a[k], a.pos(k))
        elif kl in ("auth_callout", "auth_hook"):
            o.auth_callout = _auth_callout(ctx, a, k)
        elif kl == "proxy_required":
            ctx.unsupported(a, k)
        else:
            ctx.unknown(a, k)
    if default_perms is not None and users:
        for u in users:
            if u.permissions is None:
                u.permissions = default_perms
    o.username, o.password, o.authorization = user, password, token
    if (user or password) and token:
        ctx.error(pos, "Cannot have a user/pass and token")
        return
    existing = {u.user for u in o.users}
    if users is not None or existing:
        if user:
            ctx.error(pos, "Can not have a single user/pass and a users array")
            return
        if token:
            ctx.error(pos, "Can not have a token and a users array")
            return
        for u in users or []:
            if u.user in existing:
                ctx.error(pos, f'Duplicate user "{u.user}" detected')
                return
            existing.add(u.user)
        o.users.extend(users or [])


def _storage_size(v: _Any) -> int:
    """nats-server getStorageSize: an integer, or a string "<n>K|M|G|T" (binary units)."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if not isinstance(v, str):
        raise ValueError("must be int64 or string")
    if v == "":
        return 0
    shift = {"K": 10, "M": 20, "G": 30, "T": 40}
    try:
        num = int(v[:-1], 10)
    except ValueError:
        raise ValueError(f'strconv.ParseInt: parsing "{v[:-1]}": invalid syntax') from None
    if v[-1] not in shift:
        raise ValueError("sizes defined as strings must end in K, M, G, T")
    return num << shift[v[-1]]


def _account_jetstream(ctx: _Ctx, m: ConfigMap, key: str) -> tuple[bool, AccountJetStreamLimits | None]:
    """(ok, limits) for an account's ``jetstream`` value; limits None = disabled."""
    v = m[key]
    pos = m.pos(key)
    if isinstance(v, bool):
        return True, AccountJetStreamLimits() if v else None
    if isinstance(v, str):
        if v.lower() in ("enabled", "enable"):
            return True, AccountJetStreamLimits()
        if v.lower() in ("disabled", "disable"):
            return True, None
        ctx.error(pos, f"Expected 'enabled' or 'disabled' for string value, got '{v}'")
        return False, None
    if not isinstance(v, ConfigMap):
        ctx.error(pos, f"Expected map, bool or string to define JetStream, got {_type_name(v)}")
        return False, None
    lim = AccountJetStreamLimits()
    int_fields = {
        ("max_memory", "max_mem", "mem", "memory"): "max_memory",
        ("max_store", "max_file", "max_disk", "store", "disk"): "max_storage",
        ("max_streams", "streams"): "max_streams",
        ("max_consumers", "consumers"): "max_consumers",
        ("mem_max_stream_bytes", "memory_max_stream_bytes"): "memory_max_stream_bytes",
        ("disk_max_stream_bytes", "store_max_stream_bytes"): "storage_max_stream_bytes",
        ("max_ack_pending",): "max_ack_pending",
    }
    for k in v:
        kl = k.lower()
        for names, attr in int_fields.items():
            if kl in names:
                n = v[k]
                if isinstance(n, int) and not isinstance(n, bool):
                    setattr(lim, attr, n)
                else:
                    ctx.error(v.pos(k), f'Expected a parseable size for "{k}", got {n!r}')
                break
        else:
            if kl in ("max_bytes_required", "max_stream_bytes", "max_bytes"):
                b = v[k]
                if isinstance(b, bool):
                    lim.max_bytes_required = b
                else:
                    ctx.error(v.pos(k), f'Expected a parseable bool for "{k}", got {b!r}')
            elif kl == "cluster_traffic":
                ctx.unsupported(v, k)
            else:
                ctx.unknown(v, k)
    return True, lim


def _accounts(ctx: _Ctx, o: ServerOptions, m: ConfigMap, key: str) -> None:
    v = m[key]
    pos = m.pos(key)
    if isinstance(v, list):
        seen: set[str] = set()
        for i, name in enumerate(v):
            ipos = v.pos(i) if isinstance(v, ConfigList) else pos
            if not isinstance(name, str):
                ctx.error(ipos, f"account name must be a string, got {_type_name(name)}")
                continue
            if name == _GLOBAL_ACCOUNT:
                ctx.error(ipos, f'"{name}" is a Reserved Account')
                continue
            if name in seen:
                ctx.error(ipos, f"Duplicate Account Entry: {name}")
                continue
            seen.add(name)
            o.accounts.append(AccountOptions(name=name))
        return
    if not isinstance(v, ConfigMap):
        ctx.error(pos, f"Expected map entries for accounts, got {_type_name(v)}")
        return
    existing = {u.user for u in o.users}
    for name in v:
        if name in v.used_vars:
            continue  # a variable defined inside the accounts block, not an account
        av = v[name]
        apos = v.pos(name)
        if not isinstance(av, ConfigMap):
            ctx.error(apos, "Expected map entries for accounts")
            continue
        if name == _GLOBAL_ACCOUNT:
            ctx.error(apos, f'"{name}" is a Reserved Account')
            continue
        acc = AccountOptions(name=name)
        o.accounts.append(acc)
        for k in av:
            kl = k.lower()
            if kl == "users":
                users = _take_nkeys(ctx, o, _users(ctx, av[k], av.pos(k), name), av.pos(k))
                for u in users:
                    if u.user in existing:
                        ctx.error(av.pos(k), f'Duplicate user "{u.user}" detected')
                        continue
                    existing.add(u.user)
                    acc.users.append(u)
                    o.users.append(u)  # as nats-server: every user is in Options.Users too
            elif kl == "jetstream":
                ok, lim = _account_jetstream(ctx, av, k)
                if ok:
                    acc.jetstream = lim
            elif kl in ("mappings", "maps"):
                acc.mappings = parse_mappings(ctx, av, k)
            elif kl in ("msg_trace", "trace_dest"):
                _account_msg_trace(ctx, acc, av, k)
            elif kl in ("nkey", "imports", "exports", "default_permissions", "limits"):
                ctx.unsupported(av, k)
            else:
                ctx.unknown(av, k)


def _account_msg_trace(ctx: _Ctx, acc: AccountOptions, m: ConfigMap, key: str) -> None:
    """An account's ``msg_trace``: a destination subject, or ``{dest, sampling}`` (sampling 1..100
    or "NN%"; 100 when only a destination is given). nats-server's texts, typo included."""
    v = m[key]

    def dest(pos: Pos | None, k: str, d: _Any) -> bool:
        if not isinstance(d, str):
            ctx.error(pos, f'Field "{k}" should be a string, got {_type_name(d)}')
            return False
        if not is_valid_publish_subject(d):
            ctx.error(pos, f'Trace destination "{d}" is not valid')
            return False
        acc.trace_dest = d
        return True

    if isinstance(v, str):
        dest(m.pos(key), key, v)
    elif isinstance(v, ConfigMap):
        for k in v:
            kl, kpos, x = k.lower(), v.pos(k), v[k]
            if kl == "dest":
                if not dest(kpos, k, x):
                    return
            elif kl == "sampling":
                if isinstance(x, str):
                    try:
                        x = int(x.removesuffix("%"))
                    except ValueError:
                        ctx.error(kpos, f'Invalid trace destination sampling value "{v[k]}"')
                        return
                elif not isinstance(x, int) or isinstance(x, bool):
                    ctx.error(
                        kpos,
                        f'Trace destination sampling field "{k}" should be an integer or a '
                        f"percentage, got {_type_name(x)}",
                    )
                    return
                if not 0 < x <= 100:
                    ctx.error(kpos, f"Ttrace destination sampling value {x} is invalid, needs to be [1..100]")
                    return
                acc.trace_sampling = x
            else:
                ctx.error(kpos, f'Unknown field "{k}" parsing account message trace map/struct "{key}"')
                return
    else:
        ctx.error(
            m.pos(key), f'Expected account message trace "{key}" to be a string or a map/struct, got {_type_name(v)}'
        )
        return
    if acc.trace_dest and not acc.trace_sampling:
        acc.trace_sampling = 100
    elif acc.trace_sampling and not acc.trace_dest:
        ctx.warn(m.pos(key), "Trace destination sampling ignored since no destination was set")
        acc.trace_sampling = 0


def _jetstream(ctx: _Ctx, o: ServerOptions, m: ConfigMap, key: str, top_store_dir: bool) -> None:
    v = m[key]
    pos = m.pos(key)
    js = o.jetstream
    if isinstance(v, bool):
        js.enabled = v
        return
    if isinstance(v, str):
        if v.lower() in ("enabled", "enable"):
            js.enabled = True
        elif v.lower() in ("disabled", "disable"):
            js.enabled = False
        else:
            ctx.error(pos, f"Expected 'enabled' or 'disabled' for string value, got '{v}'")
        return
    if not isinstance(v, ConfigMap):
        ctx.error(pos, f"Expected map, bool or string to define JetStream, got {_type_name(v)}")
        return
    enable = True  # a jetstream {} block enables JetStream unless it says otherwise
    for k in v:
        kl = k.lower()
        kpos = v.pos(k)
        if kl in ("store", "store_dir", "storedir"):
            if top_store_dir:
                ctx.error(kpos, "Duplicate 'store_dir' configuration")
                continue
            js.store_dir = ctx.str_(v, k) or ""
        elif kl in ("sync", "sync_interval"):
            sv = v[k]
            if isinstance(sv, str) and sv.lower() == "always":
                js.sync_always = True
                js.sync_interval_ns = 120 * SECOND_NS
            else:
                d = ctx.duration(v, k)
                if d is not None:
                    js.sync_interval_ns = d
        elif kl in ("max_memory_store", "max_mem_store", "max_mem"):
            try:
                js.max_memory_store = _storage_size(v[k])
            except ValueError as e:
                ctx.error(kpos, f"max_mem_store {e}")
        elif kl in ("max_file_store", "max_file"):
            try:
                js.max_file_store = _storage_size(v[k])
            except ValueError as e:
                ctx.error(kpos, f"max_file_store {e}")
        elif kl == "domain":
            js.domain = ctx.str_(v, k) or ""
        elif kl in ("enable", "enabled"):
            b = ctx.bool_(v, k)
            if b is not None:
                enable = b
        elif kl == "unique_tag":
            js.unique_tag = (ctx.str_(v, k) or "").lower()
        elif kl == "limits":
            _jetstream_limits(ctx, js, v, k)
        elif kl in ("key", "ek", "encryption_key"):
            js.key = _secret_str(ctx, v, k)
        elif kl in ("prev_key", "prev_ek", "prev_encryption_key"):
            js.prev_key = _secret_str(ctx, v, k)
        elif kl == "cipher":
            _jetstream_cipher(ctx, js, v, k)
        elif kl in _UNSUPPORTED_JS:
            ctx.unsupported(v, k)
        else:
            ctx.unknown(v, k)
    js.enabled = enable


def _secret_str(ctx: _Ctx, m: ConfigMap, key: str) -> str:
    """A key's string value; a wrong type is reported without the value (a secret)."""
    v = m[key]
    if isinstance(v, str):
        return v
    ctx.error(m.pos(key), f"{key}: expected a string, got {_type_name(v)}")
    return ""


def _jetstream_cipher(ctx: _Ctx, js: JetStreamOptions, m: ConfigMap, key: str) -> None:
    """``cipher: chacha | chachapoly | aes`` (any case), the reference's spellings and error."""
    name = ctx.str_(m, key)
    if name is None:
        return
    if name.lower() in ("chacha", "chachapoly"):
        js.cipher = "chachapoly"
    elif name.lower() == "aes":
        js.cipher = "aes"
    else:
        ctx.error(m.pos(key), f'Unknown cipher type: "{name}"')


_BATCH_LIMITS = {
    "max_msgs": "batch_max_msgs",
    "max_inflight_per_stream": "batch_max_inflight_per_stream",
    "max_inflight_total": "batch_max_inflight_total",
}


def _jetstream_limits(ctx: _Ctx, js: JetStreamOptions, m: ConfigMap, key: str) -> None:
    """``jetstream { limits { ... } }``: the ``batch`` block (atomic and fast batch publish) and
    ``default_max_consumers`` are honoured; the reference's other limits are not implemented (a
    notice each)."""
    lim = ctx.map_(m, key)
    if lim is None:
        return
    for k in lim:
        kl = k.lower()
        if kl == "batch":
            b = ctx.map_(lim, k)
            for bk in b or ():
                bkl = bk.lower()
                assert b is not None
                if bkl in _BATCH_LIMITS:
                    n = ctx.int_(b, bk)
                    if n is not None:
                        setattr(js, _BATCH_LIMITS[bkl], n)
                elif bkl == "timeout":
                    d = ctx.duration(b, bk, seconds_ok=False)
                    if d is not None:
                        js.batch_timeout_ns = d
                else:
                    ctx.unknown(b, bk)
        elif kl == "default_max_consumers":
            n = ctx.int_(lim, k)
            if n is not None:
                js.default_max_consumers = n if n != 0 else 1000
        elif kl in ("max_ack_pending", "max_ha_assets", "max_request_batch", "duplicate_window"):
            ctx.unsupported(lim, k)
        else:
            ctx.unknown(lim, k)


def _feature_flags(ctx: _Ctx, o: ServerOptions, m: ConfigMap, key: str) -> None:
    """``feature_flags { name: bool }``: every value a boolean (nats-server's error text)."""
    flags = m[key]
    if not isinstance(flags, ConfigMap):
        ctx.error(m.pos(key), f"error parsing feature flags: unsupported type {_type_name(flags)}")
        return
    for name in flags:
        v = flags[name]
        if not isinstance(v, bool):
            import json  # (only for this error: see config_digest)

            ctx.error(
                flags.pos(name), f"error parsing feature flag {json.dumps(name)}: expected bool, got {_type_name(v)}"
            )
            continue
        o.feature_flags[name] = v


def _host_port(ctx: _Ctx, m: ConfigMap, key: str) -> tuple[str, int] | None:
    """nats-server parseListen: a port number, or "host:port" ("[::1]:4222", ":4222")."""
    v = m[key]
    if isinstance(v, int) and not isinstance(v, bool):
        return "", v
    if not isinstance(v, str):
        ctx.error(m.pos(key), f"expected port or host:port, got {_type_name(v)}")
        return None
    host, sep, port = v.rpartition(":")
    if (
        not sep
        or (":" in host and not (host.startswith("[") and host.endswith("]")))
        or host.startswith("[") != host.endswith("]")
    ):
        ctx.error(m.pos(key), f'could not parse address string "{v}"')
        return None
    host = host[1:-1] if host.startswith("[") else host
    try:
        return host, int(port, 10)
    except ValueError:
        ctx.error(m.pos(key), f'could not parse port "{port}"')
        return None


def options_from_tree(
    tree: ConfigMap, options: ServerOptions | None = None, *, pedantic: bool | None = None
) -> ServerOptions:
    """Apply a parsed config tree onto ``options`` (a fresh :class:`ServerOptions` by default).

    Keys and aliases are nats-server's, case-insensitive. All errors are collected and raised
    together as :class:`ConfigErrors` (each naming ``file:line:column``). Unknown keys are
    warnings (``options.config_warnings``), or errors when ``pedantic`` (default:
    ``options.pedantic_config``). Keys of nats-server features natsd lacks (cluster, leafnodes,
    websocket, ...) are notices (``options.config_notices``); ``tls`` is an error, since
    ignoring it would silently serve plaintext.
    """
    o = options if options is not None else ServerOptions()
    ctx = _Ctx(o.pedantic_config if pedantic is None else pedantic)
    if not isinstance(tree, ConfigMap):  # plain dicts (tests, embedding) get no positions
        tree = _to_config_map(tree)
    if not tree:
        ctx.warn(None, f"{o.config_file or '<config>'}: config has no values or is empty")
    keys = {k.lower(): k for k in tree}
    top_store_dir = "store_dir" in keys or "storedir" in keys
    # Accounts before authorization so duplicate users are found whichever comes first
    # (nats-server walks a Go map, in random order, and checks both ways).
    order = sorted(tree, key=lambda k: 0 if k.lower() == "accounts" else 1)
    for k in order:
        kl = k.lower()
        pos = tree.pos(k)
        if pos is not None and k not in tree.used_vars:
            o.origins[kl] = str(pos)
        handler = _TOP_LEVEL.get(kl)
        if handler is not None:
            handler(ctx, o, tree, k)
        elif kl in ("store_dir", "storedir"):
            o.jetstream.store_dir = ctx.str_(tree, k) or ""
        elif kl == "jetstream":
            _jetstream(ctx, o, tree, k, top_store_dir)
        elif kl == "feature_flags":
            _feature_flags(ctx, o, tree, k)
        elif kl in _UNSUPPORTED_TOP:
            ctx.unsupported(tree, k)
        else:
            ctx.unknown(tree, k)
    if "http_host" not in o.origins:
        o.http_host = o.host  # monitoring binds the client host unless `http` names one
    _validate(ctx, o, tree)
    # Warnings are returned, not logged: main prints them to stderr as nats-server does, and an
    # embedding server decides itself (logging here would print before logging is set up).
    o.config_warnings.extend(ctx.warnings)
    o.config_notices.extend(ctx.sorted_notices())
    if ctx.errors:
        raise ConfigErrors(ctx.errors)
    return o


def _validate(ctx: _Ctx, o: ServerOptions, tree: ConfigMap) -> None:
    check_tree_ports(ctx, tree)
    if o.no_auth_user:
        if not any(u.user == o.no_auth_user for u in o.users) and not any(u.nkey == o.no_auth_user for u in o.nkeys):
            pos = tree.pos(next((k for k in tree if k.lower() == "no_auth_user"), ""))
            ctx.error(
                pos,
                f'no_auth_user: "{o.no_auth_user}" not present as user or nkey in '
                "authorization block or account configuration",
            )
    _validate_tls(ctx, o, tree)
    if (
        o.system_account
        and o.accounts
        and not o.trust.enabled
        and not any(a.name == o.system_account for a in o.accounts)
    ):
        if o.system_account != "$SYS":
            pos = tree.pos(next((k for k in tree if k.lower() in ("system_account", "system")), ""))
            ctx.error(pos, f'system account "{o.system_account}" not found in accounts')
    if o.leafnodes is not None:
        from natsd.config.leafnodes import validate_leafnodes  # (leafnodes imports this module)

        validate_leafnodes(ctx, o, tree)
    if o.mqtt is not None:
        from natsd.config.mqtt import validate_mqtt  # (only with an mqtt {} block)

        validate_mqtt(ctx, o, tree)


def _validate_tls(ctx: _Ctx, o: ServerOptions, tree: ConfigMap) -> None:
    # nats-server: HTTPS monitoring serves the client port's certificates, so it needs them.
    if o.https_port and o.tls is None:
        pos = tree.pos(next((k for k in tree if k.lower() in ("https", "https_port")), ""))
        ctx.error(pos, "TLS config required for https monitoring")
    tls_auth_timeout(o)


def tls_auth_timeout(o: ServerOptions) -> None:
    """As nats-server: with TLS and no explicit auth timeout, a client gets the TLS timeout plus
    one second to authenticate (the handshake counts against it)."""
    if o.tls is not None and o.auth_timeout_ns == 2 * SECOND_NS:
        o.auth_timeout_ns = max(o.auth_timeout_ns, o.tls.timeout_ns + SECOND_NS)


def _to_config_map(v: _Any) -> _Any:
    if isinstance(v, dict) and not isinstance(v, ConfigMap):
        m = ConfigMap()
        for k, x in v.items():
            m[k] = _to_config_map(x)
        return m
    if isinstance(v, list) and not isinstance(v, ConfigList):
        arr = ConfigList()
        arr.extend(_to_config_map(x) for x in v)
        return arr
    return v


def _setter(attr: str, getter: str, *, transform: _Callable[[_Any], _Any] | None = None):
    def handle(ctx: _Ctx, o: ServerOptions, m: ConfigMap, k: str) -> None:
        v = getattr(ctx, getter)(m, k)
        if v is not None:
            setattr(o, attr, transform(v) if transform else v)

    return handle


def _h_listen(ctx: _Ctx, o: ServerOptions, m: ConfigMap, k: str) -> None:
    hp = _host_port(ctx, m, k)
    if hp is not None:
        o.host = hp[0] or "0.0.0.0"
        o.port = hp[1]


def _h_http(ctx: _Ctx, o: ServerOptions, m: ConfigMap, k: str) -> None:
    hp = _host_port(ctx, m, k)
    if hp is not None:
        if hp[0]:
            o.http_host = hp[0]
            o.origins["http_host"] = str(m.pos(k))  # explicit: the client host does not apply
        o.http_port = hp[1]


def _h_tls(ctx: _Ctx, o: ServerOptions, m: ConfigMap, k: str) -> None:
    o.tls = parse_tls_block(ctx, m, k)


def _h_websocket(ctx: _Ctx, o: ServerOptions, m: ConfigMap, k: str) -> None:
    ws = parse_websocket_block(ctx, m, k, _host_port)
    if ws is not None:
        o.websocket = ws


def _h_https(ctx: _Ctx, o: ServerOptions, m: ConfigMap, k: str) -> None:
    hp = _host_port(ctx, m, k)
    if hp is not None:
        if hp[0]:
            o.http_host = hp[0]
            o.origins["http_host"] = str(m.pos(k))
        o.https_port = hp[1]


def _h_server_name(ctx: _Ctx, o: ServerOptions, m: ConfigMap, k: str) -> None:
    v = ctx.str_(m, k)
    if v is None:
        return
    if " " in v:
        ctx.error(m.pos(k), "server name cannot contain spaces")
        return
    o.server_name = v


def _h_max_conn(ctx: _Ctx, o: ServerOptions, m: ConfigMap, k: str) -> None:
    v = ctx.int_(m, k)
    if v is not None:
        # As the reference: 0 in a config file becomes -1, and a negative limit refuses every
        # client (server.go: MaxConn < 0 || len(clients) >= MaxConn).
        o.max_connections = -1 if v == 0 else v


def _h_trace_verbose(ctx: _Ctx, o: ServerOptions, m: ConfigMap, k: str) -> None:
    v = ctx.bool_(m, k)
    if v is not None:
        o.trace = v


def _duration_setter(attr: str, *, min_ns: int | None = None, strict: bool = False):
    def handle(ctx: _Ctx, o: ServerOptions, m: ConfigMap, k: str) -> None:
        d = ctx.duration(m, k, seconds_ok=not strict)
        if d is None:
            return
        if min_ns is not None and d < min_ns:
            if min_ns == _LAME_DUCK_MIN_NS:
                ctx.error(m.pos(k), f"invalid {k} of {format_duration(d)}, minimum is 30 seconds")
            else:
                ctx.error(m.pos(k), f"invalid {k}, needs to be positive")
            return
        setattr(o, attr, d)

    return handle


def _h_busy_poll(ctx: _Ctx, o: ServerOptions, m: ConfigMap, k: str) -> None:
    # natsd only: a duration ("200us", "0s" = off), or a bool (true = the default window).
    v = m[k]
    if isinstance(v, bool):
        o.busy_poll_ns = -1 if v else 0
        return
    d = ctx.duration(m, k, seconds_ok=False)
    if d is not None:
        if d < 0:
            ctx.error(m.pos(k), f"invalid {k}, needs to be positive")
            return
        o.busy_poll_ns = d


def _h_accounts(ctx: _Ctx, o: ServerOptions, m: ConfigMap, k: str) -> None:
    _accounts(ctx, o, m, k)


def _h_authorization(ctx: _Ctx, o: ServerOptions, m: ConfigMap, k: str) -> None:
    _authorization(ctx, o, m, k)


def _h_mappings(ctx: _Ctx, o: ServerOptions, m: ConfigMap, k: str) -> None:
    o.mappings = parse_mappings(ctx, m, k)


def _h_server_tags(ctx: _Ctx, o: ServerOptions, m: ConfigMap, k: str) -> None:
    # As nats-server (jwt.TagList.Add): a string is one tag (no comma split), a list is many;
    # each is trimmed and lower-cased, empty ones and duplicates dropped.
    v = m[k]
    if isinstance(v, str):
        raw = [v]
    elif isinstance(v, list):
        raw = []
        for t in v:
            if not isinstance(t, str):
                ctx.error(m.pos(k), f"error parsing tags: unsupported type {_type_name(t)} where string is expected")
                return
            raw.append(t)
    else:
        ctx.error(m.pos(k), f"error parsing tags: unsupported type {_type_name(v)}")
        return
    for t in raw:
        t = t.strip().lower()
        if t and t not in o.server_tags:
            o.server_tags.append(t)


def _h_server_metadata(ctx: _Ctx, o: ServerOptions, m: ConfigMap, k: str) -> None:
    v = ctx.map_(m, k)
    if v is None:
        return
    for name in v:
        val = v[name]
        if not isinstance(val, str):
            ctx.error(v.pos(name), f"error parsing metadata: unsupported type {_type_name(val)}")
            continue
        o.server_metadata[name] = val


def _h_trust(ctx: _Ctx, o: ServerOptions, m: ConfigMap, k: str) -> None:
    import os

    parse_trust_key(ctx, o.trust, m, k, os.path.dirname(o.config_file))


_TOP_LEVEL: dict[str, _Callable[[_Ctx, ServerOptions, ConfigMap, str], None]] = {
    "listen": _h_listen,
    "port": _setter("port", "int_"),
    "host": _setter("host", "str_"),
    "net": _setter("host", "str_"),
    "server_name": _h_server_name,
    "debug": _setter("debug", "bool_"),
    "trace": _setter("trace", "bool_"),
    "trace_verbose": _h_trace_verbose,
    "logtime": _setter("logtime", "bool_"),
    "disable_sublist_cache": _setter("no_sublist_cache", "bool_"),
    "no_sublist_cache": _setter("no_sublist_cache", "bool_"),
    "accounts": _h_accounts,
    "authorization": _h_authorization,
    "http": _h_http,
    "http_port": _setter("http_port", "int_"),
    "tls": _h_tls,
    "websocket": _h_websocket,
    "ws": _h_websocket,
    "https": _h_https,
    "https_port": _setter("https_port", "int_"),
    "monitor_port": _setter("http_port", "int_"),
    "http_dashboard": _setter("http_dashboard", "bool_"),
    "busy_poll": _h_busy_poll,
    "logfile": _setter("log_file", "str_"),
    "log_file": _setter("log_file", "str_"),
    "logtime_utc": _setter("logtime_utc", "bool_"),
    "logfile_size_limit": _setter("log_size_limit", "int_"),
    "log_size_limit": _setter("log_size_limit", "int_"),
    "logfile_max_num": _setter("log_max_num", "int_"),
    "log_max_num": _setter("log_max_num", "int_"),
    "syslog": _setter("syslog", "bool_"),
    "remote_syslog": _setter("remote_syslog", "str_"),
    "max_traced_msg_len": _setter("max_traced_msg_len", "int_"),
    "pidfile": _setter("pid_file", "str_"),
    "pid_file": _setter("pid_file", "str_"),
    "ports_file_dir": _setter("ports_file_dir", "str_"),
    "max_control_line": _setter("max_control_line", "int32"),
    "max_payload": _setter("max_payload", "int32"),
    "max_pending": _setter("max_pending", "int_"),
    "max_connections": _h_max_conn,
    "max_conn": _h_max_conn,
    "max_subscriptions": _setter("max_subscriptions", "int_"),
    "max_subs": _setter("max_subscriptions", "int_"),
    "ping_interval": _duration_setter("ping_interval_ns"),
    "ping_max": _setter("ping_max", "int_"),
    "write_deadline": _duration_setter("write_deadline_ns"),
    "lame_duck_duration": _duration_setter("lame_duck_duration_ns", min_ns=_LAME_DUCK_MIN_NS, strict=True),
    "lame_duck_grace_period": _duration_setter("lame_duck_grace_period_ns", min_ns=0, strict=True),
    "no_auth_user": _setter("no_auth_user", "str_"),
    "system_account": _setter("system_account", "str_"),
    "system": _setter("system_account", "str_"),
    **{k: _h_trust for k in TRUST_KEYS},
    "mappings": _h_mappings,
    "maps": _h_mappings,
    "server_tags": _h_server_tags,
    "server_metadata": _h_server_metadata,
    "leafnodes": lambda ctx, o, m, k: _h_leafnodes(ctx, o, m, k),
    "leaf": lambda ctx, o, m, k: _h_leafnodes(ctx, o, m, k),
    "mqtt": lambda ctx, o, m, k: _h_mqtt(ctx, o, m, k),
}


def _h_mqtt(ctx: _Ctx, o: ServerOptions, m: ConfigMap, k: str) -> None:
    from natsd.config.mqtt import parse_mqtt  # (only with an mqtt {} block)

    parse_mqtt(ctx, o, m, k, _host_port)


def _h_leafnodes(ctx: _Ctx, o: ServerOptions, m: ConfigMap, k: str) -> None:
    from natsd.config.leafnodes import parse_leafnodes  # its own module (leaf links)

    parse_leafnodes(ctx, o, m, k)


def config_digest(tree: ConfigMap) -> str:
    """``sha256:<hex>`` over the tree's JSON (sorted keys, compact), like ``nats-server -t``.

    nats-server hashes Go's JSON encoding of its parse map; ours hashes the equivalent Python
    encoding, so the digest identifies a config but is not byte-identical to the reference's.
    """

    # json and hashlib (OpenSSL's digests) load with a config file: a start from flags alone
    # needs neither (start-up time, ADR 0015)
    import hashlib
    import json
    from datetime import datetime

    def default(v: _Any) -> _Any:
        if isinstance(v, datetime):
            return v.strftime("%Y-%m-%dT%H:%M:%SZ")
        raise TypeError(type(v).__name__)

    text = json.dumps(tree, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=default)
    # Go's encoder escapes <, > and & for HTML safety; do the same so equal configs hash alike.
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") + "\n"
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def options_from_file(
    path: str, options: ServerOptions | None = None, *, pedantic: bool | None = None
) -> ServerOptions:
    """Parse the config file at ``path`` into options (see :func:`options_from_tree`).

    Raises :class:`ConfigError` (syntax, with file:line:column) or :class:`ConfigErrors`.
    """
    o = options if options is not None else ServerOptions()
    o.config_file = path
    tree = parse_file(path)
    o.config_digest = config_digest(tree)
    return options_from_tree(tree, o, pedantic=pedantic)
