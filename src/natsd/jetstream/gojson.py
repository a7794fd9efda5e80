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
from dataclasses import field
from typing import Any, Callable

from natsd.lazydataclass import dataclass

__all__ = [
    "GoStruct",
    "GoError",
    "decode",
    "go_kind",
    "Wrapped",
    "Slice",
    "Map",
    "Ptr",
    "CUSTOM",
    "Custom",
    "TIME",
    "COMPRESSION",
    "enum",
    "time_error",
]


class GoError(ValueError):
    """The text Go's decoder would report (without nats-server's ``invalid JSON: `` prefix)."""


# ---------------------------------------------------------------------------------------------
# Types


@dataclass(frozen=True, slots=True)
class Scalar:
    """A Go scalar field type (its Go name and JSON kind)."""

    go_name: str
    kind: str  # "string" | "bool" | "int" | "uint" | "custom"
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


def Slice(elem: Any) -> Wrapped:  # reads as the Go type it builds
    return Wrapped("[]", elem)


def Map(elem: Any) -> Wrapped:
    return Wrapped("map[string]", elem)


def Ptr(elem: Any) -> Wrapped:
    return Wrapped("*", elem)


@dataclass(slots=True)
class GoStruct:
    """A Go struct type: its JSON fields in Go order."""

    name: str  # Go type name without package, e.g. "JSApiMsgGetRequest"
    fields: dict[str, Any]  # JSON name -> type, in Go struct order (embedded structs flattened)
    open: bool = False  # unknown fields pass unchecked (not a Go request struct)
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
#: A type with its own UnmarshalJSON whose handler checks it (a restore's stream state): accepted as is.
CUSTOM = Scalar("custom", "custom")


@dataclass(frozen=True, slots=True)
class Custom:
    """A Go type with its own ``UnmarshalJSON``, decoded here so its refusals read as Go's:

    * ``"enum"``: nats-server's policy enums compare the raw JSON bytes with their quoted names. A
      string passes on (its handler words an unknown name); any other value, ``null`` included,
      is refused with ``message`` holding the raw bytes (``can not unmarshal "5"``);
    * ``"time"``: ``time.Time``; ``null`` is the zero time, another non-string a type error, a
      string must be RFC 3339 as Go's strict parser takes it (:func:`time_error`);
    * ``"compression"``: ``StoreCompression`` reads a Go string first (its own error texts, without
      the struct field), ``null`` being the empty, unknown, algorithm.
    """

    go_name: str
    kind: str
    message: str = ""


def enum(go_name: str, message: str = "can not unmarshal {q}") -> Custom:
    """A policy enum; ``message`` gets ``{q}`` (Go's %q of the raw value) or ``{v}`` (as is)."""
    return Custom(go_name, "enum", message)


TIME = Custom("time.Time", "time")
COMPRESSION = Custom("server.StoreCompression", "compression")


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
            t = st.fields[name]
            if v is None:
                if isinstance(t, Custom) and t.kind != "time":
                    self._custom(v, t, path + (name,), where + (key,))
                continue
            out[name] = self._check(v, t, path + (name,), where + (key,))
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
                    self._type_error(go_kind(v), t, path, where)
            elif kind == "bool":
                if not isinstance(v, bool):
                    self._type_error(go_kind(v), t, path, where)
            else:
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    self._type_error(go_kind(v), t, path, where)
                if not isinstance(v, int) or not _fits(v, kind, t.bits):
                    self._type_error("number " + self._literal(where), t, path, where)
            return v
        if isinstance(t, Custom):
            return self._custom(v, t, path, where)
        if isinstance(t, GoStruct):
            if not isinstance(v, dict):
                self._type_error(go_kind(v), t, path, where)
            return self._struct(v, t, path, where)
        if isinstance(t, Wrapped):
            if t.prefix == "[]":
                if not isinstance(v, list):
                    self._type_error(go_kind(v), t, path, where)
                return [
                    None if x is None else self._check(x, t.elem, path + (str(i),), where + (i,))
                    for i, x in enumerate(v)
                ]
            if not isinstance(v, dict):
                self._type_error(go_kind(v), t, path, where)
            return {k: (None if x is None else self._check(x, t.elem, path + (k,), where + (k,))) for k, x in v.items()}
        raise TypeError(f"not a Go type: {t!r}")

    def _custom(self, v: Any, t: Custom, path: tuple, where: tuple) -> Any:
        if t.kind == "time":
            if not isinstance(v, str):
                self._type_error(go_kind(v), t, path, where)
            err = time_error(v)
            if err:
                raise GoError(err)
            return v
        if t.kind == "compression":
            if v is None:
                raise GoError("unknown compression algorithm")
            if not isinstance(v, str):
                raise GoError(f"json: cannot unmarshal {go_kind(v)} into Go value of type string")
            return v
        if isinstance(v, str):
            return v
        raw = self._raw(where)
        raise GoError(t.message.format(q=_go_quote(raw), v=raw))

    def _raw(self, where: tuple) -> str:
        """The bytes of the value at ``where`` as the request wrote them (Go's UnmarshalJSON sees
        those: ``[1,  2]`` keeps its spaces, ``1e3`` its exponent)."""
        data = self.raw
        i = _skip_space(data, 0)
        for step in where:
            if isinstance(step, int):
                i = _skip_space(data, i + 1)  # after "["
                for _ in range(step):
                    i = _skip_space(data, _scan_value(data, i))
                    i = _skip_space(data, i + 1)  # after ","
                continue
            found = None
            i = _skip_space(data, i + 1)  # after "{"
            while i < len(data) and data[i] == 0x22:
                kend = _scan_value(data, i)
                key = json.loads(data[i:kend].decode("utf-8", "replace"))
                vstart = _skip_space(data, _skip_space(data, kend) + 1)  # after ":"
                if key == step:
                    found = vstart  # the last of duplicate keys wins, as in the decoded dict
                i = _skip_space(data, _scan_value(data, vstart))
                if i < len(data) and data[i] == 0x2C:
                    i = _skip_space(data, i + 1)
            if found is None:  # pragma: no cover - where comes from decoding this very text
                return "null"
            i = found
        return data[i : _scan_value(data, i)].decode("utf-8", "replace")

    def _type_error(self, what: str, t: Any, path: tuple, where: tuple = ()) -> None:
        # Go names "Go struct field" when the value sits in a struct field or a map; an element
        # of a slice is named by its path alone ("StreamConfigRequest.subjects.0").
        field = "" if where and isinstance(where[-1], int) else "Go struct field "
        raise GoError(
            f"json: cannot unmarshal {what} into {field}{self.root.name}.{'.'.join(path)} of type {t.go_name}"
        )

    def _literal(self, where: tuple) -> str:
        """The number as written in the request (Go quotes the literal: ``1e3``, ``1000.0``)."""
        node: Any = json.loads(self.raw.decode("utf-8", "replace"), parse_int=_Lit, parse_float=_Lit)
        for step in where:
            node = node[step]
        return str(node)


# ---------------------------------------------------------------------------------------------
# time.Time: Go's strict RFC 3339 and the texts of its parse errors

_LAYOUT = "2006-01-02T15:04:05Z07:00"


def _time_quote(s: str) -> str:
    """The time package's quote: double quotes, backslash escapes, non-ASCII bytes as \\xNN."""
    out = ['"']
    for ch in s:
        if ord(ch) < 0x20 or ord(ch) >= 0x80:
            out.extend(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogateescape"))
        else:
            out.append("\\" + ch if ch in '"\\' else ch)
    out.append('"')
    return "".join(out)


def time_error(s: str) -> str | None:
    """What Go's ``time.Time.UnmarshalJSON`` answers for the JSON string ``s`` (None: accepted).

    Go parses with the RFC 3339 layout element by element: a literal that does not match names
    what is left of the value and the literal; a number that does not read names what is left from
    that element on; a value out of range, text left over or a day the month does not have say so
    without the layout; then its strict pass refuses a one-digit hour, a decimal comma and a zone
    offset of 24 hours or more, which the layout lets through."""

    def bad(rest: str, elem: str) -> str:
        return (
            f"parsing time {_time_quote(s)} as {_time_quote(_LAYOUT)}: "
            f"cannot parse {_time_quote(rest)} as {_time_quote(elem)}"
        )

    def out_of_range(what: str) -> str:
        return f"parsing time {_time_quote(s)}: {what} out of range"

    def num(v: str, fixed: bool) -> tuple[int, str] | None:
        if not v[:1].isdigit() or not v[:1].isascii():
            return None
        if not v[1:2].isdigit() or not v[1:2].isascii():
            return None if fixed else (int(v[0]), v[1:])
        return int(v[:2]), v[2:]

    v = s
    if len(v) < 4 or not all("0" <= c <= "9" for c in v[:4]):
        return bad(v, "2006")
    year, v = int(v[:4]), v[4:]
    fields: dict[str, int] = {}
    for lit, elem, fixed, limit in (
        ("-", "01", True, 12),
        ("-", "02", True, 31),
        ("T", "15", False, 23),
        (":", "04", True, 59),
        (":", "05", True, 59),
    ):
        if not v.startswith(lit):
            return bad(v, lit)
        v = v[1:]
        got = num(v, fixed)
        if got is None:
            return bad(v, elem)
        n, v = got
        if elem == "01" and not 1 <= n <= 12:
            return out_of_range("month")
        if elem != "02" and n > limit:
            return out_of_range({"15": "hour", "04": "minute", "05": "second"}.get(elem, "month"))
        fields[elem] = n
    if len(v) >= 2 and v[0] in ".," and v[1].isdigit():
        k = 2
        while k < len(v) and "0" <= v[k] <= "9":
            k += 1
        v = v[k:]
    if v[:1] == "Z":
        v = v[1:]
    else:
        if len(v) < 6 or v[3] != ":":
            return bad(v, "Z07:00")
        sign, hh, mm = v[0], num(v[1:3], True), num(v[4:6], True)
        if sign not in "+-" or hh is None or mm is None:
            return bad(v, "Z07:00")
        if hh[0] > 24:
            return out_of_range("time zone offset hour")
        if mm[0] > 60:
            return out_of_range("time zone offset minute")
        v = v[6:]
    if v:
        return f"parsing time {_time_quote(s)}: extra text: {_time_quote(v)}"
    month, day = fields["01"], fields["02"]
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 1]
    if not 1 <= day <= days:
        return f"parsing time {_time_quote(s)}: day out of range"
    # the strict pass
    if s[12:13] == ":":
        return bad(s[11:12], "15")
    if s[19:20] == ",":
        return bad(",", ".")
    if not s.endswith("Z"):
        if int(s[-5:-3]) >= 24:
            return f"parsing time {_time_quote(s)}: timezone hour out of range"
        if int(s[-2:]) >= 60:
            return f"parsing time {_time_quote(s)}: timezone minute out of range"
    return None


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
                ch = data[i : i + k].decode("utf-8")
            except UnicodeDecodeError:
                continue
            return GoError(f"invalid character {_quote_rune(ch)} {context} at offset {i + k}")
        # a byte that starts no UTF-8 character is named by its value, as Go's strconv.Quote does
        return GoError(f"invalid character '\\x{c:02x}' {context} at offset {end}")
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


def _after_key(data: bytes, j: int, need: Callable[[int], int]) -> int:
    k = _skip_space(data, j)
    c = need(k)
    if c != 0x3A:
        raise _syntax(data, "after object key", k)
    return k + 1
