"""allow_responses on an accepted leaf link (:class:`natsd.server.leaf.auth.LinkPerms`): which
replies are tracked, how many answers each allows, and their expiry."""

from __future__ import annotations

from natsd.config.options import Permissions, SubjectPermission
from natsd.server.auth.authenticator import compile_permissions
from natsd.server.leaf.auth import LinkPerms

SEC = 1_000_000_000


def perms(max_msgs: int = 1, expires: int = 0, sub: list[str] | None = None) -> LinkPerms:
    p = Permissions(
        publish=SubjectPermission(allow=["pub.>"], deny=[]),
        subscribe=SubjectPermission(allow=sub if sub is not None else ["svc.>"], deny=[]),
        allow_responses=True,
        responses_max=max_msgs,
        responses_expires_ns=expires,
    )
    return LinkPerms.for_hub(compile_permissions(p))


def test_tracked_reply_answers_max_times() -> None:
    lp = perms(max_msgs=2)
    assert lp.refuses_pub("_INBOX.a")
    assert not lp.response_allowed("_INBOX.a", 0)
    lp.track_reply("_INBOX.a", 0)
    assert lp.response_allowed("_INBOX.a", 1) and lp.response_allowed("_INBOX.a", 2)
    assert not lp.response_allowed("_INBOX.a", 3)


def test_reply_expires() -> None:
    lp = perms(max_msgs=5, expires=2 * SEC)
    lp.track_reply("_INBOX.b", 0)
    assert lp.response_allowed("_INBOX.b", SEC)
    assert not lp.response_allowed("_INBOX.b", 3 * SEC)
    assert lp.replies == {}


def test_reply_the_subscribe_permission_covers_is_not_tracked() -> None:
    """As the reference: the check is against the link's swapped publish filter (the user's
    subscribe permission)."""
    lp = perms(sub=["svc.>", "_INBOX.>"])
    lp.track_reply("_INBOX.c", 0)
    assert lp.replies == {}


def test_without_allow_responses_nothing_is_tracked() -> None:
    p = Permissions(
        publish=SubjectPermission(allow=["pub.>"], deny=[]), subscribe=SubjectPermission(allow=["svc.>"], deny=[])
    )
    lp = LinkPerms.for_hub(compile_permissions(p))
    lp.track_reply("_INBOX.d", 0)
    assert lp.replies is None and not lp.response_allowed("_INBOX.d", 0)
