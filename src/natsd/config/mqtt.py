"""The ``mqtt {}`` block, as nats-server reads it (its parseMQTT and validateMQTTOptions)::

    mqtt {
      port: 1883                      # or listen: "host:port"; host/net; 0 or absent = no listener
      tls { cert_file, key_file, ca_file, verify, verify_and_map, timeout, ... }
      authorization {                 # (alias authentication) one user or a token, MQTT clients only
        user: u, password: p          # (username / pass), or token: t
        timeout: 2                    # seconds (float ok)
      }
      no_auth_user: someone           # a user of the server's users list
      ack_wait: "30s"                 # JetStream consumers' AckWait for QoS 1/2 deliveries
      js_api_timeout: "5s"            # (api_timeout)
      max_ack_pending: 1024           # (max_pending, max_inflight): 0..65535
      js_domain: hub                  # where the $MQTT_ streams live
      stream_replicas: 1
      consumer_replicas: 1            # accepted and ignored, with nats-server's warning
      consumer_memory_storage: false
      consumer_inactive_threshold: "0s"   # (consumer_auto_cleanup)
      reject_qos2_publish: false
      downgrade_qos2_subscribe: false
    }

Unknown keys are errors here (not warnings), as in the reference. Refusals that nats-server makes
once the whole configuration is known are reported with its words at the block's position:
:func:`validate_mqtt` (with the file) -- an ``authorization`` user or token cannot be mixed with a
users/nkeys list, ``no_auth_user`` must exist, durations must be positive -- and
:func:`check_mqtt_startup` (at start, after the command-line flags) -- JetStream is required for a
standalone server.
"""

from __future__ import annotations


from natsd.lazydataclass import dataclass
from natsd.config.lexer import ConfigError
from natsd.config.parser import ConfigMap
from natsd.config.tls import TLSOptions, parse_tls_block

__all__ = [
    "MQTTOptions",
    "parse_mqtt",
    "validate_mqtt",
    "check_mqtt_startup",
    "DEFAULT_ACK_WAIT_NS",
    "DEFAULT_MAX_ACK_PENDING",
    "DEFAULT_JS_API_TIMEOUT_NS",
]

SECOND_NS = 1_000_000_000
DEFAULT_ACK_WAIT_NS = 30 * SECOND_NS  # mqttDefaultAckWait
DEFAULT_MAX_ACK_PENDING = 1024  # mqttDefaultMaxAckPending
DEFAULT_JS_API_TIMEOUT_NS = 5 * SECOND_NS  # mqttDefaultJSAPITimeout


@dataclass(slots=True)
class MQTTOptions:
    """nats-server's MQTTOpts. Zero values mean "the default" where the reference does so
    (``ack_wait_ns``, ``max_ack_pending``, ``js_api_timeout_ns``); see the ``effective_*``
    properties."""

    host: str = ""  # "" = the server's host
    port: int = 0  # 0 = no MQTT listener (-1: a random port)
    tls: TLSOptions | None = None
    username: str = ""
    password: str = ""
    token: str = ""
    auth_timeout_s: float = 0.0
    no_auth_user: str = ""
    ack_wait_ns: int = 0
    js_api_timeout_ns: int = 0
    max_ack_pending: int = 0
    js_domain: str = ""
    stream_replicas: int = 0
    consumer_memory_storage: bool = False
    consumer_inactive_threshold_ns: int = 0
    reject_qos2_publish: bool = False
    downgrade_qos2_subscribe: bool = False
    pos: str = ""  # file:line:col of the block

    @property
    def effective_ack_wait_ns(self) -> int:
        return self.ack_wait_ns or DEFAULT_ACK_WAIT_NS

    @property
    def effective_max_ack_pending(self) -> int:
        return self.max_ack_pending or DEFAULT_MAX_ACK_PENDING

    @property
    def effective_js_api_timeout_ns(self) -> int:
        return self.js_api_timeout_ns or DEFAULT_JS_API_TIMEOUT_NS


def _simple_auth(ctx, m, key: str, mo: MQTTOptions) -> None:
    """nats-server parseSimpleAuth: user/username, pass/password, token, timeout (seconds)."""
    block = ctx.map_(m, key)
    if block is None:
        return
    for k in block:
        kl = k.lower()
        if kl in ("user", "username"):
            mo.username = ctx.str_(block, k) or ""
        elif kl in ("pass", "password"):
            mo.password = ctx.str_(block, k) or ""
        elif kl == "token":
            mo.token = ctx.str_(block, k) or ""
        elif kl == "timeout":
            v = block[k]
            mo.auth_timeout_s = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 1.0
        elif k not in block.used_vars:
            ctx.error(block.pos(k), f'unknown field "{k}"')


def parse_mqtt(ctx, o, m, key: str, host_port) -> None:
    """Read ``m[key]`` into ``o.mqtt`` (``host_port``: the options' listen parser)."""
    block = m[key]
    if not isinstance(block, ConfigMap):
        ctx.error(m.pos(key), f"Expected mqtt to be a map, got {type(block).__name__}")
        return
    pos = m.pos(key)
    mo = MQTTOptions(pos=str(pos) if pos is not None else "")
    for k in block:
        kl = k.lower()
        kpos = block.pos(k)
        if kl == "listen":
            hp = host_port(ctx, block, k)
            if hp is not None:
                mo.host, mo.port = hp
        elif kl == "port":
            v = ctx.int_(block, k)
            if v is not None:
                mo.port = v
        elif kl in ("host", "net"):
            mo.host = ctx.str_(block, k) or ""
        elif kl == "tls":
            mo.tls = parse_tls_block(ctx, block, k)
        elif kl in ("authorization", "authentication"):
            _simple_auth(ctx, block, k, mo)
        elif kl == "no_auth_user":
            mo.no_auth_user = ctx.str_(block, k) or ""
        elif kl in ("ack_wait", "ackwait"):
            d = ctx.duration(block, k)
            if d is not None:
                mo.ack_wait_ns = d
        elif kl in ("js_api_timeout", "api_timeout"):
            d = ctx.duration(block, k)
            if d is not None:
                mo.js_api_timeout_ns = d
        elif kl in ("max_ack_pending", "max_pending", "max_inflight"):
            v = ctx.int_(block, k)
            if v is not None:
                if v < 0 or v > 0xFFFF:
                    ctx.error(kpos, f"invalid value {v}, should in [0..{0xFFFF}] range")
                else:
                    mo.max_ack_pending = v
        elif kl == "js_domain":
            mo.js_domain = ctx.str_(block, k) or ""
        elif kl == "stream_replicas":
            v = ctx.int_(block, k)
            if v is not None:
                mo.stream_replicas = v
        elif kl == "consumer_replicas":
            ctx.warn(kpos, "consumer replicas setting ignored in this server version")
        elif kl == "consumer_memory_storage":
            b = ctx.bool_(block, k)
            if b is not None:
                mo.consumer_memory_storage = b
        elif kl in ("consumer_inactive_threshold", "consumer_auto_cleanup"):
            d = ctx.duration(block, k)
            if d is not None:
                mo.consumer_inactive_threshold_ns = d
        elif kl in ("reject_qos2_publish", "downgrade_qos2_subscribe"):
            b = ctx.bool_(block, k)
            if b is not None:
                setattr(mo, kl, b)
        elif k not in block.used_vars:
            # nats-server: an unknown field inside mqtt {} is an error, pedantic or not.
            ctx.error(kpos, f'unknown field "{k}"')
    o.mqtt = mo


def validate_mqtt(ctx, o, tree) -> None:
    """nats-server's validateMQTTOptions (run at start-up there; here with the config, so the
    message also carries the block's file:line:column). Nothing is checked without a port."""
    mo: MQTTOptions | None = o.mqtt
    if mo is None or mo.port == 0:
        return
    pos = tree.pos(next((k for k in tree if k.lower() == "mqtt"), ""))
    if mo.no_auth_user:
        if (
            not any(u.user == mo.no_auth_user for u in o.users)
            and not any(u.nkey == mo.no_auth_user for u in o.nkeys)
            and not any(u.user == mo.no_auth_user for a in o.accounts for u in a.users)
        ):
            ctx.error(
                pos,
                f'no_auth_user: "{mo.no_auth_user}" not present as user or nkey in '
                "authorization block or account configuration",
            )
            return
    if o.users or o.nkeys:
        if mo.username:
            ctx.error(pos, "mqtt authentication username not compatible with presence of users/nkeys")
            return
        if mo.token:
            ctx.error(pos, "mqtt authentication token not compatible with presence of users/nkeys")
            return
    if mo.ack_wait_ns < 0:
        ctx.error(pos, "ack wait must be a positive value")
        return
    if mo.js_api_timeout_ns < 0:
        ctx.error(pos, "JS API timeout must be a positive value")
        return


def check_mqtt_startup(o) -> None:
    """The refusal nats-server makes at start-up once flags are applied (``-js`` may enable
    JetStream after the file was read): raises :class:`ConfigError` with its words (and the
    block's position). natsd has no cluster or gateway, so "standalone" reduces to: JetStream on,
    or a leafnode configuration (the hub may hold the streams)."""
    mo: MQTTOptions | None = o.mqtt
    if mo is None or mo.port == 0:
        return
    ln = o.leafnodes
    if not o.jetstream.enabled and (ln is None or (not ln.port and not ln.remotes)):
        msg = "mqtt requires JetStream to be enabled if running in standalone mode"
        parts = mo.pos.rsplit(":", 2) if mo.pos else []
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            raise ConfigError(msg, parts[0], int(parts[1]), int(parts[2]))
        raise ConfigError(msg)
