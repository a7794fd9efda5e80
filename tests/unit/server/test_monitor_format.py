"""Formatting helpers of the monitoring endpoints (Go-compatible times and durations)."""

from __future__ import annotations

from natsd.server.monitor import go_duration, rfc3339


def test_rfc3339_nanoseconds_utc():
    assert rfc3339(1_795_251_861_800_828_857) == "2026-11-21T09:04:21.800828857Z"
    assert rfc3339(1_795_251_861_000_000_000) == "2026-11-21T09:04:21Z"
    assert rfc3339(1_795_251_861_500_000_000) == "2026-11-21T09:04:21.5Z"  # Go trims trailing zeros


def test_go_duration_like_nats_server_uptime():
    s = 1_000_000_000
    assert go_duration(0) == "0s"
    assert go_duration(279 * s) == "4m39s"
    assert go_duration(3600 * s + 5 * s) == "1h0m5s"
    assert go_duration(86400 * s + 61 * s) == "1d0h1m1s"
