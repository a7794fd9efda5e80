"""NATS header blocks: ``NATS/1.0[ <code>[ <description>]]\\r\\n(<Key>: <Value>\\r\\n)*\\r\\n``.

The first line is the version, optionally followed by an inline status (used by the server for
no-responders ``503``, pull ``404 No Messages``/``408 Request Timeout``, heartbeats ``100 Idle
Heartbeat`` ...). Header lines follow, then an empty line. Keys keep their case on the wire
(``Nats-Msg-Id``, ``Nats-Subject``); lookups here are case-sensitive like nats-server's.

Example (no responders, 38 bytes, as the reference sends it)::

    NATS/1.0 503\\r\\nNats-Subject: nobody\\r\\n\\r\\n
"""

from __future__ import annotations

from typing import Iterable, Mapping

__all__ = [
    "HDR_LINE",
    "build_header",
    "build_status_header",
    "parse_headers",
    "get_header",
    "get_header_bytes",
    "nats_headers",
    "remove_header",
    "replace_header",
    "STATUS_NO_RESPONDERS",
]

HDR_LINE = b"NATS/1.0"
_CRLF = b"\r\n"
STATUS_NO_RESPONDERS = 503


def _lines(headers: Mapping[str, str] | Iterable[tuple[str, str]] | None) -> list[bytes]:
    if not headers:
        return []
    items = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    for k, v in items:
        if "\r" in k or "\n" in k or ":" in k or "\r" in str(v) or "\n" in str(v):
            raise ValueError(f"header {k!r} contains CR/LF or ':' in its name")
        out.append(f"{k}: {v}".encode())
    return out


def build_header(headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None) -> bytes:
    """``NATS/1.0\\r\\n`` + ``Key: Value\\r\\n`` lines + ``\\r\\n``."""
    return _CRLF.join([HDR_LINE, *_lines(headers), b""]) + _CRLF


def build_status_header(
    code: int, description: str = "", headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None
) -> bytes:
    """A status block: ``NATS/1.0 <code>[ <description>]\\r\\n`` + header lines + ``\\r\\n``.

    >>> build_status_header(404, "No Messages")
    b'NATS/1.0 404 No Messages\\r\\n\\r\\n'
    """
    first = b"NATS/1.0 %d" % code
    if description:
        first += b" " + description.encode()
    return _CRLF.join([first, *_lines(headers), b""]) + _CRLF


def parse_headers(block: bytes) -> tuple[int | None, str, dict[str, list[str]]]:
    """Parse a header block into ``(status, description, {key: [values]})``.

    ``status`` is ``None`` when the first line carries no status. Raises ``ValueError`` when the
    block does not start with ``NATS/1.0``.
    """
    if not block.startswith(HDR_LINE):
        raise ValueError("header block does not start with NATS/1.0")
    lines = block.split(_CRLF)
    first = lines[0][len(HDR_LINE) :].strip()
    status: int | None = None
    desc = ""
    if first:
        code, _, rest = first.partition(b" ")
        if code.isdigit():
            status = int(code)
            desc = rest.decode("utf-8", "replace").strip()
    out: dict[str, list[str]] = {}
    for line in lines[1:]:
        if not line:
            continue
        k, sep, v = line.partition(b":")
        if not sep:
            continue
        out.setdefault(k.decode("utf-8", "replace").strip(), []).append(v.decode("utf-8", "replace").strip())
    return status, desc, out


def get_header_bytes(block: bytes | None, key: bytes) -> bytes | None:
    """The first value of ``key`` in ``block`` as bytes, or ``None`` when absent.

    nats-server's ``sliceHeader``, rule for rule: the name is case-sensitive and must start a
    line (right after a CRLF, so never the ``NATS/1.0`` line) and be followed at once by ``:``;
    spaces before the value are skipped, nothing after it is trimmed; the value runs to the
    next CRLF (or the end of a block that lacks one). A present but empty value is ``b""``.
    """
    if not block:
        return None
    needle = b"\r\n" + key + b":"
    i = block.find(needle)
    if i < 0:
        return None
    i += len(needle)
    j = block.find(b"\r\n", i)
    return (block[i:] if j < 0 else block[i:j]).lstrip(b" ")


def remove_header(hdr: bytes, name: bytes) -> bytes:
    """``hdr`` (a ``NATS/1.0`` block) without any ``name:`` line (nor empty lines)."""
    lines = hdr.split(_CRLF)
    kept = [ln for ln in lines[1:] if ln and not ln.startswith(name + b":")]
    return lines[0] + _CRLF + b"".join(ln + _CRLF for ln in kept) + _CRLF


def replace_header(hdr: bytes | None, name: bytes, value: bytes) -> bytes:
    """``name: value`` as the last header of ``hdr`` (a new block when there is none), every
    earlier ``name:`` line dropped: the reference's removeHeaderIfPresent then genHeader (e.g.
    a ``Nats-TTL`` raised to the stream's delete-marker TTL). natsd.jetstream.stream.counters'
    ``set_header`` is the other rule, Go's setHeader: the value replaced where it stands."""
    return remove_header(hdr or HDR_LINE + _CRLF + _CRLF, name)[:-2] + name + b": " + value + _CRLF + _CRLF


def get_header(block: bytes | None, key: str) -> str | None:
    """:func:`get_header_bytes` for a ``str`` name, the value decoded (UTF-8, errors replaced)."""
    v = get_header_bytes(block, key.encode())
    return None if v is None else v.decode("utf-8", "replace")


def nats_headers(block: bytes) -> dict[bytes, bytes]:
    """Every ``Nats-*`` header of ``block`` as ``{name: value}`` in one pass, with the rules of
    :func:`get_header_bytes` (the first of a repeated name wins), for the publish path, which
    looks at several of them per message.

    Only lines starting with ``Nats-`` are split, so an application's own headers cost a prefix
    test each; a block without ``Nats-`` costs one substring search, and a block with a single
    ``Nats-*`` line (the usual ``Nats-Msg-Id`` or ``Nats-Incr``) three, without a split.
    """
    out: dict[bytes, bytes] = {}
    i = block.find(b"\r\nNats-")
    if i < 0:
        return out
    j = block.find(b"\r\n", i + 2)
    if j < 0:
        j = len(block)
    if block.find(b"\r\nNats-", j) < 0:  # the only Nats-* line
        k, sep, v = block[i + 2 : j].partition(b":")
        if sep:
            out[k] = v.lstrip(b" ")
        return out
    lines = block.split(b"\r\n")
    for line in lines[1:]:
        if line.startswith(b"Nats-"):
            k, sep, v = line.partition(b":")
            if sep and k not in out:
                out[k] = v.lstrip(b" ")
    return out
