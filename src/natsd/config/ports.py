"""Port ranges: every listening port is -1 (a random port), 0 (off / the default) or 1-65535.

Python's socket layer takes a port modulo 65536 (``-p 82000`` listened on 16464), so an
out-of-range value silently served somewhere else. nats-server refuses it at start with Go's
``listen tcp: address 82000: invalid port`` inside one ``[FTL]`` line per listener; natsd
refuses it the same way (:func:`listen_problems`, the wording of each of nats-server's lines) and,
better than nats-server (whose ``-t`` says "valid"), reports config-file values with their
``file:line:column`` (:func:`check_tree_ports`, used by the config check and the start alike).
"""

from __future__ import annotations

from typing import Any

from natsd.config.lexer import ConfigError
from natsd.config.parser import ConfigMap
from natsd.protocolbase import Protocol

__all__ = [
    "InvalidPortError",
    "PortConfigError",
    "PORT_MAX",
    "port_in_range",
    "go_invalid_port",
    "listen_problems",
    "check_tree_ports",
]

PORT_MAX = 65535
_RANDOM = -1  # nats-server's RANDOM_PORT


class InvalidPortError(OSError):
    """A listener's port is out of range; ``str()`` is nats-server's whole ``[FTL]`` text."""


class PortConfigError(ConfigError):
    """An out-of-range port in a config file. ``option`` names the flag destination that replaces
    the value (``port``, ``http_port``, ``https_port``; "" for ports of blocks): a flag given on the
    command line wins over the file, as in nats-server, so then the file's value is no error."""

    def __init__(self, message: str, option: str, file: str = "", line: int = 0, column: int = 0) -> None:
        self.option = option
        super().__init__(message, file, line, column)


def port_in_range(port: int) -> bool:
    return _RANDOM <= port <= PORT_MAX


def go_invalid_port(port: int) -> str:
    """Go's net.Listen error for a port it cannot represent (what nats-server logs)."""
    return f"listen tcp: address {port}: invalid port"


def listen_problems(o: Any) -> list[str]:
    """nats-server's ``[FTL]`` text for each listener whose port is out of range (``o`` is a
    :class:`natsd.config.options.ServerOptions`; flags and embedding set ports past the config
    check, so the server checks again before it binds anything)."""
    out: list[str] = []
    if not port_in_range(o.port):
        out.append(f'Error listening on port: {o.host or "0.0.0.0"}:{o.port}, "{go_invalid_port(o.port)}"')
    for p in (o.http_port, o.https_port):
        if not port_in_range(p):
            out.append(f"Can't start monitoring: can't listen to the monitor port: {go_invalid_port(p)}")
    ws = o.websocket.port
    if not port_in_range(ws):
        out.append(f"Unable to listen for websocket connections: {go_invalid_port(ws)}")
    ln = o.leafnodes
    if ln is not None and not port_in_range(ln.port):
        out.append(f"Error listening on leafnode port: {ln.port} - {go_invalid_port(ln.port)}")
    return out


# Keys that hold a port (a number, or "host:port" for the listen forms), at the top level and in
# each listener block nats-server knows (cluster, gateway and mqtt included: natsd ignores those
# blocks, but a file that nats-server would refuse at start should not pass natsd's check).
_TOP_KEYS = {
    "port": "port",
    "listen": "port",
    "http": "http_port",
    "http_port": "http_port",
    "monitor_port": "http_port",
    "https": "https_port",
    "https_port": "https_port",
    "prof_port": "",
}
_BLOCKS = ("websocket", "leafnodes", "leaf", "cluster", "gateway", "mqtt")
_BLOCK_KEYS = {"port": "", "listen": ""}


def _port_of(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        _, sep, port = v.rpartition(":")
        if sep:
            try:
                return int(port, 10)
            except ValueError:
                return None  # the typed parse reports it
    return None


class _ErrorSink(Protocol):
    """What the checks need of natsd.config.options._Ctx: the list the parse's errors go to."""

    errors: list[ConfigError]


def _check_map(ctx: _ErrorSink, m: ConfigMap, keys: dict[str, str]) -> None:
    for k in m:
        option = keys.get(k.lower())
        if option is None:
            continue
        port = _port_of(m[k])
        if port is not None and not port_in_range(port):
            pos = m.pos(k)
            msg = f"invalid port {port} (ports are 0-65535, -1 for a random port): {go_invalid_port(port)}"
            ctx.errors.append(
                PortConfigError(msg, option, pos.file, pos.line, pos.column)
                if pos is not None
                else PortConfigError(msg, option)
            )


def check_tree_ports(ctx: _ErrorSink, tree: ConfigMap) -> None:
    """Report every out-of-range port of a config tree at its position (``ctx`` is
    natsd.config.options._Ctx, passed in so this module stays a leaf of options.py)."""
    _check_map(ctx, tree, _TOP_KEYS)
    for k in tree:
        if k.lower() in _BLOCKS and isinstance(tree[k], ConfigMap):
            _check_map(ctx, tree[k], _BLOCK_KEYS)
