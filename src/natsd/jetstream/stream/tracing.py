"""A traced message's way into a stream (message tracing, ADR-41: natsd.server.msgtrace), as
nats-server's ``processJetStreamMsg`` reports it in the trace event's ``js`` entry: the subject it
is stored under and ``nointerest`` once the message passed the stream's checks (its
``updateJetStreamEvent``), and the error that stopped it (``sendEventFromJetStream``), in the
reference's wording. With ``Nats-Trace-Only`` the checks run (a refusal is answered as usual) but
nothing is stored and nothing acknowledged.

Only traced messages come here, through :func:`process_traced`, never the publish path of
natsd.jetstream.stream.ingest: it runs that path unchanged, with the stream's refusal hooks
(``_reject``, ``_store_failed``) and, for a trace-only message, its store and interest skip
shadowed on the instance for the duration of the call, so the untraced path pays nothing.
"""

from __future__ import annotations

import json
from typing import Any

from natsd.lazydataclass import dataclass
from natsd.jetstream.errors import ApiError, ApiErrors
from natsd.nats_headers import EXPECTED_LAST_MSG_ID, EXPECTED_LAST_SEQ, EXPECTED_LAST_SUBJ_SEQ
from natsd.nats_headers import EXPECTED_LAST_SUBJ_SEQ_SUBJ, MSG_ID
from natsd.protocol.headers import get_header_bytes
from natsd.store.base import MsgNotFound, StoreEOF, StoreError, StreamStore
from natsd.subjects.tokens import subject_matches
from natsd.subjects.transform import transform
from natsd.protocolbase import Protocol

__all__ = ["JsOutcome", "TracedStream", "process_traced"]


class TracedStream(Protocol):
    """What a traced message's ingest uses of ``natsd.jetstream.stream.core.Stream`` (whose method
    :func:`process_traced` becomes; a protocol, so this module adds no import circle)."""

    store: StreamStore
    lseq: int
    lmsg_id: str
    _transform: tuple[str, str] | None
    _interest: bool

    def _reject(self, reply: str, err: ApiError) -> None: ...

    def _store_failed(self, reply: str, e: StoreError) -> None: ...

    def _has_interest(self, subject: str) -> bool: ...

    def _check_msg_id(self, msg_id: str) -> int: ...

    def _process(
        self,
        subject: str,
        reply: str,
        hdr: bytes | None,
        payload: bytes,
        sourced: bool,
        h: dict[bytes, bytes] | None,
    ) -> int: ...


# Refusals nats-server meets after its updateJetStreamEvent (the event then has the subject too):
# the account's limits, an unparsable TTL, the store's own refusal (StoreError, not listed).
_AFTER_UPDATE = {ApiErrors.ACCOUNT_RESOURCES_EXCEEDED.err_code, ApiErrors.MESSAGE_TTL_INVALID.err_code}
# Refusals nats-server returns as a Go error rather than an ApiError (whose text adds its code).
_GO_ERRORS = {
    ApiErrors.STREAM_MESSAGE_EXCEEDS_MAXIMUM.err_code: "maximum payload exceeded",
    ApiErrors.STREAM_HEADER_EXCEEDS_MAXIMUM.err_code: "maximum payload exceeded",
    ApiErrors.STREAM_NOT_MATCH.err_code: "expected stream does not match",
    ApiErrors.MESSAGE_TTL_DISABLED.err_code: "message TTL disabled",
}
_STORE_FAILED = ApiErrors.STREAM_STORE_FAILED.err_code
_WRONG_LAST_SEQ = ApiErrors.STREAM_WRONG_LAST_SEQUENCE.err_code
_WRONG_LAST_MSG_ID = ApiErrors.STREAM_WRONG_LAST_MSG_ID.err_code


@dataclass(slots=True)
class JsOutcome:
    """What the ``js`` event reports: ``subject`` ("" when a check refused the message first),
    ``nointerest``, ``error`` ("" when stored, or passed the checks when trace-only)."""

    subject: str = ""
    nointerest: bool = False
    error: str = ""


class _Reached(Exception):
    """A trace-only message passed the checks: the store would come next."""


class _NoStore:
    """The store as a trace-only message sees it: read as usual, never written."""

    def __init__(self, store: StreamStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    def store_msg(self, *args: Any, **kw: Any) -> Any:
        raise _Reached


def _skip_reached(*args: Any, **kw: Any) -> int:
    raise _Reached


def process_traced(
    self: TracedStream, subject: str, reply: str, hdr: bytes | None, payload: bytes, trace_only: bool
) -> JsOutcome:
    """Ingest a traced message (stored and acknowledged as any other unless ``trace_only``) and
    say what the trace event's ``js`` entry reports about it."""
    out = JsOutcome()
    stored = subject
    if self._transform is not None and subject_matches(self._transform[0], subject):
        stored = transform(self._transform[0], self._transform[1], subject) or subject
    nointerest = self._interest and not self._has_interest(stored)
    refused: list[ApiError] = []
    failed: list[StoreError] = []
    reject, store_failed = self._reject, self._store_failed

    def on_reject(r: str, err: ApiError) -> None:
        refused.append(err)
        reject(r, err)

    def on_store_failed(r: str, e: StoreError) -> None:
        failed.append(e)
        store_failed(r, e)

    inst = self.__dict__
    inst["_reject"], inst["_store_failed"] = on_reject, on_store_failed
    store = self.store
    if trace_only:
        self.store = _NoStore(store)  # type: ignore[assignment]  # (reads pass through)
        inst["skip_uninterested"] = _skip_reached
    reached = False
    try:
        seq = self._process(subject, reply, hdr, payload, False, None)
    except _Reached:
        seq, reached = 0, True
    finally:
        self.store = store
        for name in ("_reject", "_store_failed", "skip_uninterested"):
            inst.pop(name, None)
    if failed:
        # (nats-server's store error: "maximum messages exceeded" and the like)
        out.error = refused[-1].description if refused and refused[-1].err_code == _STORE_FAILED else str(failed[-1])
        reached = True
    elif refused:
        err = refused[-1]
        if err.err_code in _AFTER_UPDATE:
            reached = True
            if trace_only:  # (nats-server stops a trace-only message before these checks)
                return JsOutcome(stored, nointerest)
        out.error = _go_error(self, stored, hdr, err)
    elif seq:
        reached = True
    elif hdr and (msg_id := get_header_bytes(hdr, MSG_ID)) and self._check_msg_id(msg_id.decode()):
        out.error = "msgid is duplicate"
    if reached:
        out.subject, out.nointerest = stored, nointerest
    return out


def _go_error(self: TracedStream, subject: str, hdr: bytes | None, err: ApiError) -> str:
    """The text nats-server's processJetStreamMsg returns for the refusal ``err``."""
    code = err.err_code
    text = _GO_ERRORS.get(code)
    if text is not None:
        return text
    if code == _STORE_FAILED:
        return err.description
    if code == _WRONG_LAST_SEQ and hdr:
        want = get_header_bytes(hdr, EXPECTED_LAST_SUBJ_SEQ)
        if want:
            ssubj = get_header_bytes(hdr, EXPECTED_LAST_SUBJ_SEQ_SUBJ)
            try:
                fseq = self.store.load_last_msg(ssubj.decode() if ssubj else subject).seq
            except (MsgNotFound, StoreEOF):
                fseq = 0
            if want != str(fseq).encode():
                return f"last sequence by subject mismatch: {want.decode()} vs {fseq}"
        want = get_header_bytes(hdr, EXPECTED_LAST_SEQ) or b"0"
        return f"last sequence mismatch: {want.decode()} vs {self.lseq}"
    if code == _WRONG_LAST_MSG_ID and hdr:
        want = get_header_bytes(hdr, EXPECTED_LAST_MSG_ID) or b""
        return f"last msgid mismatch: {json.dumps(want.decode())} vs {json.dumps(self.lmsg_id)}"
    return f"{err.description} ({code})"
