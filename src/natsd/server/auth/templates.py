"""Permission templates of scoped signing keys (nats-server's ``processUserPermissionsTemplate``).

A user JWT signed by a scoped signing key gets the key's template as its permissions, and the
template's subjects may name the user and its account in ``{{...}}`` (case-insensitive)::

    {{name()}}             the user JWT's name
    {{subject()}}          the user's public key
    {{account-name()}}     the account JWT's name
    {{account-subject()}}  the account's public key (the user JWT's issuer_account)
    {{tag(x)}}             every value v of the user's tags "x:v" (one subject per value)
    {{account-tag(x)}}     the same over the account's tags

Several tag functions in one subject give every combination (at most 4,096 subjects in all).
A subject that comes out invalid is dropped from an allow list; in a deny list it refuses the
login, as does an unknown function, and a tag with no value (an allow list then gets a subject
that matches nothing). When every subject of a non-empty allow list was dropped, ``>`` is denied
instead, so the template never widens into "everything allowed".

Every refusal is a :class:`TemplateError` with nats-server's text (logged at debug level; the
client gets ``Authorization Violation``).
"""

from __future__ import annotations

import itertools
import re

from natsd.subjects.tokens import is_valid_subject
from natsd.protocolbase import Protocol

__all__ = ["TemplateError", "expand_permissions", "MAX_EXPANSIONS"]

MAX_EXPANSIONS = 4096  # nats-server's maxPermTemplateSubjectExpansions
_MUSTACHE = re.compile(r"\{\{([^}]+)\}\}")


class UserView(Protocol):
    """What the template functions read of a user JWT (natsd.config.jwt.UserClaims, or an auth
    callout response's user claims)."""

    @property
    def name(self) -> str: ...

    @property
    def subject(self) -> str: ...

    @property
    def issuer_account(self) -> str: ...

    @property
    def tags(self) -> list[str]: ...


class AccountView(Protocol):
    """What they read of its account JWT (natsd.config.jwt.AccountClaims)."""

    @property
    def name(self) -> str: ...

    @property
    def tags(self) -> list[str]: ...


class TemplateError(ValueError):
    """A template that cannot give valid permissions (nats-server's error text)."""


def _tag_op(op: str) -> tuple[str, str] | None:
    low = op.lower()
    for fn in ("tag(", "account-tag("):
        if low.startswith(fn) and op.endswith(")"):
            # (nats-server trims the lower-case prefix only: a mixed-case "Tag(" keeps its name
            # with the prefix, which then matches no tag)
            name = op[len(fn) :] if op.startswith(fn) else op
            return fn[:-1], name[:-1] if name.endswith(")") else name
    return None


def _values(op: str, subject: str, user: UserView, account: AccountView, strict: bool) -> tuple[list[str], bool]:
    """The values one ``{{op}}`` stands for, and whether it is a tag function."""
    low = op.lower()
    if low == "name()":
        return [user.name], False
    if low == "subject()":
        return [user.subject], False
    if low == "account-name()":
        return [account.name], False
    if low == "account-subject()":
        return [user.issuer_account], False
    tag = _tag_op(op)
    if tag is None:
        raise TemplateError(f'template operation in "{subject}": "{op}" is not defined')
    fn, name = tag
    prefix = name.lower() + ":"
    tags = account.tags if fn == "account-tag" else user.tags
    found = [t[len(prefix) :] for t in tags if t.startswith(prefix)]
    if found:
        return found, True
    if strict:
        raise TemplateError(f'generated invalid subject "{subject}": "{name}" is not defined')
    return [" "], True  # a subject that matches nothing


def _apply(subjects: list[str], user: UserView, account: AccountView, strict: bool) -> list[str]:
    """One allow (``strict`` False) or deny (True) list with its templates expanded."""
    if not any(_MUSTACHE.search(s) for s in subjects):
        return subjects
    out: list[str] = []
    for subject in subjects:
        tokens = _MUSTACHE.findall(subject)
        values = []
        tagged = False
        for tk in tokens:
            v, is_tag = _values(tk.strip(), subject, user, account, strict)
            values.append(v)
            tagged = tagged or is_tag
        count = 1
        for v in values:
            count *= len(v)
        if tagged and (count > MAX_EXPANSIONS or len(out) > MAX_EXPANSIONS - count):
            raise TemplateError(f"template expansion exceeds limit: {MAX_EXPANSIONS}")
        for combo in itertools.product(*values):
            s = subject
            for tk, val in zip(tokens, combo):
                s = s.replace("{{" + tk + "}}", val)
            if is_valid_subject(s):
                out.append(s)
            elif strict:
                raise TemplateError("generated invalid subject")
    return out


def expand_permissions(template: dict, user: UserView, account: AccountView) -> dict:
    """``template`` (a scoped signing key's: ``pub``/``sub`` with ``allow``/``deny``, ``resp``,
    limits) with its subjects expanded for ``user`` (UserClaims: name, subject, issuer_account,
    tags) of ``account`` (AccountClaims: name, subject, tags)."""
    out = dict(template)
    for kind in ("sub", "pub"):
        p = template.get(kind)
        if not isinstance(p, dict):
            continue
        allow = [s for s in p.get("allow") or [] if isinstance(s, str)]
        deny = [s for s in p.get("deny") or [] if isinstance(s, str)]
        new_allow = _apply(allow, user, account, False)
        new_deny = _apply(deny, user, account, True)
        if allow and not new_allow:
            new_deny = [*new_deny, ">"]
        q = dict(p)
        q["allow"], q["deny"] = new_allow, new_deny
        out[kind] = q
    return out
