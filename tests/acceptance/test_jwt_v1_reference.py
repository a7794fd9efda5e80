"""v1 JWTs (operator, accounts, users; ``"alg":"ed25519"``) in a configuration like nats-py's
tests/nkeys/resolver_preload.conf, against nats-server and natsd: the check passes, v1 ``.creds``
users connect to their own account, a forged one is refused, and a leaf links with v1 creds."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nats
import nkeys
import pytest

from tests.helpers.jwtgen import new_key, operator_setup_v1
from tests.helpers.servers import free_port, reference_binary, start_server

pytestmark = [pytest.mark.acceptance, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]


def _kinds() -> list:
    return [pytest.param("reference", marks=pytest.mark.reference), "natsd"]


def _skip_missing(kind: str) -> None:
    if kind == "reference" and reference_binary() is None:
        pytest.skip("reference nats-server binary not installed")


def test_natsd_check_accepts_the_v1_configuration(tmp_path):
    ids = operator_setup_v1(tmp_path)
    env_path = str(REPO / "src")
    r = subprocess.run(
        [sys.executable, "-m", "natsd", "-t", "-c", ids["conf_path"]],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0, r.stderr
    assert "is valid" in r.stderr


async def _roundtrip(url: str, creds: str, subject: str) -> bytes:
    nc = nats.NATS()
    try:
        await nc.connect(url, user_credentials=creds, allow_reconnect=False, max_reconnect_attempts=0)
    except Exception:
        await nc.close()  # (a refused connect leaves its socket to the caller)
        raise
    try:
        sub = await nc.subscribe(subject)
        await nc.publish(subject, b"v1")
        return (await sub.next_msg(timeout=5)).data
    finally:
        await nc.close()


async def _isolated(url: str, creds_a: str, creds_b: str) -> bool:
    """What account foo publishes, account bar does not see."""
    a = await nats.connect(url, user_credentials=creds_a, allow_reconnect=False)
    b = await nats.connect(url, user_credentials=creds_b, allow_reconnect=False)
    try:
        sub = await b.subscribe("iso")
        await b.flush()
        await a.publish("iso", b"x")
        await a.flush()
        try:
            await sub.next_msg(timeout=0.5)
            return False
        except nats.errors.TimeoutError:
            return True
    finally:
        await a.close()
        await b.close()


@pytest.mark.parametrize("kind", _kinds())
async def test_v1_operator_accounts_and_creds(tmp_path, kind):
    _skip_missing(kind)
    ids = operator_setup_v1(tmp_path)
    srv = start_server(kind, tmp_path / kind, config=ids["conf_path"], jetstream=False)
    try:
        assert await _roundtrip(srv.url, ids["creds"]["foo"], "hello") == b"v1"
        assert await _roundtrip(srv.url, ids["creds"]["bar"], "hello") == b"v1"
        assert await _isolated(srv.url, ids["creds"]["foo"], ids["creds"]["bar"])
        # the same user JWT with another user's seed: refused as by any server
        forged = tmp_path / "forged.creds"
        lines = Path(ids["creds"]["foo"]).read_text().splitlines()
        i = next(i for i, ln in enumerate(lines) if ln.startswith("SU"))
        lines[i] = new_key(nkeys.PREFIX_BYTE_USER)[1].decode()
        forged.write_text("\n".join(lines) + "\n")
        with pytest.raises(Exception) as ei:
            await _roundtrip(srv.url, str(forged), "hello")
        assert "uthorization" in f"{ei.value!r} {ei.value}" or isinstance(ei.value, nats.errors.NoServersError)
    finally:
        srv.stop()


def _leafz(http_port: int) -> list:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/leafz", timeout=2) as r:
            return json.loads(r.read()).get("leafs") or []
    except OSError:
        return []


@pytest.mark.parametrize(
    "hub_kind,leaf_kind",
    [
        pytest.param("reference", "natsd", marks=pytest.mark.reference),
        pytest.param("natsd", "reference", marks=pytest.mark.reference),
        ("natsd", "natsd"),
    ],
)
async def test_leaf_links_with_v1_creds(tmp_path, hub_kind, leaf_kind):
    _skip_missing("reference" if "reference" in (hub_kind, leaf_kind) else "natsd")
    ids = operator_setup_v1(tmp_path)
    leaf_port, http = free_port(), free_port()
    hub_conf = tmp_path / "hub.conf"
    hub_conf.write_text(
        Path(ids["conf_path"]).read_text() + f"server_name: HUB\nhttp_port: {http}\nleafnodes {{ port: {leaf_port} }}\n"
    )
    hub = start_server(hub_kind, tmp_path / "hub", config=str(hub_conf), jetstream=False)
    try:
        leaf_conf = tmp_path / "leaf.conf"
        leaf_conf.write_text(
            f'server_name: LEAF\nleafnodes {{ reconnect: "250ms", remotes: [ {{ '
            f'url: "nats-leaf://127.0.0.1:{leaf_port}", credentials: "{ids["creds"]["foo"]}" }} ] }}\n'
        )
        leaf = start_server(leaf_kind, tmp_path / "leaf", config=str(leaf_conf), jetstream=False)
        try:
            deadline = time.monotonic() + 15
            while not (links := await asyncio.to_thread(_leafz, http)):
                assert time.monotonic() < deadline, leaf.log()
                await asyncio.sleep(0.1)
            assert links[0]["account"] == ids["accounts"]["foo"]
            # a message published on the leaf reaches account foo on the hub
            hub_nc = await nats.connect(hub.url, user_credentials=ids["creds"]["foo"])
            leaf_nc = await nats.connect(leaf.url)
            try:
                sub = await hub_nc.subscribe("across")
                await hub_nc.flush()
                deadline = time.monotonic() + 10
                got = None
                while got is None:
                    await leaf_nc.publish("across", b"from-leaf")
                    try:
                        got = await sub.next_msg(timeout=0.3)
                    except nats.errors.TimeoutError:
                        assert time.monotonic() < deadline
                assert got.data == b"from-leaf"
            finally:
                await leaf_nc.close()
                await hub_nc.close()
        finally:
            leaf.stop()
    finally:
        hub.stop()
