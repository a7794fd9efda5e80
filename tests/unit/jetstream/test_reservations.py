"""The bytes an account's streams reserve with max_bytes (``reserved_memory`` /
``reserved_storage`` of ``$JS.API.INFO``, and what STREAM.CREATE/UPDATE check against the limits
with 10028 / 10047) are totals the account keeps as streams are created, updated, deleted and
recovered: a create does not sum every stream's config (creating N streams was O(N²), issue 31)."""

from __future__ import annotations

import pytest

from natsd.config.options import AccountJetStreamLimits
from natsd.jetstream.config.models import StreamConfig
from tests.helpers.fakeports import JsEnv

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]


def _summed(acct) -> tuple[int, int]:
    """The reservation as the streams' configs say it, summed the slow way."""
    mem = sum(
        s.config.max_bytes for s in acct.streams.values() if s.config.storage == "memory" and s.config.max_bytes > 0
    )
    fil = sum(
        s.config.max_bytes for s in acct.streams.values() if s.config.storage == "file" and s.config.max_bytes > 0
    )
    return mem, fil


def _create(env, name, storage, max_bytes, verb="CREATE"):
    body = {"name": name, "subjects": [f"{name}.>"], "storage": storage, "max_bytes": max_bytes}
    return env.api(f"$JS.API.STREAM.{verb}.{name}", body)


def _info(env) -> tuple[int, int]:
    r = env.api("$JS.API.INFO")
    return r["reserved_memory"], r["reserved_storage"]


def test_totals_follow_creates_updates_deletes_and_a_restart(tmp_path):
    env = JsEnv(str(tmp_path))
    try:
        assert "error" not in _create(env, "M1", "memory", 1000)
        assert "error" not in _create(env, "F1", "file", 5000)
        assert "error" not in _create(env, "F2", "file", -1)  # (unlimited: reserves nothing)
        assert "error" not in _create(env, "F3", "file", 7000)
        assert env.account.reserved() == _summed(env.account) == _info(env) == (1000, 12000)
        assert "error" not in _create(env, "F1", "file", 9000, "UPDATE")
        assert "error" not in _create(env, "F2", "file", 100, "UPDATE")
        assert "error" not in _create(env, "M1", "memory", -1, "UPDATE")
        assert env.account.reserved() == _summed(env.account) == (0, 16100)
        assert "error" not in env.api("$JS.API.STREAM.DELETE.F3")
        assert env.account.reserved() == _summed(env.account) == (0, 9100)
        assert env.engine.reserved() == (0, 9100)
        # creating an existing stream again with the same config changes nothing
        assert "error" not in _create(env, "F1", "file", 9000)
        assert env.account.reserved() == (0, 9100)
    finally:
        env.stop()
    env = JsEnv(str(tmp_path))  # recovered streams reserve what they did
    try:
        assert sorted(env.account.streams) == ["F1", "F2"]  # (M1 was a memory stream)
        assert env.account.reserved() == _summed(env.account) == (0, 9100)
    finally:
        env.stop()


def test_limits_are_checked_against_the_totals(tmp_path):
    limits = AccountJetStreamLimits(max_memory=-1, max_storage=10_000, max_streams=-1, max_consumers=-1)
    env = JsEnv(str(tmp_path), account_limits=limits)
    try:
        assert "error" not in _create(env, "A", "file", 6000)
        assert _create(env, "B", "file", 5000)["error"]["err_code"] == 10047
        assert "error" not in _create(env, "A", "file", 2000, "UPDATE")
        assert "error" not in _create(env, "B", "file", 5000)
        assert "error" not in env.api("$JS.API.STREAM.DELETE.A")
        assert "error" not in _create(env, "C", "file", 5000)
        assert _create(env, "D", "file", 1)["error"]["err_code"] == 10047
    finally:
        env.stop()


class _NoScan(dict):
    """A streams dict that refuses to be walked (what summing every config would do)."""

    def _refuse(self, *a):
        raise AssertionError("the reservation walked every stream")

    values = items = __iter__ = _refuse  # type: ignore[assignment]


def test_the_create_check_does_not_walk_the_streams(tmp_path):
    env = JsEnv(str(tmp_path))
    try:
        for i in range(20):
            assert "error" not in _create(env, f"S{i}", "file", 1000)
        acct = env.account
        acct.streams = _NoScan(acct.streams)
        assert acct.reserved() == (0, 20_000)
        assert env.engine.reserved() == (0, 20_000)
        cfg = StreamConfig(name="N", subjects=["n.>"], max_bytes=500)
        acct.check_new_stream_limits(cfg)
        acct.check_new_stream_limits(
            StreamConfig(name="S3", subjects=["S3.>"], max_bytes=2000), acct.streams["S3"].config
        )
        acct.streams = dict(acct.streams)
    finally:
        env.stop()
