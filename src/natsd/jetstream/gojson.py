"""Request bodies decoded the way nats-server decodes them, so clients see the same answers and texts.

nats-server reads every ``$JS.API`` request body with Go's ``encoding/json`` ``Decoder`` in strict mode
(``DisallowUnknownFields``), decoding JSON values one after another into the same request struct until
the input ends, and adds ``" at offset N"`` to syntax errors. What a client observes from that:

* an unknown field is refused: ``json: unknown field "max_msg"`` (a typo must not become a silently
  ignored limit); field names match case-insensitively (``DURABLE_NAME`` sets ``durable_name``);
* a value of the wrong JSON kind: ``json: cannot unmarshal string into Go struct field
  JSApiMsgGetRequest.seq of type uint64``; an integer field given ``1.5``, ``-1`` (unsigned) or a value
  out of range names the literal: ``cannot unmarshal number 1.5 into ...``; the field is the request
  struct's name followed by the JSON path (``CreateConsumerRequest.config.max_deliver``);
* a body that is not an object: ``json: cannot unmarshal array into Go value of type
  server.JSApiStreamPurgeRequest``; ``null`` and white space are an empty request;
* a syntax error: the text of the Go release the reference is built with, and the offset of the byte
  after the offending character (``invalid character 'x' looking for beginning of value at offset
  3``, ``invalid escape sequence `\\q` in string at offset 8``); input that ends inside a value:
  ``unexpected EOF``;
* ``{} {}`` is two values decoded into one struct (accepted), ``{}x`` is a syntax error at ``x``;
* the first problem in document order wins; ``null`` leaves a field at its zero value.

:func:`decode` returns the body as a dict with the canonical field names and without ``null`` fields.
Fields whose Go type has its own ``UnmarshalJSON`` (policy enums, ``time.Time``) are passed through
unchecked: their handlers validate them with the reference's own texts.

Python's ``json`` parses valid input (the common case, in C); the Go scanner below runs only to word
an error or to split a body holding several values, so valid requests pay one dict walk.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GoStruct", "GoError", "decode", "go_kind", "Wrapped", "Slice", "Map", "Ptr", "CUSTOM"]


class GoError(ValueError):
    """The text Go's decoder would report (without nats-server's ``invalid JSON: `` prefix)."""


# ---------------------------------------------------------------------------------------------
# Types


@dataclass(frozen=True, slots=True)
class Scalar:
    go_name: str
    kind: str          # "string" | "bool" | "int" | "uint" | "custom"
    bits: int = 64


@dataclass(frozen=True, slots=True)
class Wrapped:
    """A slice (``[]``), a map with string keys (``map[string]``) or a pointer (``*``) of ``elem``.
    Decoding goes through a pointer; its ``*`` shows only inside a slice's element name."""
    prefix: str
    elem: Any

    @property
    def go_name(self) -> str:
        return self.prefix + self.elem.go_name


def Slice(elem: Any) -> Wrapped:  # noqa: N802 - reads as the Go type it builds
    return Wrapped("[]", elem)


def Map(elem: Any) -> Wrapped:  # noqa: N802
    return Wrapped("map[string]", elem)


def Ptr(elem: Any) -> Wrapped:  # noqa: N802
    return Wrapped("*", elem)


@dataclass(slots=True)
class GoStruct:
    name: str                     # Go type name without package, e.g. "JSApiMsgGetRequest"
    fields: dict[str, Any]        # JSON name -> type, in Go struct order (embedded structs flattened)
    open: bool = False            # unknown fields pass unchecked (not a Go request struct)
    _folded: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._folded = {k.lower(): k for k in self.fields}

    @property
    def go_name(self) -> str:
        return "server." + self.name

    def canonical(self, key: str) -> str | None:
        """The field ``key`` names: exact match first, then case-insensitive (as Go)."""
        if key in self.fields:
            return key
        return self._folded.get(key.lower())


STRING = Scalar("string", "string")
BOOL = Scalar("bool", "bool")
INT = Scalar("int", "int")
INT32 = Scalar("int32", "int", 32)
INT64 = Scalar("int64", "int")
UINT64 = Scalar("uint64", "uint")
DURATION = Scalar("time.Duration", "int")
#: A type with its own UnmarshalJSON (enums, times): accepted as is, checked by its handler.
CUSTOM = Scalar("custom", "custom")


def go_kind(val: Any, *, literal: bool = False) -> str:
    """Go's word for a decoded JSON value's kind, as in ``cannot unmarshal <kind> into``.

    ``literal``: the value is a number bound for a numeric field it does not fit (a fraction or
    out of range), where Go names the literal too: ``number 1.5``. (Python's spelling of the
    number; the decoder above keeps the request's own text where it has it.)"""
    if isinstance(val, bool):
        return "bool"
    if isinstance(val, str):
        return "string"
    if isinstance(val, (int, float)):
        return f"number {val!r}" if literal else "number"
    if isinstance(val, list):
        return "array"
    if isinstance(val, dict):
        return "object"
    return "null"


# ---------------------------------------------------------------------------------------------
# Decoding


def decode(data: bytes, struct: GoStruct, strict: bool = True) -> dict:
    """``data`` decoded into ``struct`` as nats-server's unmarshalRequest does (``strict``), or as
    a plain ``json.Unmarshal`` (``strict=False``: unknown fields ignored, one JSON value only,
    Go's own texts without offsets, ``unexpected end of JSON input``); GoError on failure."""
    if not data:
        if strict:
            return {}
        raise GoError("unexpected end of JSON input")
    try:
        val = json.loads(data, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError):
        if strict:
            return _decode_values(data, struct)
        return _unmarshal(data, struct)
    return _Checker(data, struct, strict).value(val)


def _unmarshal(data: bytes, struct: GoStruct) -> dict:
    """The slow path of ``json.Unmarshal``: one value, syntax errors worded without offsets."""
    start = _skip_space(data, 0)
    if start >= len(data):
        raise GoError("unexpected end of JSON input")
    try:
        end = _scan_value(data, start)
    except GoError as e:
        text = str(e)
        if text == "unexpected EOF":
            raise GoError("unexpected end of JSON input") from None
        raise GoError(text.rsplit(" at offset ", 1)[0]) from None
    rest = _skip_space(data, end)
    if rest < len(data):
        raise GoError(str(_syntax(data, "after top-level value", rest)).rsplit(" at offset ", 1)[0])
    val = json.loads(data[start:end].decode("utf-8", "replace"))
    return _Checker(data[start:end], struct, False).value(val)


def _reject_constant(name: str) -> Any:
    raise ValueError(name)  # NaN / Infinity are not JSON to Go


def _decode_values(data: bytes, struct: GoStruct) -> dict:
    """The slow path: several values, or a syntax error to word as Go does."""
    out: dict = {}
    pos = 0
    n = len(data)
    while True:
        start = _skip_space(data, pos)
        if start >= n:
            return out
        end = _scan_value(data, start)  # raises GoError for a syntax error / unexpected EOF
        seg = data[start:end]
        val = json.loads(seg.decode("utf-8", "replace"))
        out.update(_Checker(seg, struct).value(val))
        pos = end


class _Checker:
    """Walks one decoded value against a struct, raising the first error Go would report."""

    __slots__ = ("raw", "root", "strict")

    def __init__(self, raw: bytes, root: GoStruct, strict: bool = True) -> None:
        self.raw = raw
        self.root = root
        self.strict = strict

    def value(self, val: Any) -> dict:
        if val is None:
            return {}
        if not isinstance(val, dict):
            raise GoError(f"json: cannot unmarshal {go_kind(val)} into Go value of type {self.root.go_name}")
        return self._struct(val, self.root, (), ())

    def _struct(self, obj: dict, st: GoStruct, path: tuple, where: tuple) -> dict:
        out = {}
        for key, v in obj.items():
            name = st.canonical(key)
            if name is None:
                if st.open:
                    out[key] = v
                    continue
                if not self.strict:
                    continue  # json.Unmarshal ignores fields it does not know
                raise GoError(f"json: unknown field {_go_quote(key)}")
            if v is None:
                continue
            out[name] = self._check(v, st.fields[name], path + (name,), where + (key,))
        return out

    def _check(self, v: Any, t: Any, path: tuple, where: tuple) -> Any:
        while isinstance(t, Wrapped) and t.prefix == "*":
            t = t.elem
        if isinstance(t, Scalar):
            kind = t.kind
            if kind == "custom":
                return v
            if kind == "string":
                if not isinstance(v, str):
                    self._type_error(go_kind(v), t, path)
            elif kind == "bool":
                if not isinstance(v, bool):
                    self._type_error(go_kind(v), t, path)
            else:
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    self._type_error(go_kind(v), t, path)
                if not isinstance(v, int) or not _fits(v, kind, t.bits):
                    self._type_error("number " + self._literal(where), t, path)
            return v
        if isinstance(t, GoStruct):
            if not isinstance(v, dict):
                self._type_error(go_kind(v), t, path)
            return self._struct(v, t, path, where)
        if isinstance(t, Wrapped):
            if t.prefix == "[]":
                if not isinstance(v, list):
                    self._type_error(go_kind(v), t, path)
                return [None if x is None else self._check(x, t.elem, path + (str(i),), where + (i,))
                        for i, x in enumerate(v)]
            if not isinstance(v, dict):
                self._type_error(go_kind(v), t, path)
            return {k: (None if x is None else self._check(x, t.elem, path + (k,), where + (k,))) for k, x in v.items()}
        raise TypeError(f"not a Go type: {t!r}")

    def _type_error(self, what: str, t: Any, path: tuple) -> None:
        raise GoError(f"json: cannot unmarshal {what} into Go struct field "
                      f"{self.root.name}.{'.'.join(path)} of type {t.go_name}")

    def _literal(self, where: tuple) -> str:
        """The number as written in the request (Go quotes the literal: ``1e3``, ``1000.0``)."""
        node: Any = json.loads(self.raw.decode("utf-8", "replace"), parse_int=_Lit, parse_float=_Lit)
        for step in where:
            node = node[step]
        return str(node)


class _Lit(str):
    """A number literal kept as its text."""


def _fits(v: int, kind: str, bits: int) -> bool:
    if kind == "uint":
        return 0 <= v < (1 << bits)
    return -(1 << (bits - 1)) <= v < (1 << (bits - 1))


def _go_quote(s: str) -> str:
    """Go's %q of a string (close enough: JSON escaping without ASCII forcing)."""
    return json.dumps(s, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# Go's JSON scanner, for the wording and offset of syntax errors (encoding/json's states; the texts are
# those nats-server 2.15.1 answers, checked in tests/integration/test_js_api_decoding_reference.py).

_SPACE = b" \t\r\n"
_DIGITS = b"0123456789"
_HEX = b"0123456789abcdefABCDEF"


def _skip_space(data: bytes, i: int) -> int:
    n = len(data)
    while i < n and data[i] in _SPACE:
        i += 1
    return i


def _quote_char(c: int) -> str:
    if c == 0x27:
        return "'\\''"
    if c == 0x22:
        return "'\"'"
    ch = chr(c)
    if ch.isprintable():
        return f"'{ch}'"
    named = {7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v"}
    if c in named:
        return f"'{named[c]}'"
    return f"'\\x{c:02x}'" if c < 0x80 else f"'\\u{c:04x}'"


def _syntax(data: bytes, context: str, i: int) -> GoError:
    """Go's error for the character starting at byte ``i``: a whole UTF-8 character is named, and
    the offset is that of the byte after it."""
    c = data[i]
    end = i + 1
    if c >= 0x80:
        for k in (2, 3, 4):
            try:
                ch = data[i:i + k].decode("utf-8")
            except UnicodeDecodeError:
                continue
            return GoError(f"invalid character {_quote_rune(ch)} {context} at offset {i + k}")
        return GoError(f"invalid character {_quote_rune(chr(0xFFFD))} {context} at offset {end}")
    return GoError(f"invalid character {_quote_char(c)} {context} at offset {end}")


def _quote_rune(ch: str) -> str:
    return f"'{ch}'" if ch.isprintable() else f"'\\u{ord(ch):04x}'"


def _scan_value(data: bytes, i: int) -> int:
    """End index of the JSON value starting at ``data[i]`` (not white space); GoError otherwise."""
    n = len(data)
    stack: list[str] = []  # "k" object key expected/being read, "v" object value, "a" array element

    def need(j: int) -> int:
        if j >= n:
            raise GoError("unexpected EOF")
        return data[j]

    def value(j: int) -> int:
        """Scan one value at j (white space skipped); returns the index after it (containers open)."""
        j = _skip_space(data, j)
        c = need(j)
        if c == 0x7B:  # {
            return _open(j + 1, "k")
        if c == 0x5B:  # [
            return _open(j + 1, "a")
        if c == 0x22:
            return string(j + 1)
        if c == 0x2D or c in _DIGITS:
            return number(j)
        for word in (b"true", b"false", b"null"):
            if c == word[0]:
                for k in range(1, len(word)):
                    d = need(j + k)
                    if d != word[k]:
                        raise _syntax(data, f"in literal {word.decode()} (expecting {_quote_char(word[k])})", j + k)
                return j + len(word)
        raise _syntax(data, "looking for beginning of value", j)

    def _open(j: int, kind: str) -> int:
        stack.append(kind)
        return -j - 1  # a marker: container opened at j (decoded below)

    def string(j: int) -> int:
        while True:
            c = need(j)
            if c == 0x22:
                return j + 1
            if c == 0x5C:
                e = need(j + 1)
                if e == 0x75:  # \u
                    for k in range(2, 6):
                        if need(j + k) not in _HEX:
                            raise _bad_escape(data, j, j + 6)
                    j += 6
                    continue
                if e not in b'bfnrt\\/"':
                    raise _bad_escape(data, j, j + 2)
                j += 2
                continue
            if c < 0x20:
                raise _syntax(data, "in string", j)
            j += 1

    def number(j: int) -> int:
        if data[j] == 0x2D:
            j += 1
            c = need(j)
            if c not in _DIGITS:
                raise _syntax(data, "in numeric literal", j)
        if data[j] == 0x30:
            j += 1
        else:
            while j < n and data[j] in _DIGITS:
                j += 1
        if j < n and data[j] == 0x2E:
            j += 1
            c = need(j)
            if c not in _DIGITS:
                raise _syntax(data, "in numeric literal", j)
            while j < n and data[j] in _DIGITS:
                j += 1
        if j < n and data[j] in b"eE":
            j += 1
            c = need(j)
            if c in b"+-":
                j += 1
                c = need(j)
            if c not in _DIGITS:
                raise _syntax(data, "in numeric literal", j)
            while j < n and data[j] in _DIGITS:
                j += 1
        return j

    j = value(i)
    while True:
        if j < 0:  # a container was just opened at -j-1
            j = -j - 1
            k = _skip_space(data, j)
            c = need(k)
            if stack[-1] == "k":
                if c == 0x7D:
                    stack.pop()
                    j = k + 1
                elif c == 0x22:
                    j = string(k + 1)
                    j = _after_key(data, j, need)
                    stack[-1] = "v"
                    j = value(j)
                    continue
                else:
                    raise _syntax(data, "looking for beginning of object key string", k)
            else:
                if c == 0x5D:
                    stack.pop()
                    j = k + 1
                else:
                    j = value(k)
                    continue
        # a value ended at j: what may follow depends on the enclosing container
        if not stack:
            return j  # what follows is the next value's business (Go's next Decode call)
        k = _skip_space(data, j)
        c = need(k)
        top = stack[-1]
        if top == "v":
            if c == 0x2C:
                k2 = _skip_space(data, k + 1)
                c2 = need(k2)
                if c2 != 0x22:
                    raise _syntax(data, "looking for beginning of object key string", k2)
                j = string(k2 + 1)
                j = _after_key(data, j, need)
                j = value(j)
                continue
            if c == 0x7D:
                stack.pop()
                j = k + 1
                continue
            raise _syntax(data, "after object key:value pair", k)
        # array
        if c == 0x2C:
            j = value(k + 1)
            continue
        if c == 0x5D:
            stack.pop()
            j = k + 1
            continue
        raise _syntax(data, "after array element", k)


def _bad_escape(data: bytes, start: int, end: int) -> GoError:
    seq = data[start:end].decode("utf-8", "replace")
    return GoError(f"invalid escape sequence `{seq}` in string at offset {end}")


def _after_key(data: bytes, j: int, need) -> int:
    k = _skip_space(data, j)
    c = need(k)
    if c != 0x3A:
        raise _syntax(data, "after object key", k)
    return k + 1
