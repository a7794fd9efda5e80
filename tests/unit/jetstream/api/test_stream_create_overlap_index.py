"""STREAM.CREATE checks a new stream's subjects against the others' (10065) with an index kept
between creates (``StreamSubjects``): it answers as the per-stream check does through creates,
updates that move subjects, deletes and re-creates, and a create among many streams asks it a
number of questions that does not grow with their count (1,000 creates were quadratic, issue 31)."""

from __future__ import annotations

import random

import pytest

from natsd.jetstream.config.models import StreamConfig
from natsd.jetstream.config.stream_checks import StreamSubjects, check_subject_overlap
from natsd.jetstream.errors import ApiError
from natsd.subjects.overlap import OverlapTrie
from tests.helpers.fakeports import JsEnv

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]

OVERLAP = {"code": 400, "err_code": 10065, "description": "subjects overlap with an existing stream"}


@pytest.fixture
def env(tmp_path):
    e = JsEnv(str(tmp_path))
    yield e
    e.stop()


def _create(env, name, subjects):
    return env.api(f"$JS.API.STREAM.CREATE.{name}", {"name": name, "subjects": subjects, "storage": "memory"})


def _update(env, name, subjects):
    return env.api(f"$JS.API.STREAM.UPDATE.{name}", {"name": name, "subjects": subjects, "storage": "memory"})


def test_creates_updates_and_deletes(env):
    assert "error" not in _create(env, "S1", ["s1.>"])
    assert "error" not in _create(env, "S2", ["s2.*", "x.y"])
    assert _create(env, "S3", ["s1.a"])["error"] == OVERLAP
    assert _create(env, "S3", ["s1.*"])["error"] == OVERLAP  # s1.> collides with it
    assert _create(env, "S3", ["x.>"])["error"] == OVERLAP
    assert "error" not in _create(env, "S3", ["s3.a"])
    # an update moves S1's subjects: what it had is free, what it has now is not
    assert "error" not in _update(env, "S1", ["t1.>"])
    assert _create(env, "S4", ["t1.q"])["error"] == OVERLAP
    assert "error" not in _create(env, "S4", ["s1.q"])
    # a delete frees them
    assert "error" not in env.api("$JS.API.STREAM.DELETE.S2")
    assert "error" not in _create(env, "S5", ["x.y", "s2.k"])
    assert _create(env, "S6", ["s2.k"])["error"] == OVERLAP
    # creating an existing stream again with its own config is not an overlap
    again = _create(env, "S5", ["x.y", "s2.k"])
    assert "error" not in again and again["config"]["subjects"] == ["x.y", "s2.k"]


def test_a_create_among_many_streams_asks_per_new_subject(env, monkeypatch):
    for i in range(300):
        assert "error" not in _create(env, f"S{i}", [f"s.{i}.>", f"t.{i}"])
    asked = []
    orig = OverlapTrie.first_collision
    monkeypatch.setattr(OverlapTrie, "first_collision", lambda self, s, *a: asked.append(s) or orig(self, s, *a))
    assert "error" not in _create(env, "N", ["n.>", "m.1"])
    # (each new subject: once among the new stream's own subjects, once among the others')
    assert sorted(asked) == ["m.1", "m.1", "n.>", "n.>"]
    assert _create(env, "O", ["t.7"])["error"] == OVERLAP


class _Stream:
    """A stream as the index reads it, counting the reads of its config."""

    reads = 0

    def __init__(self, cfg: StreamConfig) -> None:
        self._cfg = cfg

    @property
    def config(self) -> StreamConfig:
        _Stream.reads += 1
        return self._cfg


def test_index_over_the_account_streams_answers_as_the_per_stream_check():
    """check_new_in (the account's streams and its count of changes) through random adds,
    updates, deletes and re-adds of a name, against the per-stream check."""
    rng = random.Random(11)
    toks = ["a", "b", "c", "*"]

    def subject() -> str:
        t = [rng.choice(toks) for _ in range(rng.randint(1, 3))]
        return ".".join(t) + (".>" if rng.random() < 0.2 else "")

    idx = StreamSubjects()
    streams: dict[str, _Stream] = {}
    version = 0
    for step in range(500):
        r = rng.random()
        if r < 0.12 and streams:  # a delete
            del streams[rng.choice(list(streams))]
            version += 1
            continue
        if r < 0.25 and streams:  # an update: a new config in the same place
            name = rng.choice(list(streams))
            streams[name] = _Stream(StreamConfig(name=name, subjects=[subject()]))
            version += 1
            continue
        name = f"N{step}" if rng.random() < 0.9 or not streams else f"N{rng.randrange(step)}"
        cfg = StreamConfig(name=name, subjects=[subject() for _ in range(rng.randint(1, 2))])
        others = {n: s._cfg for n, s in streams.items() if n != name}
        try:
            check_subject_overlap(cfg, others)
            want = None
        except ApiError as e:
            want = e.err_code
        try:
            if name in streams:
                check_subject_overlap(cfg, others)  # (what STREAM.CREATE does for an existing name: not asked)
            else:
                idx.check_new_in(cfg, streams, version)
            got = None
        except ApiError as e:
            got = e.err_code
        assert got == want, (step, cfg.subjects)
        if want is None and rng.random() < 0.6:
            streams[name] = _Stream(cfg)  # (an existing name: replaced in place, one change)
            version += 1


def test_a_create_reads_only_the_streams_added_since_the_last():
    idx = StreamSubjects()
    streams: dict[str, _Stream] = {}
    for i in range(300):
        idx.check_new_in(StreamConfig(name=f"S{i}", subjects=[f"s.{i}.>"]), streams, i)
        streams[f"S{i}"] = _Stream(StreamConfig(name=f"S{i}", subjects=[f"s.{i}.>"]))
    _Stream.reads = 0
    idx.check_new_in(StreamConfig(name="N", subjects=["n.>"]), streams, 300)
    assert _Stream.reads == 1  # S299, added since the last create
    with pytest.raises(ApiError):
        idx.check_new_in(StreamConfig(name="N", subjects=["s.7.x"]), streams, 300)
    assert _Stream.reads == 1
    # an update (one more change, no stream added): everything is read again
    streams["S7"] = _Stream(StreamConfig(name="S7", subjects=["t.7"]))
    _Stream.reads = 0
    idx.check_new_in(StreamConfig(name="N", subjects=["s.7.x"]), streams, 301)
    assert _Stream.reads == 300
    with pytest.raises(ApiError):
        idx.check_new_in(StreamConfig(name="N", subjects=["t.*"]), streams, 301)
