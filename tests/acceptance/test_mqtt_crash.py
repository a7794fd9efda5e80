"""MQTT with Debian's mosquitto-clients against a natsd subprocess: a persistent session
(``clean_session=false``) keeps its QoS 1 messages across a kill -9 of the server; and the same
clients against nats-server behave alike."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.helpers.servers import free_port, reference_binary, start_server

pytestmark = [pytest.mark.acceptance, pytest.mark.timeout(120),
              pytest.mark.skipif(shutil.which("mosquitto_sub") is None, reason="mosquitto-clients not installed")]

N = 40


def _conf(tmp_path, kind: str, mqtt_port: int):
    cfg = tmp_path / f"{kind}.conf"
    cfg.write_text(f"server_name: {kind}\nmqtt {{ port: {mqtt_port} }}\n")
    return cfg


def _sub(port: int, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-V", "mqttv311", *args],
                          capture_output=True, timeout=timeout, text=True)


def _pub_lines(port: int, lines: list[str]) -> None:
    # -l: one QoS 1 message per stdin line; mosquitto_pub waits for each PUBACK before exiting
    subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port), "-V", "mqttv311", "-i", "feeder",
                    "-q", "1", "-t", "crash/data", "-l"], input="\n".join(lines) + "\n", text=True,
                   check=True, timeout=30)


def _session_survives(tmp_path, kind: str) -> list[str]:
    mport = free_port()
    cfg = _conf(tmp_path, kind, mport)
    sd = tmp_path / f"{kind}-store"
    srv = start_server(kind, tmp_path, config=cfg, store_dir=sd)
    try:
        # the persistent session and its QoS 1 subscription (-c: clean session off; -W: leave after 2 s)
        r = _sub(mport, "-i", "dev", "-c", "-q", "1", "-t", "crash/#", "-W", "2")
        assert r.returncode in (0, 27), r.stderr  # 27: mosquitto_sub's "timed out" exit
        _pub_lines(mport, [f"m{i}" for i in range(N)])
    finally:
        srv.kill()  # SIGKILL: no shutdown, no flush beyond what PUBACK promised
    srv = start_server(kind, tmp_path, config=cfg, store_dir=sd, port=srv.port)
    try:
        r = _sub(mport, "-i", "dev", "-c", "-q", "1", "-t", "crash/#", "-C", str(N), "-W", "30")
        assert r.returncode == 0, (r.returncode, r.stderr, srv.log()[-3000:])
        return r.stdout.split()
    finally:
        srv.stop()


def test_qos1_messages_of_a_persistent_session_survive_kill9(tmp_path):
    got = _session_survives(tmp_path, "natsd")
    assert sorted(got) == sorted(f"m{i}" for i in range(N))


@pytest.mark.reference
@pytest.mark.skipif(reference_binary() is None, reason="reference nats-server not installed")
def test_same_clients_against_nats_server(tmp_path):
    assert sorted(_session_survives(tmp_path, "reference")) == sorted(f"m{i}" for i in range(N))
