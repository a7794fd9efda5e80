"""Stream templates: a subject space that creates one stream per subject on first publish.

Templates were removed from nats-server in 2.14; natsd keeps them with the shapes and rules of the
last releases that had them (2.11):

* ``StreamTemplateConfig`` JSON: ``{"name": <template>, "config": StreamConfig, "max_streams": N}``;
  ``StreamTemplateInfo``: ``{"config": StreamTemplateConfig, "streams": [names]}``. The stored
  and reported ``config.name`` is ``"_"`` (the reference validates the template's stream config
  under that placeholder name and keeps it).
* The template subscribes its subjects. A message on a subject no stream holds yet creates the
  stream named after the subject with every ``.`` replaced by ``_`` (the reference's
  ``canonicalName``: template ``CLIENTS`` over ``CLIENT.*`` and a publish on ``CLIENT.acme``
  creates ``CLIENT_acme``), with the template's config and ``subjects: [<that subject>]``;
  the message is then stored in it (and acknowledged as any publish).
* ``max_streams`` caps the streams a template creates (0 allows none). At the cap, as when the
  stream cannot be created (account limits, subject overlap), the message is dropped and a
  warning logged -- the publisher gets no reply, exactly as the reference.
* Deleting a template deletes the streams it created. A template-owned stream's config can not be
  updated (10052 "stream configuration update not allowed on template owned stream").

Persistence (file-storage templates, as the reference's template file store)::

    <store_dir>/jetstream/<account>/templates/<name>/meta.inf     StreamTemplateConfig JSON (UTF-8)
    <store_dir>/jetstream/<account>/templates/<name>/meta.sum     hex SHA-256 of meta.inf (64 chars)
    <store_dir>/jetstream/<account>/templates/<name>/streams.json JSON array of the stream names
                                                                   the template owns

``meta.inf`` is written once at creation; ``streams.json`` is rewritten (write to ``.tmp``,
fsync, rename) whenever the template creates a stream. The reference records ownership in each
stream's config (``template_owner``) instead; natsd's StreamConfig has no such field, hence
``streams.json``. A template whose ``meta.sum`` does not match is skipped at recovery with a
warning, like the reference.
"""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING, Any

from natsd.atomicfile import atomic_write
from natsd.gohash import sha256

# The error table, the config models and their checks load with the first template operation,
# not with the TemplateManager every JetStream account makes at start (issue 26, start-up time).
if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.config.models import StreamConfig
    from natsd.jetstream.views import AccountView

__all__ = ["StreamTemplate", "TemplateManager", "canonical_name", "JS_MAX_NAME_LEN", "TEMPLATES_DIR"]

log = logging.getLogger("natsd.jetstream.templates")

TEMPLATES_DIR = "templates"
META_FILE = "meta.inf"
SUM_FILE = "meta.sum"
STREAMS_FILE = "streams.json"
JS_MAX_NAME_LEN = 255
MAX_STREAMS_LIMIT = 0xFFFFFFFF  # uint32 in the reference
_WARN_EVERY_NS = 10 * 1_000_000_000


def canonical_name(subject: str) -> str:
    """The stream a template creates for ``subject`` (the reference's canonicalName)."""
    return subject.replace(".", "_")


def _checksum(data: bytes) -> str:
    return sha256(data).hexdigest()


class StreamTemplate:
    """One template of one account."""

    def __init__(
        self,
        manager: "TemplateManager",
        name: str,
        config: StreamConfig,
        max_streams: int,
        streams: list[str] | None = None,
    ) -> None:
        self.manager = manager
        self.account = manager.account
        self.name = name
        self.config = config  # validated, name "_"
        self.max_streams = max_streams
        self.streams: list[str] = list(streams or [])
        self._subs: list[Any] = []
        self._last_warn = 0

    def config_json(self) -> dict:
        """StreamTemplateConfig JSON."""
        return {"name": self.name, "config": self.config.to_json(), "max_streams": self.max_streams}

    def live_streams(self) -> list[str]:
        """Owned streams that still exist (a stream deleted on its own no longer counts)."""
        alive = [s for s in self.streams if s in self.account.streams]
        if len(alive) != len(self.streams):
            self.streams = alive
        return list(alive)

    def info_json(self) -> dict:
        """StreamTemplateInfo JSON."""
        return {"config": self.config_json(), "streams": self.live_streams()}

    # -- subscriptions -------------------------------------------------------------------------
    def subscribe(self) -> None:
        ports = self.account.ports
        self._subs = [ports.subscribe(s, self._on_msg) for s in self.config.subjects]

    def unsubscribe(self) -> None:
        for s in self._subs:
            try:
                s.unsubscribe()
            except Exception:
                pass
        self._subs = []

    def _warn(self, fmt: str, *args: Any) -> None:
        now = self.account.clock.monotonic_ns()
        if not self._last_warn or now - self._last_warn >= _WARN_EVERY_NS:
            self._last_warn = now
            log.warning(fmt, *args)

    def _on_msg(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        acct = self.account
        cn = canonical_name(subject)
        if cn in acct.streams:
            return  # the stream exists: its own subscription stores the message
        if self.manager.templates.get(self.name) is not self:
            return  # deleted meanwhile
        if len(self.live_streams()) >= self.max_streams:
            self._warn("JetStream could not create stream for account %r on subject %r, at limit", acct.name, subject)
            return
        from natsd.jetstream.errors import ApiError  # (loaded by create_stream's checks: issue 26)

        try:
            stream = self.manager.create_stream(self, cn, subject)
        except (ApiError, OSError, ValueError) as e:
            self._warn(
                "JetStream could not create stream for account %r on subject %r: %s", acct.name, subject, e
            )  # (an ApiError's text is its description)
            return
        # Store this first message directly (the stream's subscription did not exist when it was
        # routed), as the reference does.
        stream.process_msg(subject, reply, hdr, payload)


class TemplateManager:
    """The templates of one JetStream account (``JsAccount.templates``)."""

    def __init__(self, account: "AccountView") -> None:
        self.account = account
        self.templates: dict[str, StreamTemplate] = {}
        self.directory = os.path.join(os.path.dirname(account.directory), TEMPLATES_DIR)

    # -- API operations --------------------------------------------------------------------------
    def add(self, name: str, raw_config: Any, max_streams: int, persist: bool = True) -> StreamTemplate:
        """Create a template (reference ``addStreamTemplate``); raises ApiError."""
        from natsd.jetstream.config.models import StreamConfig
        from natsd.jetstream.config.stream_checks import check_stream_config
        from natsd.jetstream.errors import ApiErrors

        if not isinstance(raw_config, dict):
            raise ApiErrors.STREAM_TEMPLATE_CREATE(err="template config is required")
        cfg = StreamConfig.from_json(raw_config)
        if cfg.name:
            raise ApiErrors.STREAM_TEMPLATE_CREATE(err="template config name should be empty")
        if len(name.encode()) > JS_MAX_NAME_LEN:
            raise ApiErrors.STREAM_TEMPLATE_CREATE(
                err=f"template name is too long, maximum allowed is {JS_MAX_NAME_LEN}"
            )
        if not name or any(c in name for c in "/\\.*> \t\r\n"):
            raise ApiErrors.STREAM_TEMPLATE_CREATE(err="template name is not valid")
        cfg.name = "_"
        acct = self.account

        def get(n: str) -> StreamConfig | None:
            s = acct.streams.get(n)
            return s.config if s else None

        ccfg = check_stream_config(cfg, False, get)
        if name in self.templates:
            raise ApiErrors.STREAM_TEMPLATE_CREATE(err=f'template with name "{name}" already exists')
        t = StreamTemplate(self, name, ccfg, max_streams)
        self.templates[name] = t
        t.subscribe()
        if persist:
            try:
                self._store(t)
            except OSError as e:
                self.templates.pop(name, None)
                t.unsubscribe()
                raise ApiErrors.STREAM_TEMPLATE_CREATE(err=str(e)) from None
        return t

    def lookup(self, name: str) -> StreamTemplate:
        t = self.templates.get(name)
        if t is None:
            from natsd.jetstream.errors import ApiErrors

            raise ApiErrors.STREAM_TEMPLATE_NOT_FOUND()
        return t

    def delete(self, name: str) -> None:
        """Delete the template and every stream it created."""
        import shutil  # (bz2 and lzma behind it: not at a JetStream start, issue 26)

        from natsd.jetstream.advisories import stream_action
        from natsd.jetstream.errors import ApiErrors

        t = self.lookup(name)
        del self.templates[name]
        t.unsubscribe()
        acct = self.account
        streams = t.live_streams()
        try:
            shutil.rmtree(os.path.join(self.directory, name))
        except FileNotFoundError:
            pass
        except OSError as e:
            raise ApiErrors.STREAM_TEMPLATE_DELETE(err=f"error deleting template from store: {e}") from None
        last_err: Exception | None = None
        for sname in streams:
            try:
                acct.delete_stream(sname)
            except Exception as e:  # keep deleting the others
                last_err = e
                continue
            acct.send_advisory(
                f"$JS.EVENT.ADVISORY.STREAM.DELETED.{sname}",
                lambda s=sname: {**stream_action(acct, s, "delete"), "template": name},
            )
        if last_err is not None:
            raise ApiErrors.STREAM_TEMPLATE_DELETE(err=str(last_err))

    def names(self) -> list[str]:
        return sorted(self.templates)

    def owner_of(self, stream: str) -> str:
        """Name of the template owning ``stream`` ("" when none)."""
        for t in self.templates.values():
            if stream in t.streams:
                return t.name
        return ""

    # -- stream creation -------------------------------------------------------------------------
    def create_stream(self, t: StreamTemplate, name: str, subject: str) -> Any:
        from natsd.jetstream.advisories import stream_action
        from natsd.jetstream.config.stream_checks import check_stream_config, check_subject_overlap, refuse_unsupported

        acct = self.account
        cfg = t.config.copy()
        cfg.name = name
        cfg.subjects = [subject]

        def get(n: str) -> StreamConfig | None:
            s = acct.streams.get(n)
            return s.config if s else None

        ccfg = check_stream_config(cfg, False, get)
        acct.check_new_stream_limits(ccfg)
        refuse_unsupported(ccfg)
        check_subject_overlap(ccfg, {n: s.config for n, s in acct.streams.items()})
        stream = acct.add_stream(ccfg)
        t.streams.append(name)
        if t.config.storage == "file":
            try:
                self._store_streams(t)
            except OSError:
                log.exception("JetStream could not record stream %s of template %s", name, t.name)
        acct.send_advisory(
            f"$JS.EVENT.ADVISORY.STREAM.CREATED.{name}",
            lambda: {**stream_action(acct, name, "create"), "template": t.name},
        )
        return stream

    # -- persistence -----------------------------------------------------------------------------
    def _store(self, t: StreamTemplate) -> None:
        if t.config.storage != "file":
            return  # memory templates are not persisted (as the reference's template mem store)
        d = os.path.join(self.directory, t.name)
        os.makedirs(d, exist_ok=True)
        meta = json.dumps(t.config_json(), separators=(",", ":")).encode()
        atomic_write(os.path.join(d, META_FILE), meta)
        atomic_write(os.path.join(d, SUM_FILE), _checksum(meta).encode())
        self._store_streams(t)

    def _store_streams(self, t: StreamTemplate) -> None:
        d = os.path.join(self.directory, t.name)
        if not os.path.isdir(d):
            return
        atomic_write(os.path.join(d, STREAMS_FILE), json.dumps(t.streams).encode())

    def recover(self) -> None:
        """Load every persisted template and subscribe its subjects (warnings for bad ones)."""
        try:
            names = sorted(os.listdir(self.directory))
        except FileNotFoundError:
            return
        from natsd.jetstream.errors import ApiError  # (a store with templates: issue 26)

        for name in names:
            d = os.path.join(self.directory, name)
            if name in self.templates or not os.path.isdir(d):
                continue
            try:
                with open(os.path.join(d, META_FILE), "rb") as f:
                    meta = f.read()
            except OSError as e:
                log.warning("  Error reading StreamTemplate metafile %r: %s", os.path.join(d, META_FILE), e)
                continue
            try:
                with open(os.path.join(d, SUM_FILE), "rb") as f:
                    want = f.read().decode().strip()
            except OSError:
                log.warning("  Missing StreamTemplate checksum for %r", os.path.join(d, SUM_FILE))
                continue
            got = _checksum(meta)
            if got != want:
                log.warning("  StreamTemplate checksums do not match %r vs %r", want, got)
                continue
            try:
                tc = json.loads(meta)
                cfg = dict(tc["config"])
                cfg.pop("name", None)
                t = self.add(tc["name"], cfg, int(tc.get("max_streams") or 0), persist=False)
            except (ApiError, ValueError, KeyError, TypeError) as e:
                log.warning("  Error recreating StreamTemplate %r: %s", name, e)
                continue
            try:
                with open(os.path.join(d, STREAMS_FILE), "rb") as f:
                    owned = json.loads(f.read())
                if isinstance(owned, list):
                    t.streams = [s for s in owned if isinstance(s, str)]
            except (OSError, ValueError):
                log.warning("  StreamTemplate %r: list of owned streams unreadable", name)

    def stop(self) -> None:
        """Unsubscribe every template (the account stops)."""
        for t in self.templates.values():
            t.unsubscribe()

    def refuse_update_of_owned_stream(self, stream: Any) -> None:
        """STREAM.UPDATE check: a stream a template created takes its config from the template."""
        if self.owner_of(stream.name):
            from natsd.jetstream.errors import ApiErrors

            raise ApiErrors.STREAM_INVALID_CONFIG(
                err="stream configuration update not allowed on template owned stream"
            )
