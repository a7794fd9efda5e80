"""Credentials out of printed and logged text: the one helper natsctl, the Spark connector and the
server use wherever a URL (or a text that may hold one) is shown.

``nats://app:secret@host:4222`` reads ``nats://app:xxxxx@host:4222``, as Go's ``url.Redacted`` and the
``nats`` CLI show it (the user name helps find which credentials were tried; the password never).
A URL with a user name only (``nats://s3cr3t@host``) carries a token (nats-py and nats.go send it as
``auth_token``), so the whole user part is replaced: ``nats://xxxxx@host``. Go keeps that one;
natsd's rule is that secrets are never in messages.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["REDACTED", "redact_url", "redact", "url_has_credentials"]

REDACTED = "xxxxx"

# scheme://userinfo@ — the userinfo stops at the first '/', whitespace, ',' or quote; a password
# holding '@' must be percent-encoded in a URL anyway.
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>[^/\s,'\"@]+)@")


def _sub(m: re.Match) -> str:
    user, sep, _password = m.group("info").partition(":")
    return f"{m.group('scheme')}{user}:{REDACTED}@" if sep else f"{m.group('scheme')}{REDACTED}@"


def redact(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced (comma-separated lists included)."""
    if "@" not in text:
        return text
    return _USERINFO.sub(_sub, text)


def redact_url(url: str) -> str:
    """One URL (or a comma-separated list of them) with its credentials replaced."""
    return redact(url)


def url_has_credentials(url: str) -> bool:
    """Whether a server URL (or any URL of a comma-separated list) carries a user or token."""
    for part in url.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            sp = urlsplit(part if "://" in part else f"nats://{part}")
        except ValueError:
            continue
        if sp.username:
            return True
    return False
