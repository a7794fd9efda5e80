"""Accounts with JetStream limits through a real server: the seeds' ``accounts { HR: { jetstream {
max_mem, max_file, max_streams, max_consumers } } }``, enforced with the reference's error codes,
per-account store directories, isolation, ``$JS.API.INFO`` usage against limits, and the system
account refused JetStream."""

from __future__ import annotations

import json
import logging
import os

import nats
import pytest

from natsd.config import options_from_tree, parse
from natsd.config.options import AccountJetStreamLimits, AccountOptions, ServerOptions, UserOptions
from tests.helpers.inproc import running_server

pytestmark = pytest.mark.integration

KB = 1024
MB = 1024 * 1024

SEED_CONF = """
jetstream {
    store_dir: %s
    max_mem: 1G
    max_file: 100G
}
accounts {
    HR: {
        jetstream {
            max_mem: 512M
            max_file: 1G
            max_streams: 10
            max_consumers: 100
        }
        users: [{user: hr, password: hrpw}]
    }
    ENG: {
        jetstream: enabled
        users: [{user: eng, password: engpw}]
    }
}
"""


def _options(
    store_dir: str, hr: AccountJetStreamLimits, extra: list[AccountOptions] | None = None, system_account: str = ""
) -> ServerOptions:
    o = ServerOptions(host="127.0.0.1", port=0)
    o.jetstream.enabled = True
    o.jetstream.store_dir = store_dir
    o.jetstream.max_memory_store = 64 * MB
    o.jetstream.max_file_store = 1024 * MB
    o.accounts = [
        AccountOptions("HR", [UserOptions("hr", "hrpw", account="HR")], hr),
        AccountOptions("ENG", [UserOptions("eng", "engpw", account="ENG")], AccountJetStreamLimits()),
    ] + (extra or [])
    o.users = [u for a in o.accounts for u in a.users]
    o.system_account = system_account
    return o


async def _api(nc, subject: str, body: dict | bytes = b"") -> dict:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return json.loads((await nc.request(subject, data, timeout=5)).data)


async def _connect(server, user: str, pw: str):
    return await nats.connect(server.client_url, user=user, password=pw, allow_reconnect=False)


def test_seed_config_text_gives_the_account_limits(tmp_path):
    o = options_from_tree(parse(SEED_CONF % json.dumps(str(tmp_path))))
    # nats-server sizes: K/M/G are powers of 1000, KB/MB/GB powers of 1024
    assert o.jetstream.enabled and o.jetstream.max_memory_store == 10**9
    accs = {a.name: a for a in o.accounts}
    hr = accs["HR"].jetstream
    assert (hr.max_memory, hr.max_storage, hr.max_streams, hr.max_consumers) == (512 * 10**6, 10**9, 10, 100)
    eng = accs["ENG"].jetstream
    assert eng is not None and eng.max_memory == -1 and eng.max_streams == -1


async def test_seed_config_serves_jetstream_per_account(tmp_path):
    o = options_from_tree(parse(SEED_CONF % json.dumps(str(tmp_path / "js"))))
    o.host, o.port = "127.0.0.1", 0
    async with running_server(options=o) as server:
        nc = await _connect(server, "hr", "hrpw")
        info = await _api(nc, "$JS.API.INFO")
        assert info["limits"]["max_memory"] == 512 * 10**6 and info["limits"]["max_storage"] == 10**9
        assert info["limits"]["max_streams"] == 10 and info["limits"]["max_consumers"] == 100
        await nc.close()


async def test_account_limits_enforced_with_reference_errors(tmp_path):
    hr = AccountJetStreamLimits(max_memory=64 * KB, max_storage=256 * KB, max_streams=2, max_consumers=2)
    async with running_server(options=_options(str(tmp_path / "js"), hr)) as server:
        nc = await _connect(server, "hr", "hrpw")
        js = nc.jetstream()
        await js.add_stream(name="A", subjects=["a.>"])
        await js.add_stream(name="B", subjects=["b.>"], storage="memory")
        out = await _api(nc, "$JS.API.STREAM.CREATE.C", {"name": "C", "subjects": ["c.>"]})
        assert out["error"] == {"code": 400, "err_code": 10027, "description": "maximum number of streams reached"}
        await js.delete_stream("B")

        # reservations above the account's storage / memory
        out = await _api(nc, "$JS.API.STREAM.CREATE.BIG", {"name": "BIG", "subjects": ["big.>"], "max_bytes": 512 * KB})
        assert out["error"] == {
            "code": 500,
            "err_code": 10047,
            "description": "insufficient storage resources available",
        }
        out = await _api(
            nc,
            "$JS.API.STREAM.CREATE.MEM",
            {"name": "MEM", "subjects": ["mem.>"], "storage": "memory", "max_bytes": 128 * KB},
        )
        assert out["error"] == {
            "code": 500,
            "err_code": 10028,
            "description": "insufficient memory resources available",
        }

        # consumers: 2 allowed in the account
        await js.add_consumer("A", durable_name="C1", ack_policy="explicit")
        await js.add_consumer("A", durable_name="C2", ack_policy="explicit")
        out = await _api(
            nc,
            "$JS.API.CONSUMER.CREATE.A.C3",
            {"stream_name": "A", "config": {"durable_name": "C3", "ack_policy": "explicit"}},
        )
        assert out["error"] == {"code": 400, "err_code": 10026, "description": "maximum consumers limit reached"}

        # storage: publishing past max_file is refused with 10002
        body = b"x" * 1000
        last_err = None
        for i in range(400):
            msg = await nc.request("a.x", body, timeout=5)
            r = json.loads(msg.data)
            if "error" in r:
                last_err = r["error"]
                break
        assert last_err == {"code": 400, "err_code": 10002, "description": "resource limits exceeded for account"}
        info = await _api(nc, "$JS.API.INFO")
        assert info["storage"] <= 256 * KB
        # memory: publishing past max_mem is refused the same way
        await js.add_stream(name="MEMS", subjects=["mems.>"], storage="memory")
        last_err = None
        for i in range(100):
            r = json.loads((await nc.request("mems.x", body, timeout=5)).data)
            if "error" in r:
                last_err = r["error"]
                break
        assert last_err == {"code": 400, "err_code": 10002, "description": "resource limits exceeded for account"}
        assert (await _api(nc, "$JS.API.INFO"))["memory"] <= 64 * KB
        await nc.close()


async def test_each_account_has_its_own_store_dir_and_never_sees_others_streams(tmp_path):
    store = str(tmp_path / "js")
    async with running_server(options=_options(store, AccountJetStreamLimits())) as server:
        hr = await _connect(server, "hr", "hrpw")
        eng = await _connect(server, "eng", "engpw")
        await hr.jetstream().add_stream(name="ORDERS", subjects=["orders.>"])
        await hr.jetstream().add_stream(name="PAYROLL", subjects=["payroll.>"])
        # the same name and subjects in another account are a different stream
        await eng.jetstream().add_stream(name="ORDERS", subjects=["orders.>"])
        assert (await hr.jetstream().publish("orders.1", b"hr")).seq == 1
        assert (await hr.jetstream().publish("orders.2", b"hr")).seq == 2
        assert (await eng.jetstream().publish("orders.1", b"eng")).seq == 1
        names = await _api(eng, "$JS.API.STREAM.NAMES")
        assert names["streams"] == ["ORDERS"]
        assert (await _api(eng, "$JS.API.STREAM.INFO.PAYROLL"))["error"]["err_code"] == 10059
        assert (await eng.jetstream().stream_info("ORDERS")).state.messages == 1
        assert (await hr.jetstream().stream_info("ORDERS")).state.messages == 2
        m = await eng.jetstream().get_msg("ORDERS", 1)
        assert m.data == b"eng"
        eng_info = await _api(eng, "$JS.API.INFO")
        assert eng_info["streams"] == 1
        # "jetstream: enabled" -> no limits of its own
        assert (eng_info["limits"]["max_streams"], eng_info["limits"]["max_storage"]) == (-1, -1)
        assert (await _api(hr, "$JS.API.INFO"))["streams"] == 2
        await hr.close()
        await eng.close()
    base = os.path.join(store, "jetstream")
    assert sorted(os.listdir(os.path.join(base, "HR", "streams"))) == ["ORDERS", "PAYROLL"]
    assert sorted(os.listdir(os.path.join(base, "ENG", "streams"))) == ["ORDERS"]
    # and each account recovers only its own streams
    async with running_server(options=_options(store, AccountJetStreamLimits())) as server:
        eng = await _connect(server, "eng", "engpw")
        assert (await _api(eng, "$JS.API.STREAM.NAMES"))["streams"] == ["ORDERS"]
        await eng.close()


async def test_account_info_reports_usage_against_limits(tmp_path):
    hr = AccountJetStreamLimits(max_memory=8 * MB, max_storage=32 * MB, max_streams=5, max_consumers=7)
    async with running_server(options=_options(str(tmp_path / "js"), hr)) as server:
        nc = await _connect(server, "hr", "hrpw")
        js = nc.jetstream()
        await js.add_stream(name="F", subjects=["f.>"], max_bytes=4 * MB)
        await js.add_stream(name="M", subjects=["m.>"], storage="memory")
        for i in range(10):
            await js.publish("f.x", b"y" * 100)
            await js.publish("m.x", b"y" * 100)
        await js.add_consumer("F", durable_name="D", ack_policy="explicit")
        info = await _api(nc, "$JS.API.INFO")
        assert info["type"] == "io.nats.jetstream.api.v1.account_info_response"
        f = await js.stream_info("F")
        m = await js.stream_info("M")
        assert info["storage"] == f.state.bytes > 1000
        assert info["memory"] == m.state.bytes > 1000
        assert info["reserved_storage"] == 4 * MB
        assert info["streams"] == 2 and info["consumers"] == 1
        lim = info["limits"]
        assert (lim["max_memory"], lim["max_storage"], lim["max_streams"], lim["max_consumers"]) == (
            8 * MB,
            32 * MB,
            5,
            7,
        )
        await nc.close()


async def test_account_without_jetstream_is_told_so(tmp_path):
    extra = [AccountOptions("NOJS", [UserOptions("nojs", "pw", account="NOJS")], None)]
    async with running_server(options=_options(str(tmp_path / "js"), AccountJetStreamLimits(), extra)) as server:
        nc = await _connect(server, "nojs", "pw")
        try:
            out = await _api(nc, "$JS.API.INFO")
        finally:
            await nc.close()
        assert out["error"] == {"code": 503, "err_code": 10039, "description": "JetStream not enabled for account"}


async def test_system_account_is_refused_jetstream_with_a_warning(tmp_path, caplog):
    extra = [AccountOptions("SYS", [UserOptions("sys", "pw", account="SYS")], AccountJetStreamLimits())]
    opts = _options(str(tmp_path / "js"), AccountJetStreamLimits(), extra, system_account="SYS")
    with caplog.at_level(logging.WARNING):
        async with running_server(options=opts) as server:
            assert server.get_account("HR").jetstream is not None
            assert server.get_account("SYS").jetstream is None
    assert "Not allowed to enable JetStream on the system account" in caplog.text
