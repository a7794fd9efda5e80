"""Driver-side planning goes through nats-py (issue 11 item 8): stream state and names, time ->
sequence and credentials, against nats-server and natsd with user/password authorization. The
data path (read_range, the task's own socket) authenticates with the same options."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone

import pytest

from tests.helpers.servers import reference_binary, start_server

pytestmark = [pytest.mark.spark]


@pytest.fixture(scope="module", params=[pytest.param("reference", marks=pytest.mark.reference), "natsd"])
def auth_server(request, tmp_path_factory):
    kind = request.param
    if kind == "reference" and reference_binary() is None:
        pytest.skip("reference nats-server binary not installed")
    srv = start_server(kind, tmp_path_factory.mktemp(f"plan-{kind}"), "--user", "sparky", "--pass", "s3cret")
    yield srv
    srv.stop()


def _fill(url: str) -> datetime:
    import nats

    async def go():
        nc = await nats.connect(url, user="sparky", password="s3cret")
        js = nc.jetstream()
        await js.add_stream(name="PLAN", subjects=["plan.>"])
        for i in range(5):
            await js.publish("plan.a", b"%d" % i)
        await asyncio.sleep(0.05)
        cut = datetime.now(timezone.utc)
        await asyncio.sleep(0.05)
        for i in range(5, 8):
            await js.publish("plan.b", b"%d" % i)
        await nc.close()
        return cut

    return asyncio.run(go())


def test_planning_through_nats_py_with_credentials(auth_server):
    from natsd.spark.jsapi import JSApiError, stream_names, stream_state
    from natsd.spark.options import parse_timestamp
    from natsd.spark.planner import Planner
    from natsd.spark.reader import RangeSpec, read_range
    from natsd.spark.wire import ConnectOptions, NatsError

    cut = _fill(auth_server.url)
    good = ConnectOptions(servers=auth_server.url, user="sparky", password="s3cret")
    with Planner(good) as p:
        st = stream_state(p, "PLAN")
        assert (st.first_seq, st.last_seq, st.messages) == (1, 8, 8) and st.created
        assert stream_names(p) == ["PLAN"] and stream_names(p, "plan.zzz") == ["PLAN"]
        assert stream_names(p, "other.x") == []
        assert p.first_seq_at_or_after("PLAN", parse_timestamp(cut.isoformat(), "t")) == 6
        assert p.first_seq_at_or_after("PLAN", parse_timestamp(str(int(time.time() * 1000) + 60_000), "t")) is None
        with pytest.raises(JSApiError, match="stream 'NOPE' not found"):
            stream_state(p, "NOPE")
    # The data path authenticates with the same options.
    rows = sum(b.num_rows for b in read_range(good, RangeSpec("PLAN", 2, 7)))
    assert rows == 6
    with pytest.raises(NatsError, match="could not connect"):
        Planner(ConnectOptions(servers=auth_server.url, user="sparky", password="wrong"), timeout=5)
