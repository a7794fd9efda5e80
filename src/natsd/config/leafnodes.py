"""The ``leafnodes {}`` block, as nats-server configures it::

    leafnodes {
      port: 7422                       # or listen: "host:port"; accepting side (others connect to us)
      authorization {                  # who may connect as a leaf: user/password, one nkey, or users: [...]
        user: leaf, password: s3cr3t, account: EDGE     # (or nkey: U..., account: EDGE)
        timeout: 2
      }
      tls { cert_file, key_file, ca_file, verify, verify_and_map, timeout, handshake_first, ... }
      compression: s2_auto             # off | accept | s2_fast | s2_better | s2_best | s2_auto (default)
                                       # or {mode: s2_auto, rtt_thresholds: ["10ms", "50ms", "100ms"]}
      reconnect: "1s"                  # delay between attempts of a remote (doubled per failure, capped)
      remotes: [                       # soliciting side (we connect to a hub)
        { url: "nats-leaf://user:pass@hub:7422", account: "$G",
          credentials: "/path/user.creds", deny_imports: ["secret.>"], deny_exports: [...],
          tls { ... }, compression: ..., hub: false }
        { url: "ws://hub:8080" }       # over WebSocket (ws_compression: permessage-deflate)
      ]
    }

``leaf`` is the reference's alias for the block. ``urls: [...]`` lists several URLs of one remote
(tried in turn). Both ``tls {}`` blocks are read by :func:`natsd.config.tls.parse_tls_block` (the
client port's TLS options): the accepting side's is a server context (certificate required, files
checked here), a remote's a client one (:func:`natsd.config.tls.build_client_context`, via
:func:`natsd.server.leaf.node.remote_ssl_context`). Without an ``authorization`` block the accepting
side authenticates leafs with the server's own users, nkeys or operator JWTs (as nats-server);
``verify_and_map`` in its ``tls {}`` maps a leaf's certificate to one of ``authorization.users``.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any
from urllib.parse import unquote, urlsplit

from natsd.lazydataclass import dataclass
from natsd.config.parser import ConfigMap
from natsd.redact import redact

__all__ = ["LeafNodeOptions", "RemoteLeafOptions", "LeafUser", "parse_leafnodes", "validate_leafnodes"]

SECOND_NS = 1_000_000_000
DEFAULT_RECONNECT_NS = 1 * SECOND_NS  # nats-server DEFAULT_LEAF_NODE_RECONNECT
DEFAULT_LEAF_PORT = 7422

# Compression of a link (nats-server's CompressionOpts; the default of both the accepting block
# and every remote is "s2_auto", as nats-server's setBaselineOptions sets it).
COMPRESSION_NOT_SUPPORTED = "not supported"
COMPRESSION_OFF = "off"
COMPRESSION_ACCEPT = "accept"
COMPRESSION_S2_AUTO = "s2_auto"
COMPRESSION_S2_UNCOMPRESSED = "s2_uncompressed"
COMPRESSION_S2_FAST = "s2_fast"
COMPRESSION_S2_BETTER = "s2_better"
COMPRESSION_S2_BEST = "s2_best"
DEFAULT_COMPRESSION = COMPRESSION_S2_AUTO
# s2_auto: an RTT up to 10ms -> s2_uncompressed, up to 50ms -> s2_fast, up to 100ms -> s2_better,
# above -> s2_best (nats-server defaultCompressionS2AutoRTTThresholds).
DEFAULT_RTT_THRESHOLDS_NS = (10_000_000, 50_000_000, 100_000_000)
_MODE_SPELLINGS = {
    "not supported": COMPRESSION_NOT_SUPPORTED,
    "not_supported": COMPRESSION_NOT_SUPPORTED,
    "disabled": COMPRESSION_OFF,
    "off": COMPRESSION_OFF,
    "false": COMPRESSION_OFF,
    "accept": COMPRESSION_ACCEPT,
    "auto": COMPRESSION_S2_AUTO,
    "s2_auto": COMPRESSION_S2_AUTO,
    "fast": COMPRESSION_S2_FAST,
    "s2_fast": COMPRESSION_S2_FAST,
    "better": COMPRESSION_S2_BETTER,
    "s2_better": COMPRESSION_S2_BETTER,
    "best": COMPRESSION_S2_BEST,
    "s2_best": COMPRESSION_S2_BEST,
}


@dataclass(slots=True)
class LeafUser:
    user: str
    password: str = ""
    account: str = ""


@dataclass(slots=True)
class RemoteLeafOptions:
    urls: list[str] = field(default_factory=list)
    account: str = ""  # the local account bound to the link ("" = $G)
    credentials: str = ""
    nkey: str = ""  # seed
    tls: Any = None  # tls {}: natsd.config.tls.TLSOptions (see remote_ssl_context)
    deny_imports: list[str] = field(default_factory=list)
    deny_exports: list[str] = field(default_factory=list)
    hub: bool = False
    name: str = ""
    compression: str = DEFAULT_COMPRESSION  # see compression_option
    compression_rtts_ns: list[int] = field(default_factory=lambda: list(DEFAULT_RTT_THRESHOLDS_NS))
    ws_compression: bool = False  # ws:// remotes: offer permessage-deflate (then no S2 on the link)
    no_randomize: bool = False  # dont_randomize: dial the URLs in the order given (else shuffled once)


@dataclass(slots=True)
class LeafNodeOptions:
    host: str = "0.0.0.0"
    port: int = 0  # 0 = no accepting listener (-1: random port, for tests)
    users: list[LeafUser] = field(default_factory=list)
    username: str = ""
    password: str = ""
    account: str = ""  # account of the single authorization user
    auth_timeout_ns: int = 2 * SECOND_NS
    reconnect_ns: int = DEFAULT_RECONNECT_NS
    remotes: list[RemoteLeafOptions] = field(default_factory=list)
    advertise: str = ""
    nkey: str = ""  # authorization { nkey: U... }: the one leaf identity (public user key)
    tls: Any = None  # tls {} of the accepting port: natsd.config.tls.TLSOptions
    compression: str = DEFAULT_COMPRESSION  # see compression_option
    compression_rtts_ns: list[int] = field(default_factory=lambda: list(DEFAULT_RTT_THRESHOLDS_NS))

    @property
    def auth_required(self) -> bool:
        """An ``authorization {}`` of the leafnode block decides (else the server's own auth)."""
        return bool(self.users or self.username or self.nkey)


def _tls_block(ctx, m, k):
    """A remote's ``tls {}``: the client port's TLS options, checked as a client context (a
    remote needs no certificate of its own, only a CA to trust the hub, or neither)."""
    from natsd.config.tls import TLSConfigError, build_client_context, parse_tls_block

    tls = parse_tls_block(ctx, m, k, check_files=False)
    if tls is not None:
        try:
            build_client_context(tls)
        except TLSConfigError as e:
            ctx.error(m.pos(k), str(e))
            return None
    return tls


def _subjects(ctx, m, k) -> list[str]:
    v = m[k]
    if isinstance(v, str):
        return [v]
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return list(v)
    ctx.error(m.pos(k), f"{k}: expected a subject or a list of subjects")
    return []


def _remote(ctx, m, pos) -> RemoteLeafOptions | None:
    if not isinstance(m, ConfigMap):  # (the parser makes every map a ConfigMap)
        ctx.error(pos, "leafnodes remote: expected a map")
        return None
    r = RemoteLeafOptions()
    for k in m:
        kl = k.lower()
        v = m[k]
        if kl in ("url", "urls"):
            vals = [v] if isinstance(v, str) else v
            if not isinstance(vals, list) or not all(isinstance(x, str) for x in vals):
                ctx.error(m.pos(k), f"{k}: expected a URL or a list of URLs")
                continue
            for u in vals:
                sp = urlsplit(u if "://" in u else "nats-leaf://" + u)
                if not sp.hostname:
                    ctx.error(m.pos(k), f'could not parse leafnode remote url "{redact(u)}"')
                    continue
                r.urls.append(u if "://" in u else "nats-leaf://" + u)
        elif kl in ("account", "local"):
            r.account = ctx.str_(m, k) or ""
        elif kl in ("credentials", "creds"):
            r.credentials = ctx.str_(m, k) or ""
        elif kl in ("nkey", "seed"):
            r.nkey = ctx.str_(m, k) or ""
        elif kl == "tls":
            r.tls = _tls_block(ctx, m, k)
        elif kl == "deny_imports":
            r.deny_imports = _subjects(ctx, m, k)
        elif kl == "deny_exports":
            r.deny_exports = _subjects(ctx, m, k)
        elif kl == "hub":
            r.hub = bool(ctx.bool_(m, k))
        elif kl == "name":
            r.name = ctx.str_(m, k) or ""
        elif kl == "compression":
            c = compression_option(ctx, m, k)
            if c is not None:
                r.compression, r.compression_rtts_ns = c
        elif kl == "ws_compression":
            r.ws_compression = bool(ctx.bool_(m, k))
        elif kl == "ws_no_masking":
            # Asking the hub not to need masked frames is an optimisation it may refuse; natsd
            # always masks (what nats-server's leaf falls back to), which every hub accepts.
            ctx.bool_(m, k)
        elif kl in ("dont_randomize", "no_randomize"):
            r.no_randomize = bool(ctx.bool_(m, k))
        elif kl in ("first_info_timeout", "disable", "proxy", "request_isolation", "local_isolation"):
            ctx.unsupported(m, k)
        else:
            ctx.unknown(m, k)
    if not r.urls:
        ctx.error(pos, "leafnodes remote: no url")
        return None
    if len({is_ws_url(u) for u in r.urls}) > 1:
        ctx.error(
            pos,
            "remote leaf node configuration cannot have a mix of websocket and non-websocket urls: "
            f"{[redact(u) for u in r.urls]}",
        )
        return None
    return r


def parse_leafnodes(ctx, o, m, key: str) -> None:
    """Fill ``o.leafnodes`` from ``m[key]`` (errors and warnings go to ``ctx``)."""
    from natsd.config.options import _host_port  # here, not at the top: options imports this module

    b = ctx.map_(m, key)
    if b is None:
        return
    ln = LeafNodeOptions()
    for k in b:
        kl = k.lower()
        if kl == "port":
            p = ctx.int_(b, k)
            if p is not None:
                ln.port = p
        elif kl in ("host", "net"):
            ln.host = ctx.str_(b, k) or ln.host
        elif kl == "listen":
            hp = _host_port(ctx, b, k)
            if hp is not None:
                if hp[0]:
                    ln.host = hp[0]
                ln.port = hp[1]
        elif kl == "advertise":
            ln.advertise = ctx.str_(b, k) or ""
        elif kl == "reconnect":
            ns = ctx.duration(b, k)
            if ns is not None:
                ln.reconnect_ns = ns
        elif kl == "remotes":
            v = b[k]
            if not isinstance(v, list):
                ctx.error(b.pos(k), "remotes: expected a list")
                continue
            for item in v:
                r = _remote(ctx, item, b.pos(k))
                if r is not None:
                    ln.remotes.append(r)
        elif kl == "authorization":
            _parse_authorization(ctx, b, k, ln)
        elif kl == "tls":
            from natsd.config.tls import parse_tls_block  # the client port's TLS options

            ln.tls = parse_tls_block(ctx, b, k)
        elif kl == "compression":
            c = compression_option(ctx, b, k)
            if c is not None:
                ln.compression, ln.compression_rtts_ns = c
        else:
            ctx.unsupported(b, k)
    o.leafnodes = ln


def _parse_authorization(ctx, b, k: str, ln: LeafNodeOptions) -> None:
    """``leafnodes { authorization { ... } }``: the credentials remotes must present."""
    a = ctx.map_(b, k)
    if a is None:
        return
    for ak in a:
        akl = ak.lower()
        if akl in ("user", "username"):
            ln.username = ctx.str_(a, ak) or ""
        elif akl in ("pass", "password"):
            ln.password = str(a[ak])
        elif akl == "account":
            ln.account = ctx.str_(a, ak) or ""
        elif akl == "nkey":
            ln.nkey = ctx.str_(a, ak) or ""
            if not _valid_user_nkey(ln.nkey):
                ctx.error(a.pos(ak), "Not a valid public nkey for leafnode authorization")
        elif akl == "timeout":
            tv = a[ak]
            if isinstance(tv, (int, float)) and not isinstance(tv, bool):
                ln.auth_timeout_ns = int(tv * SECOND_NS)
            else:
                ns = ctx.duration(a, ak)
                if ns is not None:
                    ln.auth_timeout_ns = ns
        elif akl == "users":
            users = a[ak]
            if not isinstance(users, list):
                ctx.error(a.pos(ak), "users: expected a list")
                continue
            for u in users:
                if not isinstance(u, dict):
                    ctx.error(a.pos(ak), "users: expected maps")
                    continue
                lu = LeafUser(user="")
                for uk, uv in u.items():
                    ukl = uk.lower()
                    if ukl in ("user", "username"):
                        lu.user = str(uv)
                    elif ukl in ("pass", "password"):
                        lu.password = str(uv)
                    elif ukl == "account":
                        lu.account = str(uv)
                ln.users.append(lu)
        else:
            ctx.unsupported(a, ak)
    _validate_auth(ctx, b.pos(k), ln)


def _valid_user_nkey(key: str) -> bool:
    from natsd.config.jwt import is_public_nkey  # nkeys decoding, shared with the client port

    return is_public_nkey(key, "U")


def _validate_auth(ctx, pos, ln: LeafNodeOptions) -> None:
    """The mixes nats-server refuses (its validateLeafNodeAuthOptions), same words."""
    if not ln.users:
        return
    if ln.username:
        ctx.error(pos, "can not have a single user/pass and a users array")
    if ln.nkey:
        ctx.error(pos, "can not have a single nkey and a users array")
    seen: set[str] = set()
    for u in ln.users:
        if u.user in seen:
            ctx.error(pos, f'duplicate user "{u.user}" detected in leafnode authorization')
        seen.add(u.user)


def validate_leafnodes(ctx, o, tree) -> None:
    """What nats-server checks once the whole config is read (its validateLeafNodeOptions), same
    words: the accounts the block names exist (config accounts, ``$G``, the system account);
    in operator mode no ``users`` and only account public keys."""
    ln = o.leafnodes
    pos = tree.pos(next((k for k in tree if k.lower() in ("leafnodes", "leaf")), ""))
    if not o.trust.enabled:
        known = {a.name for a in o.accounts} | {"", "$G", o.system_account or "$SYS"}
        for acc, where in (
            [(ln.account, "authorization")]
            + [(u.account, "authorization") for u in ln.users]
            + [(r.account, "remote") for r in ln.remotes]
        ):
            if acc not in known:
                ctx.error(pos, f'cannot find local account "{acc}" specified in leafnode {where}')
                return
        return
    from natsd.config.jwt import is_public_nkey

    if ln.users:
        ctx.error(pos, "operator mode does not allow specifying users in leafnode config")
    elif any(not is_public_nkey(r.account, "A") for r in ln.remotes):
        ctx.error(
            pos,
            "operator mode requires account nkeys in remotes. Please add an `account` key to each "
            "remote in your `leafnodes` section, to assign it to an account. Each account value "
            "should be a 56 character public key, starting with the letter 'A'",
        )
    elif ln.port and ln.account and not is_public_nkey(ln.account, "A"):
        ctx.error(pos, "operator mode and non account nkeys are incompatible")


def remote_url_parts(url: str) -> tuple[str, int, str, str]:
    """``(host, port, user, password)`` of a remote URL (default port 7422, ws:// and wss:// too:
    nats-server's setBaselineOptions gives every remote URL without a port 7422)."""
    sp = urlsplit(url if "://" in url else "nats-leaf://" + url)
    return (
        sp.hostname or "127.0.0.1",
        sp.port or DEFAULT_LEAF_PORT,
        unquote(sp.username or ""),
        unquote(sp.password or ""),
    )


def is_ws_url(url: str) -> bool:
    """A ``ws://`` or ``wss://`` remote: the link runs over WebSocket (nats-server's isWSURL)."""
    return url.lower().startswith(("ws://", "wss://"))


def compression_option(ctx, m, k) -> tuple[str, list[int]] | None:
    """``compression`` of the leafnodes block or of a remote, as nats-server reads it: a mode
    string, a boolean (true: s2_auto, false: off) or ``{mode: ..., rtt_thresholds: [...]}``; the
    mode normalised (``fast`` -> ``s2_fast``, ``disabled`` -> ``off``, ...) and, for s2_auto,
    its RTT thresholds (ascending; a 0 disables that level; at most 4)."""
    v = m[k]
    rtts: list[int] = []
    if isinstance(v, bool):
        mode = COMPRESSION_S2_AUTO if v else COMPRESSION_OFF
    elif isinstance(v, str):
        mode = v
    elif isinstance(v, dict):
        mode = ""
        for mk, mv in v.items():
            mkl = mk.lower()
            if mkl == "mode" and isinstance(mv, str):
                mode = mv
            elif mkl in ("rtt_thresholds", "thresholds", "rtts", "rtt") and isinstance(mv, list):
                from natsd.gotime import parse_duration

                for d in mv:
                    try:
                        rtts.append(max(parse_duration(str(d)), 0))
                    except ValueError as e:
                        ctx.error(m.pos(k), str(e))
                        return None
            else:
                ctx.error(m.pos(k), f'unknown field "{mk}"')
                return None
    else:
        ctx.error(m.pos(k), f'field "{k}" should be a boolean or a structure, got {type(v).__name__}')
        return None
    ml = mode.lower()
    if ml in ("on", "enabled", "true"):
        ml = COMPRESSION_S2_AUTO
    norm = _MODE_SPELLINGS.get(ml)
    if norm is None:
        ctx.error(m.pos(k), f'unsupported compression mode "{mode}"')
        return None
    if norm != COMPRESSION_S2_AUTO:
        return norm, list(DEFAULT_RTT_THRESHOLDS_NS)
    if not rtts:
        return norm, list(DEFAULT_RTT_THRESHOLDS_NS)
    for i, n in enumerate(rtts):
        if n and any(n < p for p in rtts[:i]):
            ctx.error(m.pos(k), f"RTT threshold values {v.get('rtt_thresholds', rtts)} should be in ascending order")
            return None
    while rtts and rtts[-1] == 0:
        rtts.pop()
    if len(rtts) > 4:
        ctx.error(m.pos(k), f'compression mode "{mode}" should have no more than 4 RTT thresholds')
        return None
    if not rtts:
        ctx.error(m.pos(k), f'compression mode "{mode}" requires at least one RTT threshold')
        return None
    return norm, rtts
