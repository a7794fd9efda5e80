"""Formatting of the monitoring endpoints (Go-compatible times, nats-server's uptime spelling);
the helpers are natsd.gotime's, tested whole in tests/unit/test_gotime.py."""

from __future__ import annotations

from natsd.gotime import format_rfc3339 as rfc3339, uptime


def test_rfc3339_nanoseconds_utc():
    assert rfc3339(1_795_251_861_800_828_857) == "2026-11-21T09:04:21.800828857Z"
    assert rfc3339(1_795_251_861_000_000_000) == "2026-11-21T09:04:21Z"
    assert rfc3339(1_795_251_861_500_000_000) == "2026-11-21T09:04:21.5Z"  # Go trims trailing zeros


def test_uptime_like_nats_server():
    s = 1_000_000_000
    assert uptime(0) == "0s"
    assert uptime(279 * s) == "4m39s"
    assert uptime(3600 * s + 5 * s) == "1h0m5s"
    assert uptime(86400 * s + 61 * s) == "1d0h1m1s"
    # nats-server's myUptime counts 365-day years past a year (the old copy stopped at days)
    assert uptime(400 * 86400 * s) == "1y35d0h0m0s"
