"""Mirror promotion without sockets: a STREAM.UPDATE that drops ``mirror`` turns the mirror into
a normal stream (2.12+): its messages stay, its consumer on the origin goes, nothing more is
copied, it takes publishes on its (new or default) subjects, and all of that survives a
restart; changing the mirror instead is refused (10055)."""

from __future__ import annotations

import pytest

from natsd.jetstream.config.models import SECOND

pytestmark = pytest.mark.unit


def state(env, name):
    st = env.api(f"$JS.API.STREAM.INFO.{name}")["state"]
    return st["messages"], st["first_seq"], st["last_seq"]


def test_promote_mirror(env):
    env.create("O", storage="file")
    for i in range(3):
        env.pub("o.x", b"m%d" % i)
    cfg = env.api("$JS.API.STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}, "storage": "file"})["config"]
    env.clock.advance(SECOND // 10)
    assert state(env, "M") == (3, 1, 3)
    assert env.api("$JS.API.STREAM.INFO.O")["state"]["consumer_count"] == 1  # the mirror's consumer
    bad = env.api("$JS.API.STREAM.UPDATE.M", {**cfg, "mirror": {"name": "O", "filter_subject": "o.y"}})
    assert bad["error"]["err_code"] == 10055
    bad = env.api("$JS.API.STREAM.UPDATE.M", {**cfg, "subjects": ["m.>"]})
    assert bad["error"]["err_code"] == 10034
    promoted = {k: v for k, v in cfg.items() if k != "mirror"}
    r = env.api("$JS.API.STREAM.UPDATE.M", {**promoted, "subjects": ["m.>"]})
    assert "error" not in r and "mirror" not in r and "mirror" not in r["config"]
    assert r["config"]["subjects"] == ["m.>"] and r["config"]["duplicate_window"] == 120 * SECOND
    assert env.api("$JS.API.STREAM.INFO.O")["state"]["consumer_count"] == 0  # its consumer went
    assert env.pub("m.x", b"own") == {"stream": "M", "seq": 4}
    env.pub("o.x", b"not copied")
    env.clock.advance(SECOND)
    assert state(env, "M") == (4, 1, 4)
    env.restart()
    env.clock.advance(SECOND)
    info = env.api("$JS.API.STREAM.INFO.M")
    assert "mirror" not in info and info["config"]["subjects"] == ["m.>"]
    assert state(env, "M") == (4, 1, 4)
    assert env.pub("m.y", b"after restart") == {"stream": "M", "seq": 5}
    # a mirror cannot come back
    assert (
        env.api("$JS.API.STREAM.UPDATE.M", {**promoted, "subjects": ["m.>"], "mirror": {"name": "O"}})["error"][
            "err_code"
        ]
        == 10034
    )


def test_promote_without_subjects_defaults_to_the_name(env):
    env.create("O", storage="memory")
    cfg = env.api("$JS.API.STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}, "storage": "memory"})["config"]
    r = env.api("$JS.API.STREAM.UPDATE.M", {k: v for k, v in cfg.items() if k != "mirror"})
    assert r["config"]["subjects"] == ["M"]
    assert env.pub("M", b"x") == {"stream": "M", "seq": 1}
