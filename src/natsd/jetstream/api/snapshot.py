"""``$JS.API.STREAM.SNAPSHOT.<stream>`` and ``$JS.API.STREAM.RESTORE.<stream>``.

Requests are checked in the reference's order (``jsStreamSnapshotRequest`` /
``jsStreamRestoreRequest``) so the same bad request gets the same error; the transfers
themselves are :class:`natsd.jetstream.snapshot.SnapshotSender` and
:class:`natsd.jetstream.snapshot.RestoreReceiver`.

Snapshot request ``{"deliver_subject", "no_consumers"?, "chunk_size"?, "window_size"?, "jsck"?}``
-> reply ``{"type": "io.nats.jetstream.api.v1.stream_snapshot_response", "config", "state"}``, then
the chunks on ``deliver_subject``. Restore request ``{"config", "state"}`` -> reply
``{"type": "io.nats.jetstream.api.v1.stream_restore_response", "deliver_subject":
"$JS.SNAPSHOT.RESTORE.<stream>.<id>"}``, then the upload (see the transfer classes).

While a snapshot of a stream is being sent, ``$JS.API.STREAM.UPDATE.<stream>`` is refused with
10069 "stream snapshot in progress" (the backup's config may not change under it).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, TypeGuard

from natsd.jetstream.advisories import _typed
from natsd.jetstream.api.router import ApiRequest
from natsd.jetstream.api.templates import is_empty_request
from natsd.jetstream.errors import ApiErrors
from natsd.jetstream.config.models import StreamConfig, rfc3339
from natsd.jetstream.config.stream_checks import check_stream_config
from natsd.jetstream.config.requests import STREAM_SNAPSHOT_REQUEST
from natsd.jetstream.gojson import go_kind
from natsd.jetstream.snapshot import RestoreReceiver, SnapshotSender
from natsd.jetstream.wire import resp

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.config.models import StreamConfig
    from natsd.jetstream.manager import JsAccount

__all__ = ["snapshot_request", "restore_request"]

log = logging.getLogger("natsd.jetstream.api.snapshot")


def _transfers(acct: "JsAccount") -> set:
    return acct.transfers


def _valid_publish_subject(s: Any) -> TypeGuard[str]:
    if not isinstance(s, str) or not s:
        return False
    for tok in s.split("."):
        if not tok or tok in ("*", ">") or any(c in tok for c in " \t\r\n"):
            return False
    return True


def _uint(body: dict, key: str, gotype: str) -> int:
    v = body.get(key)
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, int):
        raise ApiErrors.INVALID_JSON(
            err=f"json: cannot unmarshal {go_kind(v, literal=True)} into Go struct field "
            f"JSApiStreamSnapshotRequest.{key} of type {gotype}"
        )
    return v


def snapshot_request(req: ApiRequest) -> dict | None:
    acct = req.account
    if req.is_empty:  # white space is not empty: it decodes to no deliver subject
        raise ApiErrors.BAD_REQUEST()
    name = req.tokens[4] if len(req.tokens) > 4 else ""
    stream = acct.lookup_stream(name)
    body = req.json(STREAM_SNAPSHOT_REQUEST)
    deliver = body.get("deliver_subject")
    if not _valid_publish_subject(deliver):
        raise ApiErrors.SNAPSHOT_DELIVER_SUBJECT_INVALID()
    chunk = _uint(body, "chunk_size", "int")
    window = _uint(body, "window_size", "int")
    include_consumers = body.get("no_consumers") is not True
    state, _, _, _ = stream.state_json()
    if not include_consumers:
        state["consumer_count"] = 0
    transfers = _transfers(acct)
    sender: SnapshotSender | None = None

    def done(err: str) -> None:
        transfers.discard(sender)
        if err:
            log.warning("Snapshot for stream '%s > %s' failed: %s", acct.name, name, err)
        else:
            log.info("Completed snapshot for stream '%s > %s'", acct.name, name)
        _advisory(
            acct,
            f"$JS.EVENT.ADVISORY.STREAM.SNAPSHOT_COMPLETE.{name}",
            "snapshot_complete",
            {"stream": name, "start": start, "end": _now(acct), **({"error": err} if err else {})},
        )

    start = _now(acct)
    sender = SnapshotSender(stream, deliver, chunk, window, include_consumers, state, on_done=done)
    transfers.add(sender)
    reply = resp("stream_snapshot_response", {"config": stream.config.to_json(), "state": state})
    # The reply goes out first (the router sends what we return); the chunks start next turn.
    log.info("Starting snapshot for stream '%s > %s'", acct.name, name)
    acct.clock.call_soon(sender.start)
    _advisory(
        acct, f"$JS.EVENT.ADVISORY.STREAM.SNAPSHOT_CREATE.{name}", "snapshot_create", {"stream": name, "state": state}
    )
    return reply


def restore_request(req: ApiRequest) -> dict:
    acct = req.account
    if is_empty_request(req.payload):
        raise ApiErrors.BAD_REQUEST()
    body = req.json()
    name = req.tokens[4] if len(req.tokens) > 4 else ""
    raw_cfg = body.get("config") or {}
    if not isinstance(raw_cfg, dict):
        raise ApiErrors.INVALID_JSON(
            err="json: cannot unmarshal into Go struct field "
            "JSApiStreamRestoreRequest.config of type server.StreamConfig"
        )
    cfg = StreamConfig.from_json(raw_cfg)
    if not cfg.name:
        cfg.name = name
    if cfg.name != name:
        raise ApiErrors.STREAM_MISMATCH()
    if "\\" in name or "/" in name:
        raise ApiErrors.STREAM_NAME_CONTAINS_PATH_SEPARATORS()

    def get(n: str) -> "StreamConfig | None":
        s = acct.streams.get(n)
        return s.config if s else None

    ccfg = check_stream_config(cfg, False, get)
    acct.check_new_stream_limits(ccfg)
    if name in acct.streams or any(isinstance(t, RestoreReceiver) and t.name == name for t in _transfers(acct)):
        raise ApiErrors.STREAM_NAME_EXIST_RESTORE_FAILED()
    # Replicas, subject overlap and unsupported features are checked when the stream is added
    # (first archive entry), failing the upload with 10062 "restore failed: error adding
    # stream: ..." as the reference does.
    transfers = _transfers(acct)
    start = _now(acct)
    receiver: RestoreReceiver | None = None

    def done(err: str) -> None:
        transfers.discard(receiver)
        adv: dict = {"stream": name, "start": start, "end": _now(acct), "bytes": receiver.bytes if receiver else 0}
        if err:
            adv["error"] = err
        _advisory(acct, f"$JS.EVENT.ADVISORY.STREAM.RESTORE_COMPLETE.{name}", "restore_complete", adv)

    receiver = RestoreReceiver(acct, ccfg, on_done=done)
    transfers.add(receiver)
    log.info("Starting restore for stream '%s > %s'", acct.name, name)
    _advisory(acct, f"$JS.EVENT.ADVISORY.STREAM.RESTORE_CREATE.{name}", "restore_create", {"stream": name})
    subject = receiver.start()
    return resp("stream_restore_response", {"deliver_subject": subject})


def _now(acct: "JsAccount") -> str:
    return rfc3339(acct.clock.time_ns())


def _advisory(acct: "JsAccount", subject: str, kind: str, body: dict) -> None:
    def build() -> dict:
        adv = _typed(acct, "io.nats.jetstream.advisory.v1." + kind)
        adv.update(body)
        if acct.engine.domain:
            adv["domain"] = acct.engine.domain
        return adv

    acct.send_advisory(subject, build)
