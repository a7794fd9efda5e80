"""Account imports and exports from account JWTs: streams and services across accounts.

Both are built from *internal subscriptions* (see :mod:`natsd.server.ports`), so the publish
path is untouched and a message crosses accounts at the same point of routing where any internal
subscriber would get it:

* **stream import** (account B imports stream ``S`` from A): an internal subscription on ``S`` in
  A's Sublist republishes every message into B, under the import's local subject
  (``local_subject`` with the same wildcards, ``$N`` tokens allowed; or the legacy ``to`` prefix:
  ``<to>.<subject>``), reply subject unchanged;
* **service import** (B imports service ``S`` from A, requested in B on ``local_subject``/``to``,
  default ``S``): an internal subscription on the local subject in B forwards each request into
  A on ``S`` (wildcard tokens carried over) with a fresh reply subject ``_R_.<link>.<n>``; one
  internal wildcard subscription ``_R_.<link>.>`` in A takes the responses back to the
  requester's reply subject in B. ``Singleton`` services answer once (the entry goes with the
  first response); ``Stream``/``Chunked`` ones may answer until ``response_threshold`` (default
  2 minutes). Pending replies are bounded (``MAX_PENDING`` per link, oldest dropped).

An import is honoured only when the exporter's JWT exports a subject covering it; a private
export (``token_req``) also needs the import's activation token (:func:`_activation_ok`). An
import that does not qualify is skipped with a warning, as the reference does. Forwarding depth is capped
(``MAX_DEPTH``) so import cycles cannot recurse forever.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from natsd.config import jwt as J
from natsd.nats_headers import MSG_TRACE_DEST
from natsd.server import msgtrace
from natsd.server.auth.request_info import with_request_info
from natsd.server.log import logger
from natsd.server.ports import ServerPorts
from natsd.server.router import route
from natsd.subjects.tokens import subset

if TYPE_CHECKING:  # pragma: no cover
    from natsd.server.account import Account
    from natsd.config.jwt import AccountClaims, Export, Import
    from natsd.server.context import ServerContext

__all__ = ["apply_imports", "map_subject", "MAX_PENDING", "MAX_DEPTH"]

MAX_PENDING = 10_000
MAX_DEPTH = 8
DEFAULT_RESPONSE_THRESHOLD_NS = 120 * 1_000_000_000
_links = itertools.count(1)
_depth = 0


def map_subject(pattern: str, subject: str, target: str) -> str:
    """Carry ``subject``'s wildcard tokens (matched by ``pattern``) into ``target``.

    ``target``'s ``*`` tokens take the matched ``*`` tokens in order, ``$N`` the N-th one, a
    final ``>`` takes the rest; a literal target is returned as is.
    """
    if target == pattern:
        return subject
    p, s = pattern.split("."), subject.split(".")
    wild: list[str] = []
    for i, tok in enumerate(p):
        if tok == "*":
            wild.append(s[i])
        elif tok == ">":
            wild.append(".".join(s[i:]))
            break
    out = []
    n = 0
    for tok in target.split("."):
        if tok == "*" or tok == ">":
            out.append(wild[n] if n < len(wild) else tok)
            n += 1
        elif tok.startswith("$") and tok[1:].isdigit():
            k = int(tok[1:]) - 1
            out.append(wild[k] if 0 <= k < len(wild) else tok)
        else:
            out.append(tok)
    return ".".join(out)


def _find_export(exporter: "AccountClaims", imp: "Import") -> "Export | None":
    for e in exporter.exports:
        if e.type == imp.type and (e.subject == imp.subject or subset(imp.subject, e.subject)):
            return e
    return None


def _activation_ok(imp: "Import", exporter: "AccountClaims") -> bool:
    """A private export (``token_req``) needs the import's ``token``: an activation JWT (already
    checked with the importing account's claims, see ``Trust._verify_account``) issued by the
    exporting account or one of its signing keys, for a subject covering the import."""
    if not imp.token:
        return False
    try:
        c = J.decode(imp.token)
    except J.JWTError:
        return False
    if c["iss"] != exporter.subject and c["iss"] not in exporter.signing_keys:
        return False
    subject = c["nats"].get("subject")
    return isinstance(subject, str) and (subject == imp.subject or subset(imp.subject, subject))


def apply_imports(server: "ServerContext", acc: "Account", claims: "AccountClaims") -> None:
    """(Re)install ``acc``'s imports from its claims (old links are removed first)."""
    for link in acc.links:
        link.unsubscribe()
    acc.links = []
    trust = server.trust
    assert trust is not None  # imports come from account JWTs: operator mode only
    for imp in claims.imports:
        if imp.account == acc.name:
            continue
        exp_claims = trust.lookup(imp.account)
        export = _find_export(exp_claims, imp) if exp_claims is not None else None
        if export is None:
            logger.warning(
                "Account %s: import of %s %r from %s is not exported", acc.name, imp.type, imp.subject, imp.account
            )
            continue
        if export.token_req and not _activation_ok(imp, exp_claims):  # type: ignore[arg-type]  # export is None otherwise
            logger.warning(
                "Account %s: import of %r from %s has no valid activation token", acc.name, imp.subject, imp.account
            )
            continue
        exporter = server.accounts.get(imp.account) or server.get_account(imp.account)
        if imp.type == "service":
            acc.links.append(_ServiceLink(server, exporter, acc, imp, export))
        else:
            acc.links.append(_StreamLink(exporter, acc, imp))


def _forward(acc: Account, into: ServerPorts, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> int:
    """Publish a message an import forwards into ``acc``; a traced one goes to the receivers its
    trace chose there (natsd.server.msgtrace: a queue group's egress names the member that got it)."""
    mt = msgtrace.active
    r = mt.take_chosen(acc, subject) if mt is not None else None
    if r is None:
        return into.publish(subject, reply, hdr, payload)
    data = hdr + payload if hdr else payload
    return route(acc, subject, subject.encode(), reply.encode(), len(hdr) if hdr else 0, data, None, None, r)


_TRACE_DISABLED = b"trace disabled"  # nats-server's MsgTraceDestDisabled (an invalid subject)


class _StreamLink:
    def __init__(self, exporter: "Account", importer: "Account", imp: "Import") -> None:
        self.into = ServerPorts(importer)
        self.subject = imp.subject
        if imp.local_subject:
            self.target = imp.local_subject
        elif imp.to:
            self.target = f"{imp.to}.{imp.subject}"  # legacy: ``to`` prefixes the subject
        else:
            self.target = imp.subject
        self.prefix = imp.to if (imp.to and not imp.local_subject) else ""
        self.importer = importer
        self.allow_trace = imp.allow_trace
        self.sub = ServerPorts(exporter).subscribe(imp.subject, self._on_msg)

    def _local(self, subject: str) -> str:
        return f"{self.prefix}.{subject}" if self.prefix else map_subject(self.subject, subject, self.target)

    def trace_hop(self, sub: object, subject: str) -> msgtrace.ImportHop:
        """For message tracing (natsd.server.msgtrace): where this import takes ``subject``."""
        return msgtrace.ImportHop(False, self.importer, self._local(subject), self.allow_trace, self._shadow)

    def _shadow(self, local: str) -> str:
        """The exporter-side subject of an importing subscription on ``local`` (nats-server's
        shadow subscription): the import's subject, or the narrower one the subscription names."""
        if self.prefix:
            return local[len(self.prefix) + 1 :] if subset(local, f"{self.prefix}.{self.subject}") else self.subject
        if local != self.target and subset(local, self.target):
            return map_subject(self.target, local, self.subject)
        return self.subject

    def _on_msg(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        global _depth
        if _depth >= MAX_DEPTH:
            return
        local = self._local(subject)
        _depth += 1
        try:
            _forward(self.importer, self.into, local, reply, hdr, payload)
        finally:
            _depth -= 1

    def unsubscribe(self) -> None:
        self.sub.unsubscribe()


class _ServiceLink:
    def __init__(
        self, server: "ServerContext", exporter: "Account", importer: "Account", imp: "Import", export: "Export"
    ) -> None:
        self.clock = server.clock
        self.server = server
        self.share = imp.share
        self.exporter = exporter
        self.to_exporter = ServerPorts(exporter)
        self.to_importer = ServerPorts(importer)
        self.importer = importer
        self.subject = imp.subject
        self.local = imp.local_subject or imp.to or imp.subject
        self.singleton = export.response_type not in ("Stream", "Chunked")
        self.allow_trace = export.allow_trace
        # Trace destinations reached through this link (token -> (subject in the importer,
        # deadline)): a traced request's Nats-Trace-Dest names prefix+token in the exporter, so
        # servers further on publish their trace events back to the requester's destination.
        self.trace_pending: dict[str, tuple[str, int]] = {}
        self.threshold_ns = export.response_threshold_ns or DEFAULT_RESPONSE_THRESHOLD_NS
        self.prefix = f"_R_.L{next(_links)}."
        self.pending: dict[str, tuple[str, int]] = {}  # token -> (requester reply, deadline ns)
        self._n = itertools.count(1)
        self.subs = [
            self.to_importer.subscribe(self.local, self._on_request),
            self.to_exporter.subscribe(self.prefix + ">", self._on_response),
        ]
        self.subs[0].with_src = True  # (the router tells _on_request who sent the request)

    def _target(self, subject: str) -> str:
        target = map_subject(self.local, subject, self.subject)
        if self.exporter.mapper is not None:
            # As nats-server: the exporting account's mappings apply to the imported request.
            target = self.exporter.mapper.map(target) or target
        return target

    def trace_hop(self, sub: object, subject: str) -> msgtrace.ImportHop | None:
        """For message tracing (natsd.server.msgtrace): where this import takes ``subject`` (the
        request subscription only; responses are not traced)."""
        if sub is not self.subs[0]:
            return None
        return msgtrace.ImportHop(True, self.exporter, self._target(subject), self.allow_trace)

    def _pend(self, pending: dict[str, tuple[str, int]], reply: str) -> str:
        """A fresh ``_R_`` subject in the exporter that leads back to ``reply`` in the importer."""
        now = self.clock.monotonic_ns()
        while pending:  # drop expired (and, over the bound, the oldest) entries
            first = next(iter(pending))
            if len(pending) < MAX_PENDING and pending[first][1] > now:
                break
            del pending[first]
        token = str(next(self._n))
        pending[token] = (reply, now + self.threshold_ns)
        return self.prefix + token

    def _traced_header(self, hdr: bytes) -> bytes:
        """A traced request's headers as the exporter gets them (nats-server): its trace
        destination replaced by a subject leading back to it when the export allows tracing,
        else by "trace disabled" (servers further on must not trace it)."""
        mt = msgtrace.active
        if mt is None:
            return hdr
        if not self.allow_trace:
            return msgtrace.set_trace_dest(hdr, _TRACE_DISABLED)
        return msgtrace.set_trace_dest(hdr, self._pend(self.trace_pending, mt.dest).encode())

    def _on_request(self, subject: str, reply: str, hdr: bytes | None, payload: bytes, src: object = None) -> None:
        global _depth
        if _depth >= MAX_DEPTH:
            return
        target = self._target(subject)
        if hdr and msgtrace.active is not None and hdr.find(MSG_TRACE_DEST) >= 0:
            hdr = self._traced_header(hdr)
        # The requester, as nats-server tells the service (src: None when an import forwards it).
        s = self.server
        sys_import = self.exporter.name == (s.options.system_account or (s.trust.system_account if s.trust else ""))
        hdr = with_request_info(self.server, hdr, src, self.share, sys_import, self.importer.name)
        mapped = self._pend(self.pending, reply) if reply else ""
        _depth += 1
        try:
            n = _forward(self.exporter, self.to_exporter, target, mapped, hdr, payload)
        finally:
            _depth -= 1
        if not n and reply:
            self.pending.pop(mapped[len(self.prefix) :], None)
            self._no_responders(subject, reply)

    def _no_responders(self, subject: str, reply: str) -> None:
        """Nobody serves the export: the requester gets the 503 status, as from a local request
        (only a client that asked for no_responders and holds the reply subscription)."""
        r = self.importer.sublist.match(reply)
        for sub in r.psubs:
            c = sub.client
            if c is not None and c.no_responders and c.headers:
                c.send_no_responders(subject.encode(), reply.encode())
                return

    def _on_response(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        token = subject[len(self.prefix) :]
        entry = self.pending.get(token)
        if entry is None:
            trace = self.trace_pending.get(token)
            if trace is not None and trace[1] > self.clock.monotonic_ns():
                self.to_importer.publish(trace[0], "", hdr, payload)  # a further server's trace event
            return
        if self.singleton or entry[1] <= self.clock.monotonic_ns():
            del self.pending[token]
            if not self.singleton:
                return
        self.to_importer.publish(entry[0], "", hdr, payload)

    def unsubscribe(self) -> None:
        for s in self.subs:
            s.unsubscribe()
        self.pending.clear()
        self.trace_pending.clear()
