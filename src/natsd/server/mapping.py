"""Account subject mappings on the publish path (nats-server's ``selectMappedSubject``).

:func:`install` gives each account its :class:`~natsd.subjects.mapping.SubjectMapper` from the
options (top-level ``mappings`` belong to the global account), at start and on reload.
Connections consult ``account.mapper`` only when it is set: it makes their publishes take the
checked, message-by-message path (``ClientConnection.on_pub``), where :func:`mapped` rewrites the
subject before permissions, routing, JetStream capture and imports, as the reference does in its
parser. Without mappings the hot path is unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from natsd.server.account import GLOBAL_ACCOUNT
from natsd.server.log import TRACE, logger
from natsd.config.jwt_tokens import is_public_key
from natsd.subjects.mapping import MapDest, MappingError, SubjectMapper

if TYPE_CHECKING:  # pragma: no cover
    from natsd.config.mappings import MappingList
    from natsd.config.options import ServerOptions
    from natsd.server.account import Account

__all__ = ["install", "mapped", "from_claims"]


def _mapper(mappings: MappingList, rand: Callable[[int], int] | None) -> SubjectMapper | None:
    if not mappings:
        return None
    m = SubjectMapper(rand)
    for src, dests in mappings:
        m.add(src, dests)  # validated when the config was read
    return m


def from_claims(name: str, mappings: dict) -> SubjectMapper | None:
    """An account JWT's ``mappings`` (``{source: [{subject, weight, cluster}]}``): a bad entry is
    logged and skipped, as nats-server does when it applies account claims."""
    if not mappings:
        return None
    m = SubjectMapper()
    for src, dests in mappings.items():
        try:
            if not isinstance(dests, list):
                raise MappingError("expected a list of destinations")
            m.add(
                src,
                [
                    MapDest(str(d.get("subject", "")), int(d.get("weight", 0)), str(d.get("cluster", "")))
                    for d in dests
                    if isinstance(d, dict)
                ],
            )
        except (MappingError, ValueError, TypeError) as e:
            logger.error('Error adding mapping for "%s" in account %s: %s', src, name, e)
    return m if m else None


def install(
    get_account: Callable[[str], Account],
    accounts: dict[str, Account],
    options: ServerOptions,
    rand: Callable[[int], int] | None = None,
) -> None:
    """Set (or clear, on reload) every configured account's mapper. ``rand(n)`` draws weighted
    destinations and ``{{random(n)}}`` (tests inject it)."""
    wanted: dict[str, MappingList] = {GLOBAL_ACCOUNT: options.mappings}
    for a in options.accounts:
        wanted[a.name] = a.mappings
    for name, acc in accounts.items():
        if name not in wanted and not is_public_key(name, "A"):  # (JWT accounts: from their claims)
            acc.mapper = None
    for name, mappings in wanted.items():
        found = accounts.get(name) if not mappings else get_account(name)
        if found is not None:
            found.mapper = _mapper(mappings, rand)


def mapped(acc: Account, subject: str, trace_prefix: str | None = None) -> str | None:
    """The subject a publish to ``subject`` in ``acc`` goes to: ``None`` when no mapping applies
    (keep the original), ``""`` when a weighted mapping drops it."""
    mapper = acc.mapper
    if mapper is None:
        return None
    new = mapper.map(subject)
    if new is not None and trace_prefix is not None:
        logger.log(TRACE, "%s<<- [MAPPING %s -> %s]", trace_prefix, subject, new)
    return new
