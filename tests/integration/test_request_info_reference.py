"""``Nats-Request-Info`` (nats-server's ClientInfo header): a request crossing a service import
carries its requester's account and RTT, and with the import's ``share`` its details (name,
language, version, user, JWT and its issuer, connection kind...). The same operator-mode
configuration and client script against nats-server and natsd; volatile values (times, ids) are
compared by presence only."""

from __future__ import annotations

import asyncio
import json

import nats
import pytest

from tests.helpers.identities import Identity, account_claims, operator_setup
from tests.helpers.inproc import side_by_side

pytestmark = [pytest.mark.integration, pytest.mark.reference, pytest.mark.timeout(60)]

_VOLATILE = {"start", "rtt", "id"}  # (compared by presence)


def _setup():
    setup = operator_setup()
    op = setup.operator
    a, b = Identity.new("account"), Identity.new("account")
    exports = [{"subject": "svc.>", "type": "service"}, {"subject": "store.>", "type": "service"}]
    imports = [
        {"subject": "svc.plain", "account": a.public, "type": "service"},
        {"subject": "svc.shared", "account": a.public, "type": "service", "share": True},
        {"subject": "store.x", "account": a.public, "type": "service"},
    ]
    js = {"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}
    setup.accounts = {
        "A": (a, op.sign(account_claims(a, "A", exports=exports, jetstream=js))),
        "B": (b, op.sign(account_claims(b, "B", imports=imports))),
    }
    return setup, {a.public: "A", b.public: "B"}


async def test_request_info_matches_reference(tmp_path):
    setup, names = _setup()
    ca, cb = tmp_path / "a.creds", tmp_path / "b.creds"
    ca.write_text(setup.creds("A"))
    cb.write_text(setup.creds("B"))

    async def observe(url: str) -> list:
        na = await nats.connect(url, user_credentials=str(ca), name="service")
        nb = await nats.connect(url, user_credentials=str(cb), name="requester")
        seen: list = []
        try:

            async def on_req(m):
                raw = (m.headers or {}).get("Nats-Request-Info")
                info = json.loads(raw) if raw else None
                if info is not None:
                    info = {k: (True if k in _VOLATILE else names.get(v, v)) for k, v in info.items()}
                    info["keys"] = list(json.loads(raw))  # (nats-server's order)
                seen.append((m.subject, info))
                await m.respond(b"ok")

            await na.subscribe("svc.*", cb=on_req)
            await na.flush()
            for _ in range(50):  # (the import's first use: the exporter's claims may load meanwhile)
                try:
                    await nb.request("svc.plain", b"warm-up", timeout=2)
                    break
                except nats.errors.NoRespondersError:
                    await asyncio.sleep(0.05)
            seen.clear()
            await nb.request("svc.plain", b"x", timeout=2)
            await nb.request("svc.shared", b"x", timeout=2)
            # A requester's own Nats-Request-Info is replaced by the server's.
            await nb.request("svc.plain", b"x", timeout=2, headers={"Nats-Request-Info": '{"acc":"forged"}'})
            # A stream behind the import stores the request without it (as nats-server).
            await na.jetstream().add_stream(name="S", subjects=["store.>"])
            await nb.request("store.x", b"x", timeout=2)
            await nb.request("store.x", b"y", timeout=2, headers={"X": "1"})
            stored = [dict((await na.jetstream().get_msg("S", i)).headers or {}) for i in (1, 2)]
            await asyncio.sleep(0.1)
            return [*seen, stored]
        finally:
            await na.close()
            await nb.close()

    expected, got = await side_by_side(tmp_path, observe, config="server_name: S\n" + setup.config())
    assert expected[0][1]["acc"] == "B" and "name" not in expected[0][1]
    assert expected[1][1]["name"] == "requester" and expected[1][1]["kind"] == "Client"
    assert expected[2][1]["acc"] == "B"
    assert expected[3] == [{}, {"X": "1"}]
    assert got == expected


async def test_chained_imports_name_the_crossed_account(tmp_path):
    """C imports a service B imports from A: the service in A sees the header of the first
    import, naming B (the account it crossed from) in ``svc``."""
    setup = operator_setup()
    op = setup.operator
    a, b, c = Identity.new("account"), Identity.new("account"), Identity.new("account")
    setup.accounts = {
        "A": (a, op.sign(account_claims(a, "A", exports=[{"subject": "chain", "type": "service"}]))),
        "B": (
            b,
            op.sign(
                account_claims(
                    b,
                    "B",
                    exports=[{"subject": "chain", "type": "service"}],
                    imports=[{"subject": "chain", "account": a.public, "type": "service"}],
                )
            ),
        ),
        "C": (
            c,
            op.sign(account_claims(c, "C", imports=[{"subject": "chain", "account": b.public, "type": "service"}])),
        ),
    }
    names = {a.public: "A", b.public: "B", c.public: "C"}
    ca, cc = tmp_path / "a.creds", tmp_path / "c.creds"
    ca.write_text(setup.creds("A"))
    cc.write_text(setup.creds("C"))

    async def observe(url: str) -> list:
        na = await nats.connect(url, user_credentials=str(ca), name="service")
        nc = await nats.connect(url, user_credentials=str(cc), name="requester")
        seen: list = []
        try:

            async def on_req(m):
                raw = (m.headers or {}).get("Nats-Request-Info")
                info = json.loads(raw) if raw else {}
                seen.append({k: (True if k in _VOLATILE else names.get(v, v)) for k, v in info.items()})
                await m.respond(b"ok")

            await na.subscribe("chain", cb=on_req)
            await na.flush()
            for _ in range(50):
                try:
                    await nc.request("chain", b"x", timeout=2)
                    break
                except nats.errors.NoRespondersError:
                    await asyncio.sleep(0.05)
            await asyncio.sleep(0.1)
            return seen[-1:]
        finally:
            await na.close()
            await nc.close()

    expected, got = await side_by_side(tmp_path, observe, config="server_name: S\n" + setup.config())
    assert expected == [{"acc": "C", "svc": "B", "rtt": True}]
    assert got == expected
