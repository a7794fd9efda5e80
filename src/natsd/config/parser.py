"""Parser for the nats-server configuration format: lexer items -> a plain tree with positions.

The tree is made of :class:`ConfigMap` (a ``dict``) and :class:`ConfigList` (a ``list``) holding
``str``, ``int``, ``float``, ``bool`` and ``datetime`` values, so it can be used like any JSON-ish
tree. Each container also remembers where its entries came from: ``ConfigMap.pos(key)`` is the
:class:`Pos` (file, line, column) of the key, ``ConfigList.pos(i)`` that of item ``i``. Option
processing uses these to name ``file:line:column`` in every error.

Values follow nats-server's ``conf/parse.go``:

* integers may carry a size suffix, case-insensitive: ``k`` = 1000, ``kb``/``ki``/``kib`` = 1024,
  and likewise ``m``/``mb``, ``g``/``gb``, ``t``/``tb``, ``p``/``pb``, ``e``/``eb`` (so ``1K`` is
  1000 and ``1KB`` is 1024, exactly as the reference);
* ``$name`` refers to a key defined earlier in the current map or an enclosing one (arrays are
  skipped), else to the environment variable ``name``, whose text is parsed as a config value
  (so ``PORT=4222`` gives the integer 4222); reference cycles between environment variables are
  errors. ``$2a$...`` (a bare bcrypt hash) is kept as the string itself;
* ``include <path>`` merges the keys of another file (relative to the including file's directory)
  into the current map; the included file is parsed on its own (its own variable scope).

Durations are not a syntax of their own: ``"30s"`` is a string that option processing parses.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, NamedTuple

from natsd.config.lexer import ConfigError, Item, ItemType, lex

__all__ = [
    "Pos",
    "ConfigMap",
    "ConfigList",
    "ConfigError",
    "parse",
    "parse_file",
    "parse_value",
    "SIZE_SUFFIXES",
]


class Pos(NamedTuple):
    """Where a key or value came from; ``str(pos)`` is ``file:line:column``."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}" if self.file else f"{self.line}:{self.column}"


class ConfigMap(dict):
    """A config map: a ``dict`` that also records each key's position and which keys were used
    as ``$variables`` (nats-server does not report those as unknown fields)."""

    __slots__ = ("positions", "used_vars", "where")

    def __init__(self, where: Pos | None = None) -> None:
        super().__init__()
        self.positions: dict[str, Pos] = {}
        self.used_vars: set[str] = set()
        self.where = where  # position of the opening '{' (None for a file's top level)

    def pos(self, key: str) -> Pos | None:
        return self.positions.get(key)


class ConfigList(list):
    """A config array: a ``list`` that also records each item's position."""

    __slots__ = ("positions", "where")

    def __init__(self, where: Pos | None = None) -> None:
        super().__init__()
        self.positions: list[Pos] = []
        self.where = where

    def pos(self, index: int) -> Pos | None:
        return self.positions[index] if 0 <= index < len(self.positions) else None


# Lowercased suffix -> multiplier (nats-server conf/parse.go: decimal for the bare letter,
# binary for the "b"/"i"/"ib" forms).
SIZE_SUFFIXES: dict[str, int] = {"": 1}
for _i, _letter in enumerate("kmgtpe", start=1):
    SIZE_SUFFIXES[_letter] = 1000**_i
    for _tail in ("b", "i", "ib"):
        SIZE_SUFFIXES[_letter + _tail] = 1024**_i

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_BCRYPT_PREFIXES = ("2a$", "2b$", "2y$")
_MAX_INCLUDE_DEPTH = 32
_ENV_KEY = "pk"  # the reference parses an environment value as "pk=<value>"


class _Parser:
    def __init__(
        self, items: list[Item], file: str, env: Mapping[str, str], env_refs: set[str], include_chain: tuple[str, ...]
    ) -> None:
        self.items = items
        self.file = file
        self.env = env
        self.env_refs = env_refs
        self.include_chain = include_chain
        self.i = 0
        # Context stack: maps and lists currently open (innermost last), for variable scoping.
        self.stack: list[ConfigMap | ConfigList] = []

    def pos(self, it: Item) -> Pos:
        return Pos(self.file, it.line, it.column)

    def err(self, it: Item, message: str) -> ConfigError:
        return ConfigError(message, self.file, it.line, it.column)

    def next(self) -> Item:
        it = self.items[self.i]
        self.i += 1
        return it

    def parse_top(self) -> ConfigMap:
        root = ConfigMap()
        self.stack.append(root)
        self.parse_entries(root, top=True)
        return root

    def parse_entries(self, m: ConfigMap, top: bool) -> None:
        while True:
            it = self.next()
            t = it.type
            if t is ItemType.EOF:
                if not top:
                    raise self.err(it, "Unexpected EOF processing map.")
                return
            if t is ItemType.MAP_END:
                if top:
                    continue  # closing brace of a JSON-like top-level block
                return
            if t is ItemType.INCLUDE:
                self.include(m, it)
                continue
            if t is not ItemType.KEY:  # pragma: no cover - the lexer guarantees key/value pairs
                raise self.err(it, f"expected a key, got {t.value}")
            key = it.value
            value = self.parse_value(self.next())
            m[key] = value
            m.positions[key] = self.pos(it)

    def parse_value(self, it: Item) -> Any:
        t = it.type
        if t is ItemType.STRING:
            return it.value
        if t is ItemType.INTEGER:
            return self.integer(it)
        if t is ItemType.FLOAT:
            try:
                return float(it.value)
            except ValueError:
                raise self.err(it, f"expected float, but got '{it.value}'") from None
        if t is ItemType.BOOL:
            return it.value.lower() in ("true", "yes", "on")
        if t is ItemType.DATETIME:
            import datetime as _dt  # (only a config with a datetime value loads it: ADR 0015)

            try:
                return _dt.datetime.strptime(it.value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=_dt.timezone.utc)
            except ValueError:
                raise self.err(it, f"expected Zulu formatted DateTime, but got '{it.value}'") from None
        if t is ItemType.MAP_START:
            m = ConfigMap(self.pos(it))
            self.stack.append(m)
            self.parse_entries(m, top=False)
            self.stack.pop()
            return m
        if t is ItemType.ARRAY_START:
            arr = ConfigList(self.pos(it))
            self.stack.append(arr)
            while True:
                nxt = self.next()
                if nxt.type is ItemType.ARRAY_END:
                    break
                if nxt.type is ItemType.EOF:  # pragma: no cover - lexer reports it first
                    raise self.err(nxt, "Unexpected EOF processing array.")
                arr.append(self.parse_value(nxt))
                arr.positions.append(self.pos(nxt))
            self.stack.pop()
            return arr
        if t is ItemType.VARIABLE:
            return self.variable(it)
        raise self.err(it, f"unexpected {t.value}")  # pragma: no cover

    def integer(self, it: Item) -> int:
        raw = it.value
        n = 0
        while n < len(raw) and (raw[n].isdigit() or raw[n] == "-"):
            n += 1
        try:
            num = int(raw[:n], 10)
        except ValueError:
            raise self.err(it, f"expected integer, but got '{raw}'") from None
        if not _INT64_MIN <= num <= _INT64_MAX:
            raise self.err(it, f"integer '{raw}' is out of the range")
        suffix = raw[n:].strip().lower()
        mult = SIZE_SUFFIXES.get(suffix)
        if mult is None:
            raise self.err(it, f"unknown size suffix '{raw[n:]}' in '{raw}'")
        value = num * mult
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise self.err(it, f"integer '{raw}' is out of the range")
        return value

    def variable(self, it: Item) -> Any:
        name = it.value
        if name.startswith(_BCRYPT_PREFIXES):
            return "$" + name  # a bcrypt hash written without quotes
        for ctx in reversed(self.stack):
            if isinstance(ctx, ConfigMap) and name in ctx:
                ctx.used_vars.add(name)
                return ctx[name]
        if name in self.env_refs:
            raise self.err(
                it,
                f"variable reference for '{name}' on line {it.line} could not be "
                f"parsed: variable reference cycle for '{name}'",
            )
        if name not in self.env:
            raise self.err(it, f"variable reference for '{name}' on line {it.line} can not be found")
        self.env_refs.add(name)
        try:
            text = f"{_ENV_KEY}={self.env[name]}"
            try:
                items = lex(text, f"${name}")
                sub = _Parser(items, f"${name}", self.env, self.env_refs, self.include_chain)
                tree = sub.parse_top()
            except ConfigError as e:
                raise self.err(
                    it, f"variable reference for '{name}' on line {it.line} could not be parsed: {e.message}"
                ) from None
            return tree.get(_ENV_KEY, "")
        finally:
            self.env_refs.discard(name)

    def include(self, m: ConfigMap, it: Item) -> None:
        from pathlib import Path  # (with urllib.parse) only for a config file: issue 26's start-up time

        base = Path(self.file).parent if self.file else Path(".")
        path = base / it.value
        if len(self.include_chain) >= _MAX_INCLUDE_DEPTH or str(path.resolve()) in self.include_chain:
            raise self.err(it, f"error parsing include file '{it.value}', include cycle")
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise self.err(it, f"error parsing include file '{it.value}', {e.strerror or e}") from None
        # The included file keeps its own positions (errors inside it name that file).
        sub = _Parser(
            lex(text, str(path)), str(path), self.env, self.env_refs, self.include_chain + (str(path.resolve()),)
        )
        tree = sub.parse_top()
        for k, v in tree.items():
            m[k] = v
            m.positions[k] = tree.positions[k]
        m.used_vars |= tree.used_vars


def parse(text: str, file: str = "", env: Mapping[str, str] | None = None) -> ConfigMap:
    """Parse config ``text``; ``file`` names it in positions and anchors relative includes.

    ``env`` replaces ``os.environ`` for ``$VARIABLE`` lookups (tests). Raises :class:`ConfigError`.
    """
    items = lex(text, file)
    chain: tuple[str, ...] = ()
    if file:
        from pathlib import Path  # (with urllib.parse) only for a config file: issue 26's start-up time

        chain = (str(Path(file).resolve()),)
    return _Parser(items, file, os.environ if env is None else env, set(), chain).parse_top()


def parse_file(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> ConfigMap:
    """Read and parse the config file at ``path`` (errors name the path as given)."""
    p = os.fspath(path)
    try:
        with open(p, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError(f"open {p}: {(e.strerror or str(e)).lower()}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p}: not UTF-8 text ({e.reason})") from None
    return parse(text, p, env)


def parse_value(text: str, env: Mapping[str, str] | None = None) -> Any:
    """Parse a single value as the config language would (``"2MB"`` -> 2097152)."""
    return parse(f"{_ENV_KEY}={text}", "", env).get(_ENV_KEY)
