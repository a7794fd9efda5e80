"""Stream configuration rules: defaults, validation and update checks, as nats-server applies
them (``checkStreamCfg`` / ``configUpdateCheck``), with the reference's error codes and texts.

:func:`check_stream_config` turns a requested config into the effective one (defaults filled:
-1 for unlimited limits, ``num_replicas`` 1, ``duplicate_window`` 2m or ``max_age``, ``subjects``
``[name]``...) or raises :class:`ApiError`. :func:`check_update` adds the update rules.

Not implemented (validated, then refused with the reference's error type rather than silently
ignored -- see :func:`refuse_unsupported`): mirrors / sources with
``external`` (other account or domain) or a durable ``consumer``. Same-account ``mirror`` and
``sources`` are implemented in :mod:`natsd.jetstream.stream.sourcing`. ``subject_transform`` is
applied for literal tokens, ``{{wildcard(n)}}``/``$n`` and ``>``; other mapping functions are refused (10156).
``placement`` is accepted and echoed (a standalone reference server does the same).
``compression: s2`` compresses a file stream's sealed blocks (natsd.store.file.compress) and may be
changed by an update either way; a memory stream accepts and ignores it, as the reference does.
"""

from __future__ import annotations

import re
from itertools import islice
from typing import Callable, Iterable, Reversible

from natsd.jetstream.errors import ApiError, ApiErrors, ErrorDef
from natsd.jetstream.config.models import (
    DEFAULT_DUPLICATE_WINDOW_NS,
    JS_MAX_DESCRIPTION_LEN,
    JS_MAX_METADATA_LEN,
    JS_MAX_NAME_LEN,
    MS,
    SECOND,
    DiscardPolicy,
    StreamConfig,
    is_valid_asset_name,
    set_static_metadata,
)
from natsd.subjects.overlap import OverlapTrie, first_overlap
from natsd.subjects.tokens import is_valid_subject, subjects_collide, subset
from natsd.protocolbase import Protocol

__all__ = [
    "check_stream_config",
    "check_update",
    "check_subject_overlap",
    "refuse_unsupported",
    "STREAM_MAX_REPLICAS",
    "StreamSubjects",
]

STREAM_MAX_REPLICAS = 5


def _invalid(msg: str) -> ApiError:
    return ApiErrors.STREAM_INVALID_CONFIG(err=msg)


def _pedantic(msg: str) -> ApiError:
    return ApiErrors.PEDANTIC(err=msg)


def check_stream_config(
    config: StreamConfig, pedantic: bool = False, get_stream: Callable[[str], StreamConfig | None] | None = None
) -> StreamConfig:
    """Validate ``config`` and return a copy with the reference's defaults applied."""
    if not is_valid_asset_name(config.name):
        raise _invalid("stream name is required and can not contain '.', '*', '>', '\\', '/'")
    if len(config.name.encode()) > JS_MAX_NAME_LEN:
        raise _invalid(f"stream name is too long, maximum allowed is {JS_MAX_NAME_LEN}")
    if len(config.description.encode()) > JS_MAX_DESCRIPTION_LEN:
        raise _invalid(f"stream description is too long, maximum allowed is {JS_MAX_DESCRIPTION_LEN}")
    md_len = sum(len(k.encode()) + len(v.encode()) for k, v in (config.metadata or {}).items())
    if md_len > JS_MAX_METADATA_LEN:
        raise _invalid(f"stream metadata exceeds maximum size of {JS_MAX_METADATA_LEN} bytes")

    cfg = config.copy()
    if cfg.num_replicas == 0:
        cfg.num_replicas = 1
    if cfg.num_replicas > STREAM_MAX_REPLICAS:
        raise _invalid(f"maximum replicas is {STREAM_MAX_REPLICAS}")
    if cfg.num_replicas < 0:
        raise ApiErrors.REPLICAS_COUNT_CANNOT_BE_NEGATIVE()
    for fname in ("max_msgs", "max_msgs_per_subject", "max_bytes", "max_msg_size", "max_consumers"):
        v = getattr(cfg, fname)
        if v == 0 or v < -1:
            if pedantic and v < -1:
                raise _pedantic(f"{fname} must be set to -1")
            setattr(cfg, fname, -1)
    if cfg.max_age < 0:
        raise _invalid("max age can not be negative")
    if cfg.max_age and cfg.max_age < 100 * MS:
        raise _invalid("max age needs to be >= 100ms")

    if cfg.duplicate_window == 0 and cfg.mirror is None and not cfg.sources:
        max_window = DEFAULT_DUPLICATE_WINDOW_NS
        if cfg.max_age and cfg.max_age < max_window:
            if pedantic:
                raise _pedantic("duplicate window cannot be bigger than max age")
            cfg.duplicate_window = cfg.max_age
        else:
            cfg.duplicate_window = max_window
    if cfg.duplicate_window < 0:
        raise _invalid("duplicates window can not be negative")
    if cfg.max_age and cfg.duplicate_window > cfg.max_age:
        raise _invalid("duplicates window can not be larger then max age")
    if 0 < cfg.duplicate_window < 100 * MS:
        raise _invalid("duplicates window needs to be >= 100ms")

    if cfg.deny_purge and cfg.allow_rollup_hdrs:
        raise _invalid("roll-ups require the purge permission")

    if cfg.allow_msg_counter:
        if cfg.discard == "new":
            raise _invalid("counter stream cannot use discard new")
        if cfg.allow_msg_ttl:
            raise _invalid("counter stream cannot use message TTLs")
        if cfg.allow_msg_schedules:
            raise _invalid("counter stream cannot use message schedules")
        if cfg.retention != "limits":
            raise _invalid("counter stream can only use limits retention")

    if cfg.discard_new_per_subject:
        if cfg.discard != "new":
            raise _invalid("discard new per subject requires discard new policy to be set")
        if cfg.max_msgs_per_subject <= 0:
            raise _invalid("discard new per subject requires max msgs per subject > 0")

    if cfg.subject_delete_marker_ttl > 0:
        if cfg.subject_delete_marker_ttl < SECOND:
            raise _invalid("subject delete marker TTL must be at least 1 second")
        if not cfg.allow_msg_ttl:
            if pedantic:
                raise _invalid("subject delete marker cannot be set if message TTLs are disabled")
            cfg.allow_msg_ttl = True
        if not cfg.allow_rollup_hdrs:
            if pedantic:
                raise _invalid("subject delete marker cannot be set if roll-ups are disabled")
            cfg.allow_rollup_hdrs, cfg.deny_purge = True, False
    elif cfg.subject_delete_marker_ttl < 0:
        raise _invalid("subject delete marker TTL must not be negative")

    if cfg.allow_msg_schedules:
        if cfg.discard == "new":
            raise _invalid("message scheduling cannot use discard new")
        if not cfg.allow_rollup_hdrs:
            if pedantic:
                raise _invalid("message scheduling cannot be set if roll-ups are disabled")
            cfg.allow_rollup_hdrs, cfg.deny_purge = True, False

    if cfg.persist_mode == "async":
        if cfg.storage != "file":
            raise _invalid("async persist mode is only supported on file storage")
        if cfg.num_replicas > 1:
            raise _invalid("async persist mode is not supported on replicated streams")
        if cfg.allow_atomic:
            raise _invalid("async persist mode is not supported with atomic batch publish")

    _check_mirror_and_sources(cfg, pedantic, get_stream)

    if not cfg.subjects:
        if cfg.mirror is None and not cfg.sources:
            cfg.subjects = [cfg.name]
    else:
        if cfg.mirror is not None:
            raise ApiErrors.MIRROR_WITH_SUBJECTS()
        seen: set[str] = set()
        # Overlap inside the list, found with a trie (near linear) but reported where the
        # reference's nested loop reports it: at the first subject overlapping a later one.
        overlap = first_overlap(cfg.subjects)
        for i, subj in enumerate(cfg.subjects):
            if not is_valid_subject(subj):
                raise _invalid("invalid subject")
            if subj in seen:
                raise _invalid("duplicate subjects detected")
            if subj == ">":
                if not cfg.no_ack:
                    raise _invalid("capturing all subjects requires no-ack to be true")
                if cfg.num_replicas != 1:
                    raise _invalid("capturing all subjects requires replicas of 1")
            if not cfg.no_ack:
                for ns in ("$JS.>", "$JSC.>", "$NRG.>"):
                    if subjects_collide(subj, ns) and not subset(subj, "$JS.EVENT.>"):
                        raise _invalid("subjects that overlap with jetstream api require no-ack to be true")
                if subjects_collide(subj, "$SYS.>") and not subset(subj, "$SYS.ACCOUNT.>"):
                    raise _invalid("subjects that overlap with system api require no-ack to be true")
            if overlap is not None and overlap[0] == i:
                raise _invalid(f'subject "{subj}" overlaps with "{cfg.subjects[overlap[1]]}"')
            seen.add(subj)

    if not cfg.subjects and not cfg.sources and cfg.mirror is None:
        raise _invalid("stream needs at least one configured subject or be a source/mirror")

    if cfg.subject_transform is not None:
        src = cfg.subject_transform.get("src", "") or ""
        if src and not is_valid_subject(src):
            raise ApiErrors.STREAM_TRANSFORM_INVALID_SOURCE(err=f"invalid subject {src}")
        dest = cfg.subject_transform.get("dest", "") or ""
        problem = mapping_problem(src or ">", dest)
        if problem:
            raise ApiErrors.STREAM_TRANSFORM_INVALID_DESTINATION(err=problem)

    if cfg.republish is not None:
        rp = dict(cfg.republish)
        if not rp.get("src"):
            if pedantic:
                raise _pedantic("republish source can not be empty")
            rp["src"] = ">"
        dest = rp.get("dest", "") or ""
        for subj in cfg.subjects:
            if dest and subjects_collide(dest, subj):
                raise _invalid("stream configuration for republish destination forms a cycle")
        if not dest or not is_valid_subject(rp["src"]) or mapping_problem(rp["src"], dest):
            raise _invalid(
                f"stream configuration for republish with transform from '{rp['src']}' to '{dest}' not valid"
            )
        cfg.republish = rp

    if cfg.placement is not None:
        p = {k: v for k, v in cfg.placement.items() if v}
        if not p:
            cfg.placement = None
        elif p.get("preferred"):
            raise _invalid("preferred server not permitted in placement")
    set_static_metadata(cfg)
    return cfg


def _check_mirror_and_sources(
    cfg: StreamConfig, pedantic: bool, get_stream: Callable[[str], StreamConfig | None] | None
) -> None:
    m = cfg.mirror
    if m is not None:
        if cfg.first_seq > 0:
            raise ApiErrors.MIRROR_WITH_FIRST_SEQ()
        if cfg.subjects:
            raise ApiErrors.MIRROR_WITH_SUBJECTS()
        if cfg.sources:
            raise ApiErrors.MIRROR_WITH_SOURCES()
        if cfg.allow_msg_counter:
            raise ApiErrors.MIRROR_WITH_COUNTERS()
        if cfg.allow_atomic:
            raise ApiErrors.MIRROR_WITH_ATOMIC_PUBLISH()
        if cfg.allow_batched:
            raise ApiErrors.MIRROR_WITH_BATCH_PUBLISH()
        if cfg.allow_msg_schedules:
            raise ApiErrors.MIRROR_WITH_MSG_SCHEDULES()
        if m.get("filter_subject") and m.get("subject_transforms"):
            raise ApiErrors.MIRROR_MULTIPLE_FILTERS_NOT_ALLOWED()
        if cfg.subject_delete_marker_ttl > 0:
            raise _invalid("subject delete markers forbidden on mirrors")
        trs = m.get("subject_transforms") or []
        for i, tr in enumerate(trs):
            src = tr.get("src", "")
            if src and not is_valid_subject(src):
                raise ApiErrors.MIRROR_INVALID_SUBJECT_FILTER(err=f"invalid subject {src}")
            for j, other in enumerate(trs):
                if i != j and subjects_collide(src, other.get("src", "")):
                    raise ApiErrors.MIRROR_OVERLAPPING_SUBJECT_FILTERS()
        if not m.get("external"):
            if not is_valid_asset_name(m.get("name", "")):
                raise ApiErrors.MIRROR_INVALID_STREAM_NAME()
            origin = get_stream(m["name"]) if get_stream else None
            if origin is not None:
                if cfg.max_msg_size > 0 and origin.max_msg_size > 0 and cfg.max_msg_size < origin.max_msg_size:
                    raise ApiErrors.MIRROR_MAX_MESSAGE_SIZE_TOO_BIG()
                cfg.mirror_direct = origin.allow_direct
    if cfg.sources:
        if cfg.allow_msg_schedules:
            raise ApiErrors.SOURCE_WITH_MSG_SCHEDULES()
        inames: set[str] = set()
        for src in cfg.sources:
            if src is None or not is_valid_asset_name(src.get("name", "")):
                raise ApiErrors.SOURCE_INVALID_STREAM_NAME()
            iname = src["name"] + " " + (src.get("filter_subject") or "") + " " + str(src.get("external"))
            if iname in inames:
                raise ApiErrors.SOURCE_DUPLICATE_DETECTED()
            inames.add(iname)
            if src.get("filter_subject") and src.get("subject_transforms"):
                raise ApiErrors.SOURCE_MULTIPLE_FILTERS_NOT_ALLOWED()
            trs = src.get("subject_transforms") or []
            for tr in trs:
                s = tr.get("src", "")
                if s and not is_valid_subject(s):
                    raise ApiErrors.SOURCE_INVALID_SUBJECT_FILTER(err=f"invalid subject {s}")
            for i, tr in enumerate(trs):
                for j, other in enumerate(trs):
                    if i != j and subset(tr.get("src", ""), other.get("src", "")):
                        raise ApiErrors.SOURCE_OVERLAPPING_SUBJECT_FILTERS()
            if not src.get("external") and get_stream:
                origin = get_stream(src["name"])
                if (
                    origin is not None
                    and cfg.max_msg_size > 0
                    and origin.max_msg_size > 0
                    and cfg.max_msg_size < origin.max_msg_size
                ):
                    raise ApiErrors.SOURCE_MAX_MESSAGE_SIZE_TOO_BIG()


_WILDCARD_FN = re.compile(r"^\{\{\s*[Ww]ildcard\s*\(\s*(\d+)\s*\)\s*\}\}$")


def mapping_problem(src: str, dest: str) -> str:
    """Why ``src`` -> ``dest`` is not a mapping we can apply ("" when fine). Supported: literal
    tokens, ``{{wildcard(n)}}`` / ``$n`` referring to the n-th ``*`` of ``src``, and a trailing
    ``>`` when ``src`` ends in ``>``. Other mapping functions (partition, split, slice...) are
    refused rather than applied wrongly."""
    if not dest:
        return ""  # an empty destination leaves subjects unchanged (accepted by the reference)
    if not is_valid_subject(dest):
        return "invalid subject"
    # As nats-server's NewSubjectTransform: a trailing ">" on one side needs one on the other,
    # and the destination has no "*" ("rp.x" is no mapping of ">": 10052 for a republish).
    dtoks = dest.split(".")
    if src.endswith(">") != (dtoks[-1] == ">") or "*" in dtoks:
        return "invalid subject"
    nwild = sum(1 for t in src.split(".") if t == "*")
    for t in dest.split("."):
        if t.startswith("{{"):
            m = _WILDCARD_FN.match(t)
            if not m:
                return f"mapping function {t} is not supported by this server"
            n = int(m.group(1))
        elif t.startswith("$") and t[1:].isdigit():
            n = int(t[1:])
        elif t == ">":
            if not src.endswith(">"):
                return "invalid subject"
            continue
        else:
            continue
        if n < 1 or n > nwild:
            return f"invalid mapping destination: wildcard index out of range in {t}: [{n}]"
    return ""


def _check_transforms(src: dict, err: ErrorDef) -> None:
    for tr in src.get("subject_transforms") or []:
        problem = mapping_problem(tr.get("src") or ">", tr.get("dest") or "")
        if problem:
            raise err(err=problem)


def refuse_unsupported(cfg: StreamConfig) -> None:
    """Features natsd does not implement yet: refuse them with the reference's own error for
    the situation (rather than accepting a config we would silently not honour)."""
    if cfg.num_replicas > 1:
        raise ApiErrors.STREAM_REPLICAS_NOT_SUPPORTED()
    if cfg.mirror is not None:
        if cfg.mirror.get("consumer"):
            raise ApiErrors.MIRROR_CONSUMER_SETUP_FAILED(
                err="durable mirror consumers are not supported by this server"
            )
        _check_transforms(cfg.mirror, ApiErrors.MIRROR_INVALID_TRANSFORM_DESTINATION)
    for src in cfg.sources or []:
        if src.get("consumer"):
            raise ApiErrors.SOURCE_CONSUMER_SETUP_FAILED(
                err="durable source consumers are not supported by this server"
            )
        _check_transforms(src, ApiErrors.SOURCE_INVALID_TRANSFORM_DESTINATION)


def check_update(
    old: StreamConfig,
    new: StreamConfig,
    pedantic: bool = False,
    get_stream: Callable[[str], StreamConfig | None] | None = None,
) -> StreamConfig:
    """configUpdateCheck: validate ``new`` and the rules about what may change."""
    cfg = check_stream_config(new, pedantic, get_stream)
    if cfg.name != old.name:
        raise _invalid("stream configuration name must match original")
    if cfg.num_replicas > 1:
        raise ApiErrors.STREAM_REPLICAS_NOT_SUPPORTED()
    if cfg.storage != old.storage:
        raise _invalid("stream configuration update can not change storage type")
    if cfg.retention != old.retention and "workqueue" in (cfg.retention, old.retention):
        raise _invalid("stream configuration update can not change retention policy to/from workqueue")
    if not cfg.sealed and old.sealed:
        raise _invalid("stream configuration update can not unseal a sealed stream")
    if not cfg.deny_delete and old.deny_delete:
        raise _invalid("stream configuration update can not cancel deny message deletes")
    if not cfg.deny_purge and old.deny_purge:
        raise _invalid("stream configuration update can not cancel deny purge")
    if cfg.mirror is not None and cfg.mirror != old.mirror:
        raise ApiErrors.STREAM_MIRROR_NOT_UPDATABLE()
    if old.allow_msg_ttl and not cfg.allow_msg_ttl:
        raise _invalid("message TTL status can not be disabled")
    if cfg.allow_msg_counter != old.allow_msg_counter:
        raise _invalid("stream configuration update can not change message counter setting")
    if old.allow_msg_schedules and not cfg.allow_msg_schedules:
        raise _invalid("message schedules can not be disabled")
    if old.persist_mode != cfg.persist_mode:
        raise _invalid("stream configuration update can not change persist mode")
    if cfg.sealed:
        cfg.max_age = 0
        cfg.discard = DiscardPolicy.NEW
        cfg.deny_delete = cfg.deny_purge = True
        cfg.allow_rollup_hdrs = False
    return cfg


def check_subject_overlap(cfg: StreamConfig, others: dict[str, StreamConfig]) -> None:
    """10065 when a subject of ``cfg`` collides with another stream's subjects. One trie of
    ``cfg``'s subjects, asked about every other stream's subject: linear in their number, not
    their product, and a lookup in a small trie costs less than building a trie of all the
    others (a create among 6,000 streams of one subject each took 200 ms that way, issue 31)."""
    mine = cfg.subjects or ()
    if not mine:
        return
    trie = OverlapTrie()
    for k, s in enumerate(mine):
        trie.insert(s, k)
    collision = trie.first_collision
    for name, ocfg in others.items():
        if name == cfg.name:
            continue
        for o in ocfg.subjects or ():
            if collision(o) >= 0:
                raise ApiErrors.STREAM_SUBJECT_OVERLAP()


class _HasConfig(Protocol):
    """A stream as :meth:`StreamSubjects.check_new_in` reads it."""

    @property
    def config(self) -> StreamConfig: ...


class _Streams(Protocol):
    """An account's streams by name (a dict: its values reversible, in the order added)."""

    def __len__(self) -> int: ...

    def values(self) -> Reversible[_HasConfig]: ...


class StreamSubjects:
    """An account's stream subjects in one :class:`OverlapTrie`, kept between creates, for the
    overlap check of a new stream (10065): a create among n streams then costs a trie walk per
    new subject, not a look at every one of the n streams' subjects (1,000 creates were
    quadratic: about a third of their CPU, issue 31).

    The trie answers for the configs it was built from, kept beside it, and for the account's
    count of stream changes it was current with: a create that finds only additions since then
    inserts those, and anything else (an update replaced a config, a delete removed one)
    rebuilds it. So it can never answer for a set of streams other than the current one."""

    __slots__ = ("configs", "owners", "trie", "version")

    def __init__(self) -> None:
        self.configs: list[StreamConfig] = []
        self.owners: list[str] = []  # trie index -> the stream that has that subject
        self.trie = OverlapTrie()
        # The account's count of stream changes the trie is current with (check_new_in); -1: unknown.
        self.version = -1

    def _reset(self) -> None:
        self.configs = []
        self.owners = []
        self.trie = OverlapTrie()

    def check_new_in(self, cfg: StreamConfig, streams: _Streams, version: int) -> None:
        """:func:`check_subject_overlap` of ``cfg``, a stream not among them, against the
        account's ``streams`` (by name, in the order they were added) without reading each
        one: ``version`` is the account's count of changes to them
        (one per stream added, updated or deleted, see ``JsAccount.streams_version``). When the
        count grew by exactly the number of streams added since the last call, every change
        was an addition, at the end of ``streams``: only those are read. Anything else (an
        update, a delete, a stream replaced) rebuilds from all of them."""
        if not cfg.subjects:
            return
        added = len(streams) - len(self.configs)
        if self.version >= 0 and added >= 0 and version - self.version == added:
            new = [s.config for s in islice(reversed(streams.values()), added)]
            new.reverse()
        else:
            self._reset()
            new = [s.config for s in streams.values()]
        self._add(new)
        self.version = version
        self._ask(cfg, lambda: [s.config for s in streams.values()])

    def _add(self, configs: Iterable[StreamConfig]) -> None:
        for ocfg in configs:
            for o in ocfg.subjects or ():
                self.trie.insert(o, len(self.owners))
                self.owners.append(ocfg.name)
            self.configs.append(ocfg)

    def _ask(self, cfg: StreamConfig, configs: Callable[[], list[StreamConfig]]) -> None:
        collision = self.trie.first_collision
        for sub in cfg.subjects or ():
            k = collision(sub)
            if k >= 0:
                if self.owners[k] == cfg.name:  # (not a create after all: the general check)
                    check_subject_overlap(cfg, {c.name: c for c in configs()})
                    return
                raise ApiErrors.STREAM_SUBJECT_OVERLAP()
