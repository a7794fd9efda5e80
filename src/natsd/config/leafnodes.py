"""The ``leafnodes {}`` block, as nats-server configures it::

    leafnodes {
      port: 7422                       # or listen: "host:port"; accepting side (others connect to us)
      authorization {                  # who may connect as a leaf (user/password, users: [...])
        user: leaf, password: s3cr3t, account: EDGE
        timeout: 2
      }
      reconnect: "1s"                  # delay between attempts of a remote (doubled per failure, capped)
      remotes: [                       # soliciting side (we connect to a hub)
        { url: "nats-leaf://user:pass@hub:7422", account: "$G",
          credentials: "/path/user.creds", deny_imports: ["secret.>"], deny_exports: [...],
          tls { ... } }
      ]
    }

``leaf`` is the reference's alias for the block. ``urls: [...]`` lists several URLs of one remote
(tried in turn). A remote's ``tls {}`` block is read by :func:`natsd.config.tls.parse_tls_block`
(the client port's TLS options) and turned into an ``SSLContext`` by
:func:`natsd.server.leafnode.remote_ssl_context`, the one hook where client-side TLS plugs in.
``tls`` on the accepting side is refused (a config error), never silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from natsd.config.parser import ConfigMap

__all__ = ["LeafNodeOptions", "RemoteLeafOptions", "LeafUser", "parse_leafnodes"]

SECOND_NS = 1_000_000_000
DEFAULT_RECONNECT_NS = 1 * SECOND_NS  # nats-server DEFAULT_LEAF_NODE_RECONNECT
DEFAULT_LEAF_PORT = 7422


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

    @property
    def auth_required(self) -> bool:
        return bool(self.users or self.username)


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _tls_block(ctx, m, k):
    """A remote's ``tls {}``: natsd's TLS options when the TLS module is there, else the raw map
    (:func:`natsd.server.leafnode.remote_ssl_context` then refuses the remote, clearly)."""
    try:
        from natsd.config.tls import parse_tls_block  # the shared TLS plumbing (client port's)
    except ImportError:
        t = ctx.map_(m, k)
        return _plain(t) if t is not None else None
    return parse_tls_block(ctx, m, k)


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
                    ctx.error(m.pos(k), f'could not parse leafnode remote url "{u}"')
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
        elif kl in ("compression", "ws_compression", "ws_no_masking", "first_info_timeout", "dont_randomize",
                    "no_randomize", "disable", "proxy", "request_isolation", "local_isolation"):
            ctx.unsupported(m, k)
        else:
            ctx.unknown(m, k)
    if not r.urls:
        ctx.error(pos, "leafnodes remote: no url")
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
            a = ctx.map_(b, k)
            if a is None:
                continue
            for ak in a:
                akl = ak.lower()
                if akl in ("user", "username"):
                    ln.username = ctx.str_(a, ak) or ""
                elif akl in ("pass", "password"):
                    ln.password = str(a[ak])
                elif akl == "account":
                    ln.account = ctx.str_(a, ak) or ""
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
        elif kl == "tls":
            # Refused rather than ignored: ignoring it would serve the leafnode port in plaintext.
            ctx.error(b.pos(k), "leafnodes tls (TLS on the accepting leafnode port) is not supported by natsd")
        else:
            ctx.unsupported(b, k)
    o.leafnodes = ln


def remote_url_parts(url: str) -> tuple[str, int, str, str]:
    """``(host, port, user, password)`` of a remote URL (default port 7422)."""
    sp = urlsplit(url if "://" in url else "nats-leaf://" + url)
    return (sp.hostname or "127.0.0.1", sp.port or DEFAULT_LEAF_PORT,
            unquote(sp.username or ""), unquote(sp.password or ""))
