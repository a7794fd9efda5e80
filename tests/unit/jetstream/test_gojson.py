"""Request decoding as nats-server's Go decoder does it. Every expected text below was observed from
nats-server 2.15.1 answering the same body (after its ``invalid JSON: `` prefix); the side-by-side
check lives in tests/integration/test_js_api_decoding_reference.py."""

from __future__ import annotations

import pytest

from natsd.jetstream import requests as R
from natsd.jetstream.gojson import GoError, decode

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("body,struct,text", [
    (b"{", R.MSG_GET_REQUEST, "unexpected EOF"),
    (b'{"seq":1', R.MSG_GET_REQUEST, "unexpected EOF"),
    (b'{"seq":"x"}', R.MSG_GET_REQUEST,
     "json: cannot unmarshal string into Go struct field JSApiMsgGetRequest.seq of type uint64"),
    (b"[1]", R.STREAM_PURGE_REQUEST, "json: cannot unmarshal array into Go value of type server.JSApiStreamPurgeRequest"),
    (b"5", R.STREAM_INFO_REQUEST, "json: cannot unmarshal number into Go value of type server.JSApiStreamInfoRequest"),
    (b"{}x", R.STREAM_INFO_REQUEST, "invalid character 'x' looking for beginning of value at offset 3"),
    (b'{"offset":}', R.STREAM_INFO_REQUEST, "invalid character '}' looking for beginning of value at offset 11"),
    (b"{'a':1}", R.STREAM_INFO_REQUEST,
     "invalid character '\\'' looking for beginning of object key string at offset 2"),
    (b'{"seq":-1}', R.MSG_GET_REQUEST,
     "json: cannot unmarshal number -1 into Go struct field JSApiMsgGetRequest.seq of type uint64"),
    (b'{"seq":1.5}', R.MSG_GET_REQUEST,
     "json: cannot unmarshal number 1.5 into Go struct field JSApiMsgGetRequest.seq of type uint64"),
    (b'{"seq":1e3}', R.MSG_GET_REQUEST,
     "json: cannot unmarshal number 1e3 into Go struct field JSApiMsgGetRequest.seq of type uint64"),
    (b'{"seq":18446744073709551616}', R.MSG_GET_REQUEST,
     "json: cannot unmarshal number 18446744073709551616 into Go struct field JSApiMsgGetRequest.seq of type uint64"),
    (b'{"last_by_subj":["a"]}', R.MSG_GET_REQUEST,
     "json: cannot unmarshal array into Go struct field JSApiMsgGetRequest.last_by_subj of type string"),
    (b'{"last_by_subj":{"a":1}}', R.MSG_GET_REQUEST,
     "json: cannot unmarshal object into Go struct field JSApiMsgGetRequest.last_by_subj of type string"),
    (b'{"last_by_subj":true}', R.MSG_GET_REQUEST,
     "json: cannot unmarshal bool into Go struct field JSApiMsgGetRequest.last_by_subj of type string"),
    (b'{"subjects_filter":5}', R.STREAM_INFO_REQUEST,
     "json: cannot unmarshal number into Go struct field JSApiStreamInfoRequest.subjects_filter of type string"),
    (b'{"offset":"5"}', R.STREAM_INFO_REQUEST,
     "json: cannot unmarshal string into Go struct field JSApiStreamInfoRequest.offset of type int"),
    (b'{"offset":1.5}', R.STREAM_INFO_REQUEST,
     "json: cannot unmarshal number 1.5 into Go struct field JSApiStreamInfoRequest.offset of type int"),
    (b'{"deleted_details":"yes"}', R.STREAM_INFO_REQUEST,
     "json: cannot unmarshal string into Go struct field JSApiStreamInfoRequest.deleted_details of type bool"),
    (b'{"subject":5}', R.STREAM_NAMES_REQUEST,
     "json: cannot unmarshal number into Go struct field JSApiStreamNamesRequest.subject of type string"),
    (b'{"offset":"x"}', R.CONSUMERS_REQUEST,
     "json: cannot unmarshal string into Go struct field JSApiConsumersRequest.offset of type int"),
    (b'{"seq":2,"no_erase":"x"}', R.MSG_DELETE_REQUEST,
     "json: cannot unmarshal string into Go struct field JSApiMsgDeleteRequest.no_erase of type bool"),
    (b'{"keep":-1}', R.STREAM_PURGE_REQUEST,
     "json: cannot unmarshal number -1 into Go struct field JSApiStreamPurgeRequest.keep of type uint64"),
    (b'{"name":"G","max_msg":5}', R.STREAM_CONFIG_REQUEST, 'json: unknown field "max_msg"'),
    (b'{"name":"Q","mirror":{"name":"E","foo":1}}', R.STREAM_CONFIG_REQUEST, 'json: unknown field "foo"'),
    (b'{"name":"Q","consumer_limits":{"foo":1}}', R.STREAM_CONFIG_REQUEST, 'json: unknown field "foo"'),
    (b'{"stream_name":"E","config":{"Durable":"X"}}', R.CREATE_CONSUMER_REQUEST, 'json: unknown field "Durable"'),
    (b'{"stream_name":"E","config":{"durable_name":5}}', R.CREATE_CONSUMER_REQUEST,
     "json: cannot unmarshal number into Go struct field CreateConsumerRequest.config.durable_name of type string"),
    (b'{"stream_name":"E","config":{"max_deliver":"5"}}', R.CREATE_CONSUMER_REQUEST,
     "json: cannot unmarshal string into Go struct field CreateConsumerRequest.config.max_deliver of type int"),
    (b'{"stream_name":"E","config":{"max_deliver":5.5}}', R.CREATE_CONSUMER_REQUEST,
     "json: cannot unmarshal number 5.5 into Go struct field CreateConsumerRequest.config.max_deliver of type int"),
    (b'{"stream_name":"E","config":{"ack_wait":"5s"}}', R.CREATE_CONSUMER_REQUEST,
     "json: cannot unmarshal string into Go struct field CreateConsumerRequest.config.ack_wait of type time.Duration"),
    (b'{"foo":1,"seq":"x"}', R.MSG_GET_REQUEST, 'json: unknown field "foo"'),  # first problem wins
    (b'{"seq":"x","foo":1}', R.MSG_GET_REQUEST,
     "json: cannot unmarshal string into Go struct field JSApiMsgGetRequest.seq of type uint64"),
    (b'{"seq":"x"} {', R.MSG_GET_REQUEST,  # the first value's error before the second's syntax
     "json: cannot unmarshal string into Go struct field JSApiMsgGetRequest.seq of type uint64"),
])
def test_errors_read_as_the_reference(body: bytes, struct, text: str) -> None:
    with pytest.raises(GoError) as ei:
        decode(body, struct)
    assert str(ei.value) == text


@pytest.mark.parametrize("body,text", [
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
])
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
        "offset": 1, "subjects_filter": "a"}


def test_field_names_match_case_insensitively_and_nulls_drop() -> None:
    got = decode(b'{"config":{"DURABLE_NAME":"x","Ack_Wait":5,"description":null},"STREAM_NAME":"S"}',
                 R.CREATE_CONSUMER_REQUEST)
    assert got == {"config": {"durable_name": "x", "ack_wait": 5}, "stream_name": "S"}


def test_nested_and_container_types() -> None:
    cfg = decode(b'{"name":"S","sources":[{"name":"A","external":{"api":"$JS.H.API","deliver":""}}],'
                 b'"metadata":{"k":"v"},"placement":{"tags":["a"]}}', R.STREAM_CONFIG_REQUEST)
    assert cfg["sources"][0]["external"]["api"] == "$JS.H.API" and cfg["metadata"] == {"k": "v"}
    with pytest.raises(GoError, match="StreamConfigRequest.sources.0.name of type string"):
        decode(b'{"sources":[{"name":5}]}', R.STREAM_CONFIG_REQUEST)
    with pytest.raises(GoError, match=r"StreamConfigRequest.sources of type \[\]\*server.StreamSource"):
        decode(b'{"sources":5}', R.STREAM_CONFIG_REQUEST)
    with pytest.raises(GoError, match="StreamConfigRequest.mirror of type server.StreamSource"):
        decode(b'{"mirror":5}', R.STREAM_CONFIG_REQUEST)
    with pytest.raises(GoError, match="StreamConfigRequest.metadata.k of type string"):
        decode(b'{"metadata":{"k":5}}', R.STREAM_CONFIG_REQUEST)
    with pytest.raises(GoError, match="number 3000000000 into Go struct field StreamConfigRequest.max_msg_size of type int32"):
        decode(b'{"max_msg_size":3000000000}', R.STREAM_CONFIG_REQUEST)


def test_invalid_utf8_is_replaced_not_refused() -> None:
    assert decode(b'{"subjects_filter":"a\xffb"}', R.STREAM_INFO_REQUEST) == {"subjects_filter": "a\ufffdb"}


@pytest.mark.parametrize("body,text", [
    (b"{", "unexpected end of JSON input"),
    (b'{"batch":"x"}', "json: cannot unmarshal string into Go struct field .batch of type int"),
    (b'{"expires":"1s"}', "json: cannot unmarshal string into Go struct field .expires of type time.Duration"),
    (b'{"batch":1.5}', "json: cannot unmarshal number 1.5 into Go struct field .batch of type int"),
    (b'{"batch":1} x', "invalid character 'x' after top-level value"),
    (b'{"batch":}', "invalid character '}' looking for beginning of value"),
])
def test_lenient_mode_reads_as_json_unmarshal(body: bytes, text: str) -> None:
    with pytest.raises(GoError) as ei:
        decode(body, R.CONSUMER_GET_NEXT_REQUEST, strict=False)
    assert str(ei.value) == text


def test_lenient_mode_ignores_unknown_fields() -> None:
    assert decode(b'{"batch":2,"foo":1,"NO_WAIT":true}', R.CONSUMER_GET_NEXT_REQUEST, strict=False) == {
        "batch": 2, "no_wait": True}


def test_go_kind_is_the_one_spelling_of_json_kinds():
    from natsd.jetstream.gojson import go_kind
    assert [go_kind(v) for v in (True, "s", 1, 1.5, [], {}, None)] == \
        ["bool", "string", "number", "number", "array", "object", "null"]
    assert go_kind(1.5, literal=True) == "number 1.5" and go_kind(-1, literal=True) == "number -1"
    assert go_kind("x", literal=True) == "string" and go_kind(False, literal=True) == "bool"
