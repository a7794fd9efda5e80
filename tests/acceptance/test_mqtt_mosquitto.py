"""MQTT with Debian's mosquitto-clients against natsd and nats-server subprocesses: a persistent session
(``clean_session=false``) keeps its QoS 1 messages across a kill -9 of the server (both servers);
and one mosquitto_pub/mosquitto_sub script (retained messages at QoS 0/1/2, a refused password, a
will on an abrupt close, wildcard filters with QoS 2) gives the same output from both."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.helpers.mqtt import wait_tcp
from tests.helpers.servers import free_port, reference_binary, start_server

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.timeout(120),
    pytest.mark.skipif(shutil.which("mosquitto_sub") is None, reason="mosquitto-clients not installed"),
]

N = 40


def _conf(tmp_path, kind: str, mqtt_port: int):
    cfg = tmp_path / f"{kind}.conf"
    cfg.write_text(f"server_name: {kind}\nmqtt {{ port: {mqtt_port} }}\n")
    return cfg


def _sub(port: int, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-V", "mqttv311", *args],
        capture_output=True,
        timeout=timeout,
        text=True,
    )


def _pub_lines(port: int, lines: list[str]) -> None:
    # -l: one QoS 1 message per stdin line; mosquitto_pub waits for each PUBACK before exiting
    subprocess.run(
        [
            "mosquitto_pub",
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-V",
            "mqttv311",
            "-i",
            "feeder",
            "-q",
            "1",
            "-t",
            "crash/data",
            "-l",
        ],
        input="\n".join(lines) + "\n",
        text=True,
        check=True,
        timeout=30,
    )


def _session_survives(tmp_path, kind: str) -> list[str]:
    mport = free_port()
    cfg = _conf(tmp_path, kind, mport)
    sd = tmp_path / f"{kind}-store"
    srv = start_server(kind, tmp_path, config=cfg, store_dir=sd)
    wait_tcp(mport)
    try:
        # the persistent session and its QoS 1 subscription (-c: clean session off; -W: leave after 2 s)
        r = _sub(mport, "-i", "dev", "-c", "-q", "1", "-t", "crash/#", "-W", "2")
        assert r.returncode in (0, 27), r.stderr  # 27: mosquitto_sub's "timed out" exit
        _pub_lines(mport, [f"m{i}" for i in range(N)])
    finally:
        srv.kill()  # SIGKILL: no shutdown, no flush beyond what PUBACK promised
    srv = start_server(kind, tmp_path, config=cfg, store_dir=sd, port=srv.port)
    wait_tcp(mport)
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


def _mosquitto_script(tmp_path, kind: str) -> dict:
    """The same mosquitto_pub/mosquitto_sub session against one server (a subprocess)."""
    mport = free_port()
    cfg = tmp_path / f"{kind}-m.conf"
    cfg.write_text(
        f"server_name: {kind}\nauthorization {{ users: [ {{user: dev, password: pw}} ] }}\nmqtt {{ port: {mport} }}\n"
    )
    srv = start_server(kind, tmp_path, config=cfg, store_dir=tmp_path / f"{kind}-m-store")
    wait_tcp(mport)
    out: dict = {}
    auth = ["-u", "dev", "-P", "pw"]
    try:
        pub = ["mosquitto_pub", "-h", "127.0.0.1", "-p", str(mport), "-V", "mqttv311", *auth]
        # retained messages at QoS 0, 1 and 2, then a fresh subscriber sees them (-v: "topic payload")
        for q in (0, 1, 2):
            subprocess.run(pub + ["-q", str(q), "-r", "-t", f"ret/q{q}", "-m", f"kept{q}"], check=True, timeout=10)
        r = _sub(mport, *auth, "-v", "-q", "2", "-t", "ret/#", "-C", "3", "-W", "10")
        out["retained"] = (r.returncode, sorted(r.stdout.splitlines()))
        # a wrong password: CONNACK 5
        r = _sub(mport, "-u", "dev", "-P", "nope", "-t", "x", "-C", "1", "-W", "5")
        out["bad password"] = (
            r.returncode,
            "not authorised" in r.stderr.lower() or "not authorized" in r.stderr.lower(),
        )
        # a will: a subscriber with a will killed abruptly -> the will reaches a watcher
        watcher = subprocess.Popen(
            [
                "mosquitto_sub",
                "-h",
                "127.0.0.1",
                "-p",
                str(mport),
                "-V",
                "mqttv311",
                *auth,
                "-v",
                "-t",
                "wills/#",
                "-C",
                "1",
                "-W",
                "15",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        dying = subprocess.Popen(
            [
                "mosquitto_sub",
                "-h",
                "127.0.0.1",
                "-p",
                str(mport),
                "-V",
                "mqttv311",
                *auth,
                "-i",
                "dying",
                "--will-topic",
                "wills/dying",
                "--will-payload",
                "gone",
                "-t",
                "nothing",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import time

        time.sleep(1.0)
        dying.kill()  # SIGKILL: no DISCONNECT
        dying.wait()
        o, _ = watcher.communicate(timeout=20)
        out["will"] = (watcher.returncode, o.split())
        # wildcard filters and a QoS 2 publish through to a QoS 2 subscriber
        sub = subprocess.Popen(
            [
                "mosquitto_sub",
                "-h",
                "127.0.0.1",
                "-p",
                str(mport),
                "-V",
                "mqttv311",
                *auth,
                "-v",
                "-q",
                "2",
                "-t",
                "w/+/c",
                "-t",
                "deep/#",
                "-C",
                "3",
                "-W",
                "15",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.0)
        for t in ("w/b/c", "w/b/d", "deep", "deep/er/still"):
            subprocess.run(pub + ["-q", "2", "-t", t, "-m", t.replace("/", "-")], check=True, timeout=10)
        o, _ = sub.communicate(timeout=20)
        out["wildcards"] = (sub.returncode, sorted(o.splitlines()))
    finally:
        srv.stop()
    return out


@pytest.mark.reference
@pytest.mark.skipif(reference_binary() is None, reason="reference nats-server not installed")
def test_mosquitto_clients_side_by_side(tmp_path):
    expected = _mosquitto_script(tmp_path, "reference")
    got = _mosquitto_script(tmp_path, "natsd")
    assert got == expected
    assert expected["retained"] == (0, ["ret/q0 kept0", "ret/q1 kept1", "ret/q2 kept2"])
    assert expected["will"] == (0, ["wills/dying", "gone"])
    assert expected["wildcards"] == (0, ["deep deep", "deep/er/still deep-er-still", "w/b/c w-b-c"])
