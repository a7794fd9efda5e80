"""The mqtt {} block as nats-server reads it: keys and aliases, ranges, unknown keys as errors,
and validateMQTTOptions' refusals (JetStream required standalone, user/token vs users list,
no_auth_user must exist, positive durations), located at file:line:column."""

from __future__ import annotations

import pytest

from natsd.config.mqtt import DEFAULT_ACK_WAIT_NS, DEFAULT_MAX_ACK_PENDING
from natsd.config.options import SECOND_NS, ConfigErrors, options_from_tree
from natsd.config.parser import parse

pytestmark = pytest.mark.unit


def opts(text: str):
    return options_from_tree(parse(text, "t.conf", env={}))


def errors(text: str) -> list[str]:
    with pytest.raises(ConfigErrors) as ei:
        opts(text)
    return [str(e) for e in ei.value.errors]


def test_absent_block_and_no_longer_a_notice():
    assert opts("port: 4222").mqtt is None
    o = opts("jetstream: enabled\nmqtt { port: 1883 }")
    assert o.mqtt.port == 1883 and not any("mqtt" in n for n in o.config_notices)


def test_every_documented_key_and_alias():
    o = opts("""
jetstream: enabled
server_name: edge
authorization { users: [ {user: dev, password: pw} ] }
mqtt {
  listen: "127.0.0.1:1884"
  no_auth_user: dev
  ackwait: "5s"
  api_timeout: "2s"
  max_inflight: 100
  js_domain: hub
  stream_replicas: 3
  consumer_memory_storage: true
  consumer_auto_cleanup: "1h"
  reject_qos2_publish: true
  downgrade_qos2_subscribe: true
}""")
    m = o.mqtt
    assert (m.host, m.port, m.no_auth_user) == ("127.0.0.1", 1884, "dev")
    assert (m.ack_wait_ns, m.js_api_timeout_ns, m.max_ack_pending) == (5 * SECOND_NS, 2 * SECOND_NS, 100)
    assert (m.js_domain, m.stream_replicas, m.consumer_memory_storage) == ("hub", 3, True)
    assert m.consumer_inactive_threshold_ns == 3600 * SECOND_NS
    assert m.reject_qos2_publish and m.downgrade_qos2_subscribe
    o = opts(
        "jetstream: enabled\nmqtt { host: 0.0.0.0, port: 1883, authentication { username: u, pass: p, timeout: 1.5 } }"
    )
    assert (o.mqtt.username, o.mqtt.password, o.mqtt.auth_timeout_s) == ("u", "p", 1.5)
    assert o.mqtt.effective_ack_wait_ns == DEFAULT_ACK_WAIT_NS
    assert o.mqtt.effective_max_ack_pending == DEFAULT_MAX_ACK_PENDING
    assert opts("jetstream: enabled\nmqtt { port: 1, authorization { token: t } }").mqtt.token == "t"


def test_consumer_replicas_is_a_warning():
    o = opts("jetstream: enabled\nmqtt { port: 1883, consumer_replicas: 3 }")
    assert any("consumer replicas setting ignored in this server version" in w for w in o.config_warnings)


def test_unknown_key_is_an_error_even_without_pedantic():
    assert errors("jetstream: enabled\nmqtt { port: 1883, foo: 1 }") == ['t.conf:2:20: unknown field "foo"']


def test_max_ack_pending_range():
    assert errors("jetstream: enabled\nmqtt { port: 1883, max_ack_pending: 70000 }") == [
        "t.conf:2:20: invalid value 70000, should in [0..65535] range"
    ]


@pytest.mark.parametrize(
    "text, message",
    [
        ('jetstream: enabled\nmqtt { port: 1883, ack_wait: "-1s" }', "ack wait must be a positive value"),
        ('jetstream: enabled\nmqtt { port: 1883, js_api_timeout: "-1s" }', "JS API timeout must be a positive value"),
        (
            "jetstream: enabled\nauthorization { users: [{user: a, password: b}] }\n"
            "mqtt { port: 1883, authorization { user: x, password: y } }",
            "mqtt authentication username not compatible with presence of users/nkeys",
        ),
        (
            "jetstream: enabled\nauthorization { users: [{user: a, password: b}] }\n"
            "mqtt { port: 1883, authorization { token: x } }",
            "mqtt authentication token not compatible with presence of users/nkeys",
        ),
        (
            "jetstream: enabled\nauthorization { users: [{user: a, password: b}] }\nmqtt "
            "{ port: 1883, no_auth_user: zz }",
            'no_auth_user: "zz" not present as user or nkey in authorization block or account configuration',
        ),
    ],
)
def test_refusals_with_nats_server_words(text, message):
    errs = errors(text)
    assert len(errs) == 1 and errs[0].endswith(message) and errs[0].startswith("t.conf:")


def test_no_port_means_nothing_is_checked():
    # nats-server validates nothing when the block has no port
    assert opts('mqtt { ack_wait: "-1s" }').mqtt.port == 0


def test_jetstream_is_required_at_start_after_flags():
    from natsd.config.lexer import ConfigError
    from natsd.config.mqtt import check_mqtt_startup

    o = opts("mqtt { port: 1883 }")  # the file alone is fine: `-js` may come from the command line
    with pytest.raises(ConfigError) as ei:
        check_mqtt_startup(o)
    assert str(ei.value) == "t.conf:1:1: mqtt requires JetStream to be enabled if running in standalone mode"
    o.jetstream.enabled = True
    check_mqtt_startup(o)
    # a leafnode remote stands in for JetStream (the hub may hold the streams)
    check_mqtt_startup(opts('leafnodes { remotes: [ { url: "nats-leaf://hub:7422" } ] }\nmqtt { port: 1883 }'))
