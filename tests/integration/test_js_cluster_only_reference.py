"""The cluster-only JetStream API subjects on a standalone server, as nats-server 2.15.1 answers
them, in an account with JetStream and in one without (issue 25 item 3): stream and consumer
leader stepdown / peer remove / peer evacuate / cancel move 503/10010 (in both); server remove and
evacuate, meta rescue and stepdown, account purge and stream moves no reply in a plain account;
every other subject of an account without JetStream 503/10039 (typed ``system_response`` in the
system account, unknown subjects included)."""

from __future__ import annotations

import json
import tempfile

import nats
import pytest
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from natsd.config.options import options_from_tree
from natsd.config.parser import parse
from tests.helpers.inproc import running_server
from tests.helpers.servers import reference_binary, start_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.reference,
    pytest.mark.timeout(120),
    pytest.mark.skipif(reference_binary() is None, reason="nats-server binary not available"),
]

CONF = """
jetstream {{ store_dir: "{sd}" }}
accounts {{
  A {{ jetstream: enabled, users [ {{ user: a, password: pass }} ] }}
  B {{ users [ {{ user: b, password: pass }} ] }}
  SYS {{ users [ {{ user: sys, password: pass }} ] }}
}}
system_account: SYS
"""

SUBJECTS = [
    "$JS.API.INFO",
    "$JS.API.STREAM.NAMES",
    "$JS.API.SERVER.EVACUATE",
    "$JS.API.SERVER.REMOVE",
    "$JS.API.META.RESCUE",
    "$JS.API.META.LEADER.STEPDOWN",
    "$JS.API.STREAM.PEER.EVACUATE.S",
    "$JS.API.STREAM.PEER.REMOVE.S",
    "$JS.API.STREAM.LEADER.STEPDOWN.S",
    "$JS.API.STREAM.CANCEL_MOVE.S",
    "$JS.API.ACCOUNT.STREAM.MOVE.A.S",
    "$JS.API.ACCOUNT.STREAM.CANCEL_MOVE.A.S",
    "$JS.API.ACCOUNT.PURGE.A",
    "$JS.API.CONSUMER.LEADER.STEPDOWN.S.C",
    "$JS.API.STREAM.PEER.EVACUATE.NOPE",
    "$JS.API.FOO",
    "$JS.API.META.SNAPSHOT",
]


async def _script(url: str) -> list:
    out = []
    for user in ("a", "b", "sys"):
        nc = await nats.connect(url, user=user, password="pass")
        try:
            if user == "a":
                await nc.request("$JS.API.STREAM.CREATE.S", b'{"name": "S", "subjects": ["s"]}', timeout=5)
                await nc.request(
                    "$JS.API.CONSUMER.CREATE.S.C", b'{"stream_name": "S", "config": {"durable_name": "C"}}', timeout=5
                )
            for subject in SUBJECTS:
                if user == "sys" and subject.startswith("$JS.API.ACCOUNT.PURGE."):
                    continue  # the system account purges the named account there (not implemented)
                try:
                    m = await nc.request(subject, b'{"peer": "x"}', timeout=0.5)
                except NoRespondersError:
                    out.append((user, subject, "no responders"))
                    continue
                except NatsTimeout:
                    out.append((user, subject, "no reply"))
                    continue
                body = json.loads(m.data)
                out.append((user, subject, body.get("type"), (body.get("error") or {}).get("err_code")))
        finally:
            await nc.close()
    return out


async def test_cluster_only_subjects_on_a_standalone_server_as_nats_server(tmp_path):
    conf = tmp_path / "ref.conf"
    conf.write_text(CONF.format(sd=tmp_path / "ref-js"))
    ref = start_server("reference", tmp_path, config=conf, jetstream=False)
    try:
        expected = await _script(ref.url)
    finally:
        ref.stop()
    opts = options_from_tree(parse(CONF.format(sd=tempfile.mkdtemp(dir=tmp_path)), "t.conf", env={}))
    opts.host, opts.port, opts.http_port = "127.0.0.1", 0, -1
    async with running_server(options=opts) as server:
        got = await _script(server.client_url)
    assert (
        "b",
        "$JS.API.STREAM.LEADER.STEPDOWN.S",
        "io.nats.jetstream.api.v1.stream_leader_stepdown_response",
        10010,
    ) in expected
    diffs = [(e, g) for e, g in zip(expected, got) if e != g]
    assert not diffs and len(got) == len(expected), diffs
