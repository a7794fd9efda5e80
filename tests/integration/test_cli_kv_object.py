"""natsctl kv … and object … against the reference nats-server and natsd."""

from __future__ import annotations

import json

from tests.helpers.cli import close_proc, module_server, ok, run_cli, spawn_cli, wait_for_line


server = module_server("cli-kv")


def test_kv_lifecycle(url):
    r = ok(url, "kv", "add", "CFG", "--history", "5")
    assert "Key-Value Store Bucket CFG was created" in r.out and "History Kept: 5" in r.out
    assert ok(url, "kv", "ls", "-j").json() == ["CFG"]
    assert ok(url, "kv", "put", "CFG", "color", "red").out.strip() == "red"
    ok(url, "kv", "put", "CFG", "color", "blue")
    ok(url, "kv", "put", "CFG", "size", stdin="XL")
    e = ok(url, "kv", "get", "CFG", "color", "-j").json()
    assert e["value"] == "blue" and e["revision"] == 2 and e["key"] == "color"
    assert ok(url, "kv", "get", "CFG", "size", "--raw").out == "XL"
    assert ok(url, "kv", "get", "CFG", "color", "--revision", "1", "-j").json()["value"] == "red"
    hist = ok(url, "kv", "history", "CFG", "color", "-j").json()
    assert [(h["revision"], h["value"]) for h in hist] == [(1, "red"), (2, "blue")]
    assert ok(url, "kv", "keys", "CFG", "-j").json() == ["color", "size"]
    st = ok(url, "kv", "status", "CFG", "-j").json()
    assert st["bucket"] == "CFG" and st["history"] == 5 and st["values"] == 3 and st["stream"] == "KV_CFG"

    ok(url, "kv", "del", "CFG", "color", "-f")
    r = run_cli(url, "kv", "get", "CFG", "color")
    assert r.rc == 1 and "color" in r.err
    assert ok(url, "kv", "keys", "CFG", "-j").json() == ["size"]
    ok(url, "kv", "purge", "CFG", "size", "-f")
    assert ok(url, "kv", "keys", "CFG", "-j").json() == []
    r = run_cli(url, "kv", "rm", "CFG")
    assert r.rc == 2 and "--force" in r.err
    ok(url, "kv", "rm", "CFG", "-f")
    assert ok(url, "kv", "ls", "-j").json() == []
    r = run_cli(url, "kv", "get", "CFG", "x")
    assert r.rc == 1 and "bucket CFG not found" in r.err


def test_kv_watch(url):
    ok(url, "kv", "add", "W")
    ok(url, "kv", "put", "W", "existing", "1")
    w = spawn_cli(url, "kv", "watch", "W", "--count", "3", "--wait", "10s", "-j")
    try:
        # the watcher first reports the current value of every key, then changes as they happen
        first = wait_for_line(w, '"existing"')
        ok(url, "kv", "put", "W", "k", "2")
        ok(url, "kv", "del", "W", "k", "-f")
        out, err = w.communicate(timeout=15)
    finally:
        close_proc(w)
    assert w.returncode == 0, err
    # -j on a streaming command: one JSON object per line
    events = [json.loads(line) for line in ("".join(first) + out).splitlines()]
    assert [(e["key"], e["operation"]) for e in events] == [("existing", "PUT"), ("k", "PUT"), ("k", "DEL")]
    assert events[1]["value"] == "2" and "encoding" not in events[1]


def test_object_store(url, tmp_path):
    blob = tmp_path / "blob.bin"
    data = bytes(range(256)) * 1200  # 300 KiB: several chunks
    blob.write_bytes(data)
    r = ok(url, "object", "add", "FILES")
    assert "Object Store Bucket FILES was created" in r.out
    r = ok(url, "obj", "put", "FILES", str(blob))
    assert "Stored blob.bin in bucket FILES" in r.out
    ok(url, "obj", "put", "FILES", "-", "--name", "note.txt", stdin="hello")
    items = ok(url, "obj", "ls", "FILES", "-j").json()
    assert [(i["name"], i["size"]) for i in items] == [("blob.bin", len(data)), ("note.txt", 5)]
    i = ok(url, "obj", "info", "FILES", "blob.bin", "-j").json()
    assert i["size"] == len(data) and i["chunks"] >= 2 and i["digest"].startswith("SHA-256=")
    out = tmp_path / "copy.bin"
    ok(url, "obj", "get", "FILES", "blob.bin", "-O", str(out))
    assert out.read_bytes() == data
    assert ok(url, "obj", "ls", "-j").json() == ["FILES"]
    ok(url, "obj", "rm", "FILES", "note.txt", "-f")
    assert [i["name"] for i in ok(url, "obj", "ls", "FILES", "-j").json()] == ["blob.bin"]
    ok(url, "obj", "seal", "FILES", "-f")
    st = ok(url, "obj", "info", "FILES", "-j").json()
    assert st["sealed"] is True
    r = run_cli(url, "obj", "put", "FILES", str(blob), "--name", "again")
    assert r.rc == 1 and "sealed" in r.err
    ok(url, "obj", "rm", "FILES", "-f")
    assert ok(url, "obj", "ls", "-j").json() == []


def test_object_watch(url, tmp_path):
    ok(url, "obj", "add", "WB")
    w = spawn_cli(url, "obj", "watch", "WB", "--count", "1", "--wait", "10s", "-j")
    try:
        import time

        # the watcher announces nothing; give it time to start (the count makes it exit promptly)
        deadline = time.monotonic() + 10
        got = ""
        while time.monotonic() < deadline and w.poll() is None:
            (tmp_path / "f.txt").write_text("x")
            ok(url, "obj", "put", "WB", str(tmp_path / "f.txt"))
            try:
                got, _ = w.communicate(timeout=1.0)
            except Exception:  # still waiting
                continue
    finally:
        close_proc(w)
    assert json.loads(got.splitlines()[0])["name"] == "f.txt"
