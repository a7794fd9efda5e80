"""The one table of ``$JS.API`` subjects, its dispatch through a Sublist, and the seam between
the engine and the API (the domain runs without it; the server hands it in)."""

from __future__ import annotations

import pytest

from natsd.clock import ManualClock
from natsd.config.options import ServerOptions
from natsd.jetstream import errors
from natsd.jetstream.api import ROUTES, JetStreamApi, consumers, streams
from natsd.jetstream.api.router import API_SUBSCRIPTIONS, ApiDispatcher
from natsd.jetstream.consumer import ConsumerHub
from natsd.jetstream.errors import ERROR_TABLE, ApiError, ApiErrors, ErrorDef
from natsd.jetstream.manager import JetStreamEngine
from natsd.jetstream.templates import TemplateManager
from natsd.subjects.tokens import subjects_collide, subset
from tests.helpers.fakeports import FakePorts, JsEnv

pytestmark = pytest.mark.unit


def test_no_two_routes_overlap():
    # at most one route matches a subject, so the Sublist answer needs no tie-break
    pats = [r.pattern for r in ROUTES]
    assert len(pats) == len(set(pats))
    clashes = [(a, b) for i, a in enumerate(pats) for b in pats[i + 1 :] if subjects_collide(a, b)]
    assert not clashes


def _covered(pattern: str) -> bool:
    if any(subset(pattern, s) for s in API_SUBSCRIPTIONS):
        return True
    # "x.>" may be covered by two subscriptions together: "x.*" and "x.*.>"
    return (
        pattern.endswith(".>")
        and any(subset(pattern[:-1] + "*", s) for s in API_SUBSCRIPTIONS)
        and any(subset(pattern[:-1] + "*.>", s) for s in API_SUBSCRIPTIONS)
    )


def test_every_route_is_reached_by_an_account_subscription():
    unreached = [r.pattern for r in ROUTES if not _covered(r.pattern)]
    assert not unreached


def test_direct_get_and_msg_next_are_left_to_streams_and_consumers():
    # no responders for a missing stream / consumer: the account must not subscribe these
    for subject in ("$JS.API.DIRECT.GET.S", "$JS.API.DIRECT.GET.S.a.b", "$JS.API.CONSUMER.MSG.NEXT.S.C"):
        assert not any(subjects_collide(s, subject) for s in API_SUBSCRIPTIONS), subject


@pytest.mark.parametrize(
    "subject,handler,rtype",
    [
        ("$JS.API.STREAM.INFO.ORDERS", streams.stream_info, "stream_info_response"),
        ("$JS.API.STREAM.TEMPLATE.NAMES", None, "stream_template_names_response"),
        ("$JS.API.CONSUMER.CREATE.S", consumers.create, "consumer_create_response"),
        ("$JS.API.CONSUMER.CREATE.S.C.orders.>", consumers.create, "consumer_create_response"),
        ("$JS.API.CONSUMER.DURABLE.CREATE.S.C", consumers.create, "consumer_create_response"),
        ("$JS.API.CONSUMER.INFO.S.C", consumers.info, "consumer_info_response"),
        ("$JS.API.CONSUMER.UNPIN.S.C", consumers.unpin, "consumer_unpin_response"),
        ("$JS.API.STREAM.PEER.REMOVE.S", streams.cluster_only, "stream_remove_peer_response"),
    ],
)
def test_dispatcher_finds_the_route(subject, handler, rtype):
    route = ApiDispatcher(ROUTES).lookup(subject)
    assert route is not None and route.response_type == rtype
    if handler is not None:
        # (the consumer handlers stand in for their module until its first request: issue 31)
        resolve = getattr(route.handler, "resolve", None)
        assert (resolve() if resolve is not None else route.handler) is handler


@pytest.mark.parametrize(
    "subject",
    [
        "$JS.API.STREAM.INFO",
        "$JS.API.STREAM.INFO.A.B",
        "$JS.API.NOPE",
        "$JS.API.CONSUMER.RESET.S.C",
        "$JS.API.META.RESCUE",
        "$JS.API.META.LEADER.STEPDOWN",
        "$JS.API.SERVER.REMOVE",
        "$JS.API.ACCOUNT.PURGE.A",
        "$JS.API.ACCOUNT.STREAM.MOVE.S.x",
    ],
)
def test_unknown_or_unanswered_subjects_have_no_route(subject):
    assert ApiDispatcher(ROUTES).lookup(subject) is None


def test_errors_are_named_data():
    assert isinstance(ApiErrors.STREAM_NOT_FOUND, ErrorDef)
    assert ApiErrors.STREAM_NOT_FOUND.name == "STREAM_NOT_FOUND"
    assert ApiErrors.STREAM_NOT_FOUND() == ApiError(404, 10059, "stream not found")
    assert ApiErrors.by_err_code[10059] is ApiErrors.STREAM_NOT_FOUND
    assert all(getattr(ApiErrors, d.name) is d for d in ERROR_TABLE)
    with pytest.raises(AttributeError):
        ApiError.new("NO_SUCH_ERROR")
    with pytest.raises(Exception):  # frozen
        ApiErrors.STREAM_NOT_FOUND.code = 500  # type: ignore[misc]
    assert errors.__all__ == ["ApiError", "ApiErrors", "ErrorDef", "ERROR_TABLE"]


def test_account_state_is_explicit(tmp_path):
    env = JsEnv(str(tmp_path))
    try:
        acc = env.account
        assert isinstance(acc.consumer_hub, ConsumerHub)
        assert isinstance(acc.templates, TemplateManager)
        assert acc.transfers == set()
        assert not [k for k in vars(acc) if k.startswith("_natsd")]
    finally:
        env.stop()


def test_engine_without_api_serves_no_api_but_runs_streams(tmp_path):
    opts = ServerOptions()
    opts.jetstream.store_dir = str(tmp_path)
    ports = FakePorts()
    inbox = ports.client_subscribe("_INBOX.>")
    engine = JetStreamEngine(opts, ManualClock(), server_id="N")
    acc = engine.enable_account("$G", ports)
    engine.start()
    try:
        ports.request("$JS.API.INFO", b"")
        assert inbox.msgs == []
        assert not ports.has_interest("$JS.API.INFO")
        assert engine.disable_account_api(FakePorts()) == []
    finally:
        engine.stop()
    assert acc.consumer_hub is not None


def test_installed_api_answers_and_counts(tmp_path):
    env = JsEnv(str(tmp_path))
    try:
        assert env.api("$JS.API.STREAM.INFO.NOPE")["error"]["err_code"] == 10059
        info = env.api("$JS.API.INFO")
        assert info["api"]["total"] == 1 and info["api"]["errors"] == 1
    finally:
        env.stop()


def test_not_enabled_answers_every_known_subject_but_templates():
    ports = FakePorts()
    inbox = ports.client_subscribe("_INBOX.>")
    JetStreamApi().answer_not_enabled(ports, type("S", (), {"total": 0, "errors": 0})())
    ports.request("$JS.API.CONSUMER.UNPIN.S.C", b"")
    assert inbox.last_json()["error"]["err_code"] == 10039
    assert inbox.last_json()["type"] == "io.nats.jetstream.api.v1.consumer_unpin_response"
    n = len(inbox.msgs)
    ports.request("$JS.API.STREAM.TEMPLATE.NAMES", b"")
    assert len(inbox.msgs) == n


@pytest.mark.parametrize(
    "value,too_high",
    [
        (None, False),
        ("", False),
        ("0", False),
        ("1", False),
        ("+1", False),
        ("-1", False),
        ("99", True),
        ("x", True),
        ("1 ", True),
        ("1_0", True),
        ("١", True),
    ],
)
def test_required_api_level_as_nats_server_reads_it(value, too_high):
    # errorOnRequiredApiLevel: sliceHeader (case-sensitive, leading spaces skipped, trailing kept),
    # then strconv.Atoi: an error or a level above ours is "too high"; an empty value is none.
    from natsd.jetstream.config.models import JS_API_LEVEL
    from natsd.jetstream.wire import required_level_too_high

    assert JS_API_LEVEL < 99
    hdr = None if value is None else f"NATS/1.0\r\nNats-Required-Api-Level: {value}\r\n\r\n".encode()
    assert required_level_too_high(hdr) is too_high
    lower = None if value is None else hdr.replace(b"Nats-Required-Api-Level", b"nats-required-api-level")
    assert required_level_too_high(lower) is False  # another name to nats-server


def test_the_first_requests_imports_run_with_the_collector_paused_and_resumed():
    """Issue 26: the modules the first $JS.API request loads run with the cyclic collector off
    (they only add live objects), and its state is given back whatever the load does."""
    import gc

    from natsd.jetstream.api import _collector_paused

    assert gc.isenabled()
    assert _collector_paused(gc.isenabled) is False
    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError):
        _collector_paused(lambda: 1 // 0)
    assert gc.isenabled()
    gc.disable()
    try:  # a caller that paused it itself (main(), Server.run) keeps it paused
        assert _collector_paused(gc.isenabled) is False
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_api_router_and_error_table_are_not_needed_to_subscribe():
    """The account's API subjects are the router's, kept where the start can read them without
    loading the dispatcher (issue 26)."""
    from natsd.jetstream.api import subjects

    assert subjects.API_SUBSCRIPTIONS is API_SUBSCRIPTIONS
    assert "$JS.API.STREAM.>" in API_SUBSCRIPTIONS
