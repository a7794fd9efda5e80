"""natsd.redact: passwords and tokens out of URLs in any text (one helper for natsctl, Spark, logs)."""

from __future__ import annotations

import pytest

from natsd.redact import redact, redact_url, url_has_credentials

pytestmark = [pytest.mark.unit, pytest.mark.timeout(10)]


@pytest.mark.parametrize(
    "text,want",
    [
        ("nats://app:apppass@127.0.0.1:4222", "nats://app:xxxxx@127.0.0.1:4222"),
        ("tls://sys:s%40cret@host", "tls://sys:xxxxx@host"),
        ("nats://s3cr3ttoken@host:4222", "nats://xxxxx@host:4222"),
        ("nats://a:b@h1:4222,nats://c:d@h2:4222", "nats://a:xxxxx@h1:4222,nats://c:xxxxx@h2:4222"),
        (
            "could not connect to nats://app:wrong@127.0.0.1:1 (context x): refused",
            "could not connect to nats://app:xxxxx@127.0.0.1:1 (context x): refused",
        ),
        ("ws://u:p@host/path?x=a@b", "ws://u:xxxxx@host/path?x=a@b"),
        ("nats://127.0.0.1:4222", "nats://127.0.0.1:4222"),
        ("user@example.com wrote", "user@example.com wrote"),
        ("['nats://u:p@h', 'ws://u:q@h']", "['nats://u:xxxxx@h', 'ws://u:xxxxx@h']"),
    ],
)
def test_redact(text, want):
    assert redact(text) == want
    assert redact_url(text) == want


def test_url_has_credentials():
    assert url_has_credentials("nats://a:b@h:1")
    assert url_has_credentials("nats://h:1, nats://tok@h:2")
    assert url_has_credentials("a:b@h:1")
    assert not url_has_credentials("nats://h:1,tls://h2:4443")
    assert not url_has_credentials("")
