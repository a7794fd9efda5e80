"""A real full disk (a small tmpfs; needs root, skipped otherwise), server as a subprocess, kill -9
and restart (issue 14, items 1 and 2; the "disk full" measure).

- natsd: every publish is answered (10023 while the disk is full), nothing acknowledged is lost,
  no acknowledged sequence is used twice, and publishing works again as soon as space returns,
  with no purge and no restart.
- With the default storage limit (75% of the free space at start, as the reference) natsd and
  nats-server both stop at their limit with 10023, side by side.
"""

from __future__ import annotations

import asyncio
import os

import nats
import pytest
from nats.js.errors import APIError

from tests.helpers.diskfull import NoSmallFs, disk_full_run, small_fs
from tests.helpers.servers import reference_binary, start_server

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.timeout(240),
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root"),
]


def test_disk_full_loses_nothing_and_recovers_by_itself(tmp_path):
    try:
        r = disk_full_run("natsd", tmp_path)
    except NoSmallFs as e:
        pytest.skip(str(e))
    assert r["before"] == {"acked": 200}
    # The disk fills: every publish answered, with 10023 once nothing fits (a few may still fit).
    full = r["while_full"]
    assert full.get("unanswered", 0) == 0 and full.get("error 10023", 0) >= 240, full
    # Space is back: no purge, no restart needed.
    assert r["space_back"] == {"acked": 50}
    assert r["after_restart"] == {"acked": 50}
    assert r["unanswered"] == 0
    assert r["lost"] == [] and r["acked_twice"] == 0
    assert sorted(set(r["delivered"])) == sorted(r["acked"])


@pytest.mark.reference
@pytest.mark.skipif(reference_binary() is None, reason="reference nats-server not installed")
@pytest.mark.parametrize("kind", ["natsd", "reference"])
def test_default_limit_stops_with_10023(tmp_path, kind):
    """No max_file_store: the limit is 75% of the free space at start; 4 KB publishes until the
    first refusal, which is 10023 on both servers, near 75% of the file system."""
    try:
        ctx = small_fs(tmp_path / "fs", 8)
        mnt = ctx.__enter__()
    except NoSmallFs as e:
        pytest.skip(str(e))
    try:
        srv = start_server(kind, tmp_path / "logs", store_dir=mnt / "sd")

        async def run() -> tuple[int, list]:
            nc = await nats.connect(srv.url)
            js = nc.jetstream()
            await js.add_stream(name="S", subjects=["s.>"])
            ok, errs = 0, []
            payload = b"x" * 4096
            for _ in range(3000):
                try:
                    await js.publish("s.x", payload, timeout=2)
                    ok += 1
                except APIError as e:
                    errs.append((e.code, e.err_code, e.description))
                    if len(errs) >= 5:
                        break
                except nats.errors.TimeoutError:
                    errs.append("unanswered")
                    break
            await nc.close()
            return ok, errs

        try:
            ok, errs = asyncio.run(run())
        finally:
            srv.stop()
    finally:
        ctx.__exit__(None, None, None)
    assert errs == [(503, 10023, "insufficient resources")] * 5
    stored = ok * (30 + 3 + 4096)
    assert 0.70 * 8 * 2**20 <= stored <= 0.76 * 8 * 2**20, ok


@pytest.mark.reference
@pytest.mark.skipif(reference_binary() is None, reason="reference nats-server not installed")
@pytest.mark.parametrize("kind", ["natsd", "reference"])
def test_default_limit_counts_the_store_as_available_after_a_restart(tmp_path, kind):
    """No max_file_store, a stream holding half of an 8 MB file system, kill -9, restart: the
    limit is 75% of (free space + the store's bytes), as nats-server 2.15 sizes it, so publishing
    goes on (75% of the free space alone is below what the stream holds: every publish would be
    refused with 10023)."""
    import json
    import urllib.request

    from tests.helpers.servers import free_port

    try:
        ctx = small_fs(tmp_path / "fs", 8)
        mnt = ctx.__enter__()
    except NoSmallFs as e:
        pytest.skip(str(e))

    async def publish(url: str, n: int, create: bool) -> tuple[int, list]:
        nc = await nats.connect(url)
        js = nc.jetstream()
        if create:
            await js.add_stream(name="S", subjects=["s.>"])
        ok, errs = 0, []
        for _ in range(n):
            try:
                await js.publish("s.x", b"x" * 4096, timeout=2)
                ok += 1
            except APIError as e:
                errs.append(e.err_code)
        await nc.close()
        return ok, errs

    try:
        srv = start_server(kind, tmp_path / "logs", store_dir=mnt / "sd")
        try:
            assert asyncio.run(publish(srv.url, 1000, True)) == (1000, [])  # ~4.1 MB, under 75% of 8 MB
        finally:
            srv.kill()
        hp = free_port()
        srv = start_server(kind, tmp_path / "logs", "-m", str(hp), store_dir=mnt / "sd")
        try:
            st = os.statvfs(mnt)
            free = st.f_bavail * st.f_frsize
            ok, errs = asyncio.run(publish(srv.url, 20, False))
            with urllib.request.urlopen(f"http://127.0.0.1:{hp}/jsz", timeout=5) as r:
                jsz = json.loads(r.read())
        finally:
            srv.stop()
    finally:
        ctx.__exit__(None, None, None)
    assert (ok, errs) == (20, [])
    stored = jsz["storage"] - 20 * (30 + 3 + 4096)
    assert free * 3 // 4 < stored  # the free space alone would not do
    assert abs(jsz["config"]["max_storage"] - (free + stored) * 3 // 4) < 64 * 1024, (jsz["config"], free, stored)
