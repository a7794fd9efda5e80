"""Scoped signing-key templates (natsd.server.auth.templates): expansion and nats-server's errors."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from natsd.server.auth.templates import MAX_EXPANSIONS, TemplateError, expand_permissions

pytestmark = [pytest.mark.unit, pytest.mark.timeout(10)]

USER = SimpleNamespace(name="bob", subject="UBOB", issuer_account="AACC", tags=["team:red", "team:blue", "x:1"])
ACC = SimpleNamespace(name="A", subject="AACC", tags=["region:eu"])


def _pub(allow=None, deny=None):
    return expand_permissions({"pub": {"allow": allow or [], "deny": deny or []}}, USER, ACC)["pub"]


def test_functions_expand():
    p = _pub(["{{name()}}.>", "{{ Subject() }}", "{{account-name()}}.{{account-subject()}}"])
    assert p["allow"] == ["bob.>", "UBOB", "A.AACC"]


def test_tags_give_every_combination():
    p = _pub(["t.{{tag(team)}}.{{account-tag(region)}}.{{tag(team)}}"])
    # A repeated token is replaced everywhere by its first occurrence's value (nats-server's
    # Replace of every occurrence), and the combinations still count it twice: duplicates.
    assert p["allow"] == ["t.red.eu.red", "t.red.eu.red", "t.blue.eu.blue", "t.blue.eu.blue"]


def test_missing_tag_drops_an_allow_and_refuses_a_deny():
    assert _pub(["a.>", "b.{{tag(none)}}"]) == {"allow": ["a.>"], "deny": []}
    assert _pub(["b.{{tag(none)}}"]) == {"allow": [], "deny": [">"]}
    with pytest.raises(
        TemplateError, match=r'generated invalid subject "x.\{\{tag\(none\)\}\}": "none" is not defined'
    ):
        _pub(deny=["x.{{tag(none)}}"])


def test_unknown_function_and_invalid_deny():
    with pytest.raises(TemplateError, match=r'template operation in "\{\{nope\(\)\}\}": "nope\(\)" is not defined'):
        _pub(["{{nope()}}"])
    user = SimpleNamespace(name="a b", subject="U", issuer_account="A", tags=[])
    with pytest.raises(TemplateError, match="^generated invalid subject$"):
        expand_permissions({"pub": {"deny": ["{{name()}}"]}}, user, ACC)


def test_expansion_limit():
    many = SimpleNamespace(name="n", subject="U", issuer_account="A", tags=[f"k:{i}" for i in range(65)])
    with pytest.raises(TemplateError, match=f"template expansion exceeds limit: {MAX_EXPANSIONS}"):
        expand_permissions({"sub": {"allow": ["{{tag(k)}}.{{tag(k)}}x"]}}, many, ACC)


def test_untemplated_lists_are_kept():
    tmpl = {"pub": {"allow": ["a"], "deny": ["b"]}, "subs": 5}
    assert expand_permissions(tmpl, USER, ACC) == tmpl
