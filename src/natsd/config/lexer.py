"""Lexer for the nats-server configuration format (nats-server ``conf/lex.go`` semantics).

The format is a relaxed superset of JSON::

    # comment            // comment
    port: 4222           key = value          key value
    authorization { user: a, password: "b" }   # maps; ',' ';' or newline separate entries
    users = [ {user: x}, {user: y} ]           # arrays; ',' or newline separate items
    include "other.conf"                       # relative to the including file
    max_payload: 2MB     timeout: "2s"         # sizes; durations are strings
    token: $TOKEN                              # variable (earlier key, or environment)

The lexer turns text into a list of :class:`Item` (type, value, line, column). Which characters
end an unquoted value depends on context, exactly as in the reference:

* a key ends at whitespace, ``:`` or ``=`` (``include`` followed by whitespace is a keyword);
* an unquoted string ends at a newline, ``;``, ``,``, ``]``, ``}``, a space or tab, or EOF, so
  ``#`` inside ``foo#bar`` is part of the string;
* a value starting with a digit is an integer (with an optional size suffix ``k``/``kb``/...),
  a float, an ISO-8601 Zulu datetime, or, when other characters follow (``30s``,
  ``127.0.0.1:4222``), an unquoted string. Note ``2m`` is the *integer* 2,000,000 (``m`` is the
  mega suffix), as in nats-server: durations must be quoted to be unambiguous.
* unquoted ``true/false/yes/no/on/off`` (any case) are booleans; ``$name`` is a variable.

Lines and columns are 1-based (columns count characters). nats-server reports line 1 with a
0-based column; we do not reproduce that off-by-one.
"""

from __future__ import annotations

from enum import Enum

from natsd.lazydataclass import dataclass

__all__ = ["ItemType", "Item", "ConfigError", "Lexer", "lex"]


class ConfigError(Exception):
    """A configuration error, located at ``file:line:column``.

    ``str(err)`` is ``"<file>:<line>:<col>: <message>"`` (without a file: ``"<line>:<col>: ..."``).
    """

    def __init__(self, message: str, file: str = "", line: int = 0, column: int = 0) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        super().__init__(self.__str__())

    @property
    def location(self) -> str:
        if not self.line:
            return self.file
        loc = f"{self.line}:{self.column}"
        return f"{self.file}:{loc}" if self.file else loc

    def __str__(self) -> str:
        loc = self.location
        return f"{loc}: {self.message}" if loc else self.message


class ItemType(Enum):
    KEY = "Key"
    STRING = "String"
    BOOL = "Bool"
    INTEGER = "Integer"
    FLOAT = "Float"
    DATETIME = "DateTime"
    ARRAY_START = "ArrayStart"
    ARRAY_END = "ArrayEnd"
    MAP_START = "MapStart"
    MAP_END = "MapEnd"
    VARIABLE = "Variable"
    INCLUDE = "Include"
    EOF = "EOF"


@dataclass(frozen=True, slots=True)
class Item:
    """One lexeme. ``value`` is the raw text (strings unescaped, variables without ``$``)."""

    type: ItemType
    value: str
    line: int
    column: int


_BOOLS = frozenset(["true", "false", "yes", "no", "on", "off"])
_NUMBER_SUFFIX = frozenset("kKmMgGtTpPeE")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", '"': '"', "\\": "\\"}
_EOF = ""


def _is_ws(c: str) -> bool:  # nats-server isWhitespace: space and tab only
    return c == " " or c == "\t"


def _is_nl(c: str) -> bool:
    return c == "\n" or c == "\r"


def _is_space(c: str) -> bool:  # unicode.IsSpace: includes newlines
    return c != _EOF and c.isspace()


class Lexer:
    """Turns config text into :class:`Item` s; raises :class:`ConfigError` on bad syntax."""

    def __init__(self, text: str, file: str = "") -> None:
        self.text = text
        self.file = file
        self.pos = 0
        self.line = 1
        self.line_start = 0  # index of the first character of the current line
        self.items: list[Item] = []

    # -- character access -------------------------------------------------------------------

    def peek(self, offset: int = 0) -> str:
        i = self.pos + offset
        return self.text[i] if i < len(self.text) else _EOF

    def advance(self) -> str:
        if self.pos >= len(self.text):
            return _EOF
        c = self.text[self.pos]
        self.pos += 1
        if c == "\n":
            self.line += 1
            self.line_start = self.pos
        return c

    def col(self, pos: int | None = None) -> int:
        p = self.pos if pos is None else pos
        return p - self.line_start + 1

    def error(self, message: str, line: int | None = None, column: int | None = None) -> ConfigError:
        return ConfigError(
            message, self.file, self.line if line is None else line, self.col() if column is None else column
        )

    def emit(self, typ: ItemType, value: str, line: int, column: int) -> None:
        self.items.append(Item(typ, value, line, column))

    # -- skipping ---------------------------------------------------------------------------

    def at_comment(self) -> bool:
        c = self.peek()
        return c == "#" or (c == "/" and self.peek(1) == "/")

    def skip_comment(self) -> None:
        while self.peek() != _EOF and not _is_nl(self.peek()):
            self.advance()

    def skip_space_and_comments(self) -> None:
        """Skip whitespace, newlines and comments (between entries and array items)."""
        while True:
            c = self.peek()
            if _is_space(c):
                self.advance()
            elif self.at_comment():
                self.skip_comment()
            else:
                return

    def skip_ws(self) -> None:
        while _is_ws(self.peek()):
            self.advance()

    # -- grammar ----------------------------------------------------------------------------

    def run(self) -> list[Item]:
        self.skip_space_and_comments()
        if self.peek() == "{":
            # JSON-like top level: the whole file may be wrapped in braces.
            self.advance()
            self.lex_entries(closer="}")
            self.skip_space_and_comments()
            if self.peek() != _EOF:
                raise self.error(f"Unexpected '{_show(self.peek())}' after the top-level block")
        else:
            self.lex_entries(closer=None)
        self.emit(ItemType.EOF, "", self.line, self.col())
        return self.items

    def lex_entries(self, closer: str | None) -> None:
        """Entries of the top level (``closer`` None) or of a map (``closer`` ``}``)."""
        while True:
            self.skip_space_and_comments()
            c = self.peek()
            if c == _EOF:
                if closer is not None:
                    raise self.error("Unexpected EOF processing map.")
                return
            if closer is not None and c == closer:
                line, column = self.line, self.col()
                self.advance()
                self.emit(ItemType.MAP_END, "}", line, column)
                return
            if c in ":=":
                raise self.error(f"Unexpected key separator '{c}'")
            if c == "]":
                raise self.error(f"Unexpected array end '{c}' processing map.")
            if c in ",;":
                raise self.error(f"Unexpected value terminator '{c}'")
            self.lex_entry()
            if self.lex_entry_end(closer):
                return

    def lex_entry_end(self, closer: str | None) -> bool:
        """After a value: spaces/comments, then a newline, ``;``, ``,``, the closer, or EOF.

        Returns True when it consumed the map's closing ``}``.
        """
        while True:
            c = self.peek()
            if _is_ws(c):
                self.advance()
            elif self.at_comment():
                self.skip_comment()
            elif _is_nl(c) or c in (";", ","):
                self.advance()
                return False
            elif c == _EOF:
                return False
            elif c == "}" and closer == "}":
                line, column = self.line, self.col()
                self.advance()
                self.emit(ItemType.MAP_END, "}", line, column)
                return True
            else:
                where = "top-level" if closer is None else "map"
                raise self.error(
                    f"Expected a {where} value to end with a new line, comment or EOF, but got '{_show(c)}' instead."
                )

    def _scan_quoted(self, quote: str, eof_message: str) -> str:
        """Consume ``<quote>text<quote>`` starting at the opening quote; return ``text`` (no
        escapes: keys and include paths are taken literally, as the reference does)."""
        self.advance()
        start = self.pos
        while self.peek() != quote:
            if self.peek() == _EOF:
                raise self.error(eof_message)
            self.advance()
        text = self.text[start : self.pos]
        self.advance()
        return text

    def lex_entry(self) -> None:
        line, column = self.line, self.col()
        c = self.peek()
        if c in ('"', "'"):
            key = self._scan_quoted(c, "Unexpected EOF processing quoted key.")
        else:
            start = self.pos
            while True:
                c = self.peek()
                if c == _EOF or _is_space(c) or c in ":=":
                    break
                if c in "{[" and self.pos > start:
                    break  # lenient: "key{" and "key[" (the reference needs a space)
                self.advance()
            key = self.text[start : self.pos]
            if key.lower() == "include" and _is_ws(self.peek()):
                self.skip_ws()
                self.lex_include(line, column)
                return
        self.emit(ItemType.KEY, key, line, column)
        # Key separator: whitespace (newlines too), then optionally ':' or '='.
        while _is_space(self.peek()):
            self.advance()
        if self.peek() in (":", "="):
            self.advance()
        elif self.peek() == _EOF:
            raise self.error("config is invalid: key without a value", line, column)
        self.lex_value()

    def lex_include(self, line: int, column: int) -> None:
        c = self.peek()
        vline, vcol = self.line, self.col()
        if c in ('"', "'"):
            path = self._scan_quoted(c, "Unexpected EOF in quoted include")
        else:
            if c == "[":
                raise self.error("Expected include value but found start of an array")
            if c == "{":
                raise self.error("Expected include value but found start of a map")
            if c.isdigit() or c == "-":
                raise self.error("Expected include value but found start of a number")
            if _is_nl(c) or c == _EOF:
                raise self.error("Expected include value but found new line")
            start = self.pos
            while True:
                c = self.peek()
                if c == _EOF or _is_nl(c) or _is_ws(c) or c in (";", "}", "'"):
                    break
                self.advance()
            path = self.text[start : self.pos]
        self.emit(ItemType.INCLUDE, path, vline, vcol)

    def lex_value(self) -> None:
        self.skip_ws()
        line, column = self.line, self.col()
        c = self.peek()
        if c == "[":
            self.advance()
            self.emit(ItemType.ARRAY_START, "[", line, column)
            self.lex_array()
        elif c == "{":
            self.advance()
            self.emit(ItemType.MAP_START, "{", line, column)
            self.lex_entries(closer="}")
        elif c == "'":
            self.advance()
            start = self.pos
            while self.peek() != "'":
                if self.peek() == _EOF:
                    raise self.error("Unexpected EOF.")
                self.advance()
            self.emit(ItemType.STRING, self.text[start : self.pos], line, column)
            self.advance()
        elif c == '"':
            self.advance()
            self.emit(ItemType.STRING, self.lex_dq_string(), line, column)
        elif c == "(":
            self.advance()
            self.emit(ItemType.STRING, self.lex_block(), line, column)
        elif c == "-" or c.isdigit():
            self.lex_number_or_string(line, column)
        elif c == ".":
            raise self.error("Floats must start with a digit")
        elif _is_nl(c) or c == _EOF:
            raise self.error("Expected value but found new line")
        else:
            self.lex_unquoted(line, column, self.pos)

    def lex_array(self) -> None:
        while True:
            self.skip_space_and_comments()
            c = self.peek()
            if c == "]":
                line, column = self.line, self.col()
                self.advance()
                self.emit(ItemType.ARRAY_END, "]", line, column)
                return
            if c == ",":
                raise self.error("Unexpected array value terminator ','.")
            if c == _EOF:
                raise self.error("Unexpected EOF processing array.")
            self.lex_value()
            # Value end: spaces/comments, then ',' or newline (next item) or ']'.
            while True:
                c = self.peek()
                if _is_ws(c):
                    self.advance()
                elif self.at_comment():
                    self.skip_comment()
                elif c == "," or _is_nl(c):
                    self.advance()
                    break
                elif c == "]":
                    break
                else:
                    raise self.error(
                        "Expected an array value terminator ',' or an array terminator ']', "
                        f"but got '{_show(c)}' instead."
                    )

    def lex_dq_string(self) -> str:
        parts: list[str] = []
        start = self.pos
        while True:
            c = self.peek()
            if c == _EOF:
                raise self.error("Unexpected EOF.")
            if c == '"':
                parts.append(self.text[start : self.pos])
                self.advance()
                return "".join(parts)
            if c == "\\":
                parts.append(self.text[start : self.pos])
                self.advance()
                parts.append(self.lex_escape())
                start = self.pos
                continue
            self.advance()

    def lex_escape(self) -> str:
        c = self.advance()
        if c in _ESCAPES:
            return _ESCAPES[c]
        if c == "x":
            h = self.text[self.pos : self.pos + 2]
            if len(h) < 2 or any(_is_nl(x) for x in h):
                raise self.error("Expected two hexadecimal digits after '\\x', but hit end of line")
            try:
                b = bytes.fromhex(h)
            except ValueError:
                raise self.error(f"Expected two hexadecimal digits after '\\x', but got '{h}'") from None
            self.advance()
            self.advance()
            return b.decode("latin-1")
        raise self.error(
            f"Invalid escape character '{_show(c)}'. Only the following escape characters are "
            'allowed: \\xXX, \\t, \\n, \\r, \\", \\\\.'
        )

    def lex_block(self) -> str:
        # "( ... )" raw block: ends at a ')' alone on its line (preceded by a newline and
        # followed by a newline or EOF). The value excludes the final newline.
        start = self.pos
        while True:
            c = self.peek()
            if c == _EOF:
                raise self.error("Unexpected EOF processing block.")
            if c == ")" and self.pos > start and self.text[self.pos - 1] == "\n" and self.peek(1) in ("\n", _EOF):
                value = self.text[start : self.pos - 1]
                self.advance()
                return value
            self.advance()

    def lex_number_or_string(self, line: int, column: int) -> None:
        start = self.pos
        neg = self.peek() == "-"
        if neg:
            self.advance()
            if not self.peek().isdigit():
                if self.peek() == ".":
                    raise self.error("Floats must start with a digit, not '.'.")
                raise self.error(f"Expected a digit but got '{_show(self.peek())}'.")
        while self.peek().isdigit():
            self.advance()
        c = self.peek()
        if c == "-" and not neg and self.pos - start == 4:
            self.lex_datetime(start, line, column)
            return
        if c == ".":
            self.advance()
            if not self.peek().isdigit():
                raise self.error(f"Floats must have a digit after the '.', but got '{_show(self.peek())}' instead.")
            while self.peek().isdigit():
                self.advance()
            if self.peek() == "." and not neg:
                # A second '.' makes it an IP address (string), e.g. 127.0.0.1:4222.
                while self.peek().isdigit() or self.peek() in (".", ":", "-"):
                    self.advance()
                self.emit(ItemType.STRING, self.text[start : self.pos], line, column)
                return
            self.emit(ItemType.FLOAT, self.text[start : self.pos], line, column)
            return
        if c in _NUMBER_SUFFIX:
            self.advance()
            while self.peek() in ("b", "B", "i", "I") and self.peek() != _EOF:
                self.advance()
        if self._number_terminator(self.peek()):
            self.emit(ItemType.INTEGER, self.text[start : self.pos], line, column)
            return
        if neg:
            raise self.error(f"Expected a digit but got '{_show(self.peek())}'.")
        # Something else follows the digits ("30s", "1h30m", "4222abc"): an unquoted string.
        self.lex_unquoted(line, column, start)

    @staticmethod
    def _number_terminator(c: str) -> bool:
        # The reference omits ']' here (so "[1, 2]" lexes 2 as a string); we accept it.
        return c == _EOF or _is_nl(c) or _is_ws(c) or c in ("}", ";", ",", "]")

    def lex_datetime(self, start: int, line: int, column: int) -> None:
        fmt = "-00-00T00:00:00Z"
        for f in fmt:
            c = self.peek()
            if f == "0":
                if not c.isdigit():
                    raise self.error(f"Expected digit in ISO8601 datetime, but found '{_show(c)}' instead.")
            elif c != f:
                raise self.error(f"Expected '{f}' in ISO8601 datetime, but found '{_show(c)}' instead.")
            self.advance()
        self.emit(ItemType.DATETIME, self.text[start : self.pos], line, column)

    def lex_unquoted(self, line: int, column: int, start: int) -> None:
        parts: list[str] = []
        escaped = False
        while True:
            c = self.peek()
            if c == "\\":
                parts.append(self.text[start : self.pos])
                self.advance()
                parts.append(self.lex_escape())
                start = self.pos
                escaped = True
                continue
            if c == _EOF or _is_nl(c) or _is_ws(c) or c in (";", ",", "]", "}"):
                break
            if c == "'":
                # The reference ends an unquoted string at a single quote and drops the quote.
                parts.append(self.text[start : self.pos])
                self.advance()
                self.emit(ItemType.STRING, "".join(parts), line, column)
                return
            self.advance()
        parts.append(self.text[start : self.pos])
        value = "".join(parts)
        if not escaped and value.lower() in _BOOLS:
            self.emit(ItemType.BOOL, value, line, column)
        elif not escaped and value.startswith("$") and len(value) > 1:
            self.emit(ItemType.VARIABLE, value[1:], line, column)
        else:
            self.emit(ItemType.STRING, value, line, column)


def _show(c: str) -> str:
    if c == _EOF:
        return "EOF"
    return "\\n" if c == "\n" else c


def lex(text: str, file: str = "") -> list[Item]:
    """Lex ``text`` (from ``file``, used in error positions) into items ending with EOF."""
    return Lexer(text, file).run()
