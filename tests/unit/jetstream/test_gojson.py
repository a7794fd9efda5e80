"""Request decoding as nats-server's Go decoder does it. Every expected text below was observed from
nats-server 2.15.1 answering the same body (after its ``invalid JSON: `` prefix); the side-by-side
check lives in tests/integration/test_js_api_decoding_reference.py."""

from __future__ import annotations

import pytest

from natsd.jetstream.config import requests as R
from natsd.jetstream.gojson import GoError, decode

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "body,struct,text",
    [
        (b"{", R.MSG_GET_REQUEST, "unexpected EOF"),
        (b'{"seq":1', R.MSG_GET_REQUEST, "unexpected EOF"),
        (
            b'{"seq":"x"}',
            R.MSG_GET_REQUEST,
            "json: cannot unmarshal string into Go struct field JSApiMsgGetRequest.seq of type uint64",
        ),
        (
            b"[1]",
            R.STREAM_PURGE_REQUEST,
            "json: cannot unmarshal array into Go value of type server.JSApiStreamPurgeRequest",
        ),
        (
            b"5",
            R.STREAM_INFO_REQUEST,
            "json: cannot unmarshal number into Go value of type server.JSApiStreamInfoRequest",
        ),
        (b"{}x", R.STREAM_INFO_REQUEST, "invalid character 'x' looking for beginning of value at offset 3"),
        (b'{"offset":}', R.STREAM_INFO_REQUEST, "invalid character '}' looking for beginning of value at offset 11"),
        (
            b"{'a':1}",
            R.STREAM_INFO_REQUEST,
            "invalid character '\\'' looking for beginning of object key string at offset 2",
        ),
        (
            b'{"seq":-1}',
            R.MSG_GET_REQUEST,
            "json: cannot unmarshal number -1 into Go struct field JSApiMsgGetRequest.seq of type uint64",
        ),
        (
            b'{"seq":1.5}',
            R.MSG_GET_REQUEST,
            "json: cannot unmarshal number 1.5 into Go struct field JSApiMsgGetRequest.seq of type uint64",
        ),
        (
            b'{"seq":1e3}',
            R.MSG_GET_REQUEST,
            "json: cannot unmarshal number 1e3 into Go struct field JSApiMsgGetRequest.seq of type uint64",
        ),
        (
            b'{"seq":18446744073709551616}',
            R.MSG_GET_REQUEST,
            "json: cannot unmarshal number 18446744073709551616 into Go struct field JSApiMsgGetRequest.seq of "
            "type uint64",
        ),
        (
            b'{"last_by_subj":["a"]}',
            R.MSG_GET_REQUEST,
            "json: cannot unmarshal array into Go struct field JSApiMsgGetRequest.last_by_subj of type string",
        ),
        (
            b'{"last_by_subj":{"a":1}}',
            R.MSG_GET_REQUEST,
            "json: cannot unmarshal object into Go struct field JSApiMsgGetRequest.last_by_subj of type string",
        ),
        (
            b'{"last_by_subj":true}',
            R.MSG_GET_REQUEST,
            "json: cannot unmarshal bool into Go struct field JSApiMsgGetRequest.last_by_subj of type string",
        ),
        (
            b'{"subjects_filter":5}',
            R.STREAM_INFO_REQUEST,
            "json: cannot unmarshal number into Go struct field JSApiStreamInfoRequest.subjects_filter of type string",
        ),
        (
            b'{"offset":"5"}',
            R.STREAM_INFO_REQUEST,
            "json: cannot unmarshal string into Go struct field JSApiStreamInfoRequest.offset of type int",
        ),
        (
            b'{"offset":1.5}',
            R.STREAM_INFO_REQUEST,
            "json: cannot unmarshal number 1.5 into Go struct field JSApiStreamInfoRequest.offset of type int",
        ),
        (
            b'{"deleted_details":"yes"}',
            R.STREAM_INFO_REQUEST,
            "json: cannot unmarshal string into Go struct field JSApiStreamInfoRequest.deleted_details of type bool",
        ),
        (
            b'{"subject":5}',
            R.STREAM_NAMES_REQUEST,
            "json: cannot unmarshal number into Go struct field JSApiStreamNamesRequest.subject of type string",
        ),
        (
            b'{"offset":"x"}',
            R.CONSUMERS_REQUEST,
            "json: cannot unmarshal string into Go struct field JSApiConsumersRequest.offset of type int",
        ),
        (
            b'{"seq":2,"no_erase":"x"}',
            R.MSG_DELETE_REQUEST,
            "json: cannot unmarshal string into Go struct field JSApiMsgDeleteRequest.no_erase of type bool",
        ),
        (
            b'{"keep":-1}',
            R.STREAM_PURGE_REQUEST,
            "json: cannot unmarshal number -1 into Go struct field JSApiStreamPurgeRequest.keep of type uint64",
        ),
        (b'{"name":"G","max_msg":5}', R.STREAM_CONFIG_REQUEST, 'json: unknown field "max_msg"'),
        (b'{"name":"Q","mirror":{"name":"E","foo":1}}', R.STREAM_CONFIG_REQUEST, 'json: unknown field "foo"'),
        (b'{"name":"Q","consumer_limits":{"foo":1}}', R.STREAM_CONFIG_REQUEST, 'json: unknown field "foo"'),
        (b'{"stream_name":"E","config":{"Durable":"X"}}', R.CREATE_CONSUMER_REQUEST, 'json: unknown field "Durable"'),
        (
            b'{"stream_name":"E","config":{"durable_name":5}}',
            R.CREATE_CONSUMER_REQUEST,
            "json: cannot unmarshal number into Go struct field CreateConsumerRequest.config.durable_name of type "
            "string",
        ),
        (
            b'{"stream_name":"E","config":{"max_deliver":"5"}}',
            R.CREATE_CONSUMER_REQUEST,
            "json: cannot unmarshal string into Go struct field CreateConsumerRequest.config.max_deliver of type int",
        ),
        (
            b'{"stream_name":"E","config":{"max_deliver":5.5}}',
            R.CREATE_CONSUMER_REQUEST,
            "json: cannot unmarshal number 5.5 into Go struct field CreateConsumerRequest.config.max_deliver of "
            "type int",
        ),
        (
            b'{"stream_name":"E","config":{"ack_wait":"5s"}}',
            R.CREATE_CONSUMER_REQUEST,
            "json: cannot unmarshal string into Go struct field CreateConsumerRequest.config.ack_wait of type "
            "time.Duration",
        ),
        (b'{"foo":1,"seq":"x"}', R.MSG_GET_REQUEST, 'json: unknown field "foo"'),  # first problem wins
        (
            b'{"seq":"x","foo":1}',
            R.MSG_GET_REQUEST,
            "json: cannot unmarshal string into Go struct field JSApiMsgGetRequest.seq of type uint64",
        ),
        (
            b'{"seq":"x"} {',
            R.MSG_GET_REQUEST,  # the first value's error before the second's syntax
            "json: cannot unmarshal string into Go struct field JSApiMsgGetRequest.seq of type uint64",
        ),
    ],
)
def test_errors_read_as_the_reference(body: bytes, struct, text: str) -> None:
    with pytest.raises(GoError) as ei:
        decode(body, struct)
    assert str(ei.value) == text


@pytest.mark.parametrize(
    "body,text",
    [
        (b'{"a":tru}', "invalid character '}' in literal true (expecting 'e') at offset 9"),
        (b'{"a":1 "b"}', "invalid character '\"' after object key:value pair at offset 8"),
        (b'{"a" 1}', "invalid character '1' after object key at offset 6"),
        (b"[1 2]", "invalid character '2' after array element at offset 4"),
        (b'{"a":"\\q"}', "invalid escape sequence `\\q` in string at offset 8"),
        (b'{"a":"\\u12g4"}', "invalid escape sequence `\\u12g4` in string at offset 12"),
        (b'{"a":-x}', "invalid character 'x' in numeric literal at offset 7"),
        (b'{"a":1.x}', "invalid character 'x' in numeric literal at offset 8"),
        (b'{"a":1ex}', "invalid character 'x' in numeric literal at offset 8"),
        (b'{"a":"\x01"}', "invalid character '\\x01' in string at offset 7"),
        (b'{"a":\xc3\xa9}', "invalid character '\u00e9' looking for beginning of value at offset 7"),
        (b'{"a":NaN}', "invalid character 'N' looking for beginning of value at offset 6"),
    ],
)
def test_syntax_errors_follow_gos_scanner(body: bytes, text: str) -> None:
    with pytest.raises(GoError) as ei:
        decode(body, R.STREAM_INFO_REQUEST)
    assert str(ei.value) == text


def test_empty_null_and_several_values() -> None:
    assert decode(b"", R.STREAM_INFO_REQUEST) == {}
    assert decode(b"  \r\n", R.STREAM_INFO_REQUEST) == {}
    assert decode(b"null", R.STREAM_INFO_REQUEST) == {}
    # Go's decoder reads every value into the same struct: later fields add to earlier ones.
    assert decode(b'{"offset":1} {"subjects_filter":"a"}', R.STREAM_INFO_REQUEST) == {
        "offset": 1,
        "subjects_filter": "a",
    }


def test_field_names_match_case_insensitively_and_nulls_drop() -> None:
    got = decode(
        b'{"config":{"DURABLE_NAME":"x","Ack_Wait":5,"description":null},"STREAM_NAME":"S"}', R.CREATE_CONSUMER_REQUEST
    )
    assert got == {"config": {"durable_name": "x", "ack_wait": 5}, "stream_name": "S"}


def test_nested_and_container_types() -> None:
    cfg = decode(
        b'{"name":"S","sources":[{"name":"A","external":{"api":"$JS.H.API","deliver":""}}],'
        b'"metadata":{"k":"v"},"placement":{"tags":["a"]}}',
        R.STREAM_CONFIG_REQUEST,
    )
    assert cfg["sources"][0]["external"]["api"] == "$JS.H.API" and cfg["metadata"] == {"k": "v"}
    with pytest.raises(GoError, match="StreamConfigRequest.sources.0.name of type string"):
        decode(b'{"sources":[{"name":5}]}', R.STREAM_CONFIG_REQUEST)
    with pytest.raises(GoError, match=r"StreamConfigRequest.sources of type \[\]\*server.StreamSource"):
        decode(b'{"sources":5}', R.STREAM_CONFIG_REQUEST)
    with pytest.raises(GoError, match="StreamConfigRequest.mirror of type server.StreamSource"):
        decode(b'{"mirror":5}', R.STREAM_CONFIG_REQUEST)
    with pytest.raises(GoError, match="StreamConfigRequest.metadata.k of type string"):
        decode(b'{"metadata":{"k":5}}', R.STREAM_CONFIG_REQUEST)
    with pytest.raises(
        GoError, match="number 3000000000 into Go struct field StreamConfigRequest.max_msg_size of type int32"
    ):
        decode(b'{"max_msg_size":3000000000}', R.STREAM_CONFIG_REQUEST)


def test_invalid_utf8_is_replaced_not_refused() -> None:
    assert decode(b'{"subjects_filter":"a\xffb"}', R.STREAM_INFO_REQUEST) == {"subjects_filter": "a\ufffdb"}


@pytest.mark.parametrize(
    "body,text",
    [
        (b"{", "unexpected end of JSON input"),
        (b'{"batch":"x"}', "json: cannot unmarshal string into Go struct field .batch of type int"),
        (b'{"expires":"1s"}', "json: cannot unmarshal string into Go struct field .expires of type time.Duration"),
        (b'{"batch":1.5}', "json: cannot unmarshal number 1.5 into Go struct field .batch of type int"),
        (b'{"batch":1} x', "invalid character 'x' after top-level value"),
        (b'{"batch":}', "invalid character '}' looking for beginning of value"),
    ],
)
def test_lenient_mode_reads_as_json_unmarshal(body: bytes, text: str) -> None:
    with pytest.raises(GoError) as ei:
        decode(body, R.CONSUMER_GET_NEXT_REQUEST, strict=False)
    assert str(ei.value) == text


def test_lenient_mode_ignores_unknown_fields() -> None:
    assert decode(b'{"batch":2,"foo":1,"NO_WAIT":true}', R.CONSUMER_GET_NEXT_REQUEST, strict=False) == {
        "batch": 2,
        "no_wait": True,
    }


def test_go_kind_is_the_one_spelling_of_json_kinds():
    from natsd.jetstream.gojson import go_kind

    assert [go_kind(v) for v in (True, "s", 1, 1.5, [], {}, None)] == [
        "bool",
        "string",
        "number",
        "number",
        "array",
        "object",
        "null",
    ]
    assert go_kind(1.5, literal=True) == "number 1.5" and go_kind(-1, literal=True) == "number -1"
    assert go_kind("x", literal=True) == "string" and go_kind(False, literal=True) == "bool"


# Texts below were observed from nats-server 2.15.1 (tests/integration/test_js_api_guard_reference.py
# compares them side by side).
@pytest.mark.parametrize(
    "body,text",
    [
        (b'{"subjects":["a",5]}', "json: cannot unmarshal number into StreamConfigRequest.subjects.1 of type string"),
        (
            b'{"sources":[{"name":5}]}',
            "json: cannot unmarshal number into Go struct field StreamConfigRequest.sources.0.name of type string",
        ),
        (
            b'{"metadata":{"0":5}}',
            "json: cannot unmarshal number into Go struct field StreamConfigRequest.metadata.0 of type string",
        ),
        (b'{"retention": [1,  2]}', 'can not unmarshal "[1,  2]"'),
        (b'{"retention": 1e3}', 'can not unmarshal "1e3"'),
        (b'{"storage":null}', 'can not unmarshal "null"'),
        (b'{"discard":{"a": 1}}', 'can not unmarshal "{\\"a\\": 1}"'),
        (b'{"compression":5}', "json: cannot unmarshal number into Go value of type string"),
        (b'{"compression":null}', "unknown compression algorithm"),
        (
            b'{"mirror":{"opt_start_time":true}}',
            "json: cannot unmarshal bool into Go struct field StreamConfigRequest.mirror.opt_start_time of type "
            "time.Time",
        ),
        (b"\xff", "invalid character '\\xff' looking for beginning of value at offset 1"),
    ],
)
def test_stream_config_texts_as_go(body: bytes, text: str) -> None:
    with pytest.raises(GoError) as ei:
        decode(body, R.STREAM_CONFIG_REQUEST)
    assert str(ei.value) == text


def test_consumer_enums_name_the_raw_value() -> None:
    for body, text in (
        (b'{"action":null}', "unknown consumer action: null"),
        (b'{"config":{"priority_policy":5}}', "unknown priority policy: 5"),
        (b'{"config":{"ack_policy":[1, 2]}}', 'can not unmarshal "[1, 2]"'),
    ):
        with pytest.raises(GoError) as ei:
            decode(body, R.CREATE_CONSUMER_REQUEST)
        assert str(ei.value) == text
    # strings go on to their handler, null times are the zero time
    assert decode(b'{"config":{"ack_policy":"bogus","pause_until":null}}', R.CREATE_CONSUMER_REQUEST) == {
        "config": {"ack_policy": "bogus"}
    }


@pytest.mark.parametrize(
    "value,text",
    [
        ("2020-13-01T00:00:00Z", 'parsing time "2020-13-01T00:00:00Z": month out of range'),
        ("2020-01-01", 'parsing time "2020-01-01" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "T"'),
        (
            "2020-01-01T00:00:00",
            'parsing time "2020-01-01T00:00:00" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "Z07:00"',
        ),
        ("2020-01-01T25:00:00Z", 'parsing time "2020-01-01T25:00:00Z": hour out of range'),
        ("2020-01-01T00:00:00Zx", 'parsing time "2020-01-01T00:00:00Zx": extra text: "x"'),
        ("2020-02-30T00:00:00Z", 'parsing time "2020-02-30T00:00:00Z": day out of range'),
        ("2020-01-01T00:00:60Z", 'parsing time "2020-01-01T00:00:60Z": second out of range'),
        (
            "2020-01-01t00:00:00z",
            'parsing time "2020-01-01t00:00:00z" as "2006-01-02T15:04:05Z07:00": cannot parse "t00:00:00z" as "T"',
        ),
        ("2020-01-01T00:00:00+25:00", 'parsing time "2020-01-01T00:00:00+25:00": time zone offset hour out of range'),
        (
            "2020-1-01T00:00:00Z",
            'parsing time "2020-1-01T00:00:00Z" as "2006-01-02T15:04:05Z07:00": cannot parse "1-01T00:00:00Z" as "01"',
        ),
        ("x", 'parsing time "x" as "2006-01-02T15:04:05Z07:00": cannot parse "x" as "2006"'),
        ("2020-01-01T00:00:00.5+01:00", None),
        ("2024-02-29T23:59:59.123456789Z", None),
    ],
)
def test_time_errors_as_go(value: str, text: str | None) -> None:
    from natsd.jetstream.gojson import time_error

    assert time_error(value) == text
