"""The config language: every syntax form, includes, variables, units, error positions."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from natsd.config.lexer import ConfigError, ItemType, lex
from natsd.config.parser import ConfigList, ConfigMap, Pos, parse, parse_file, parse_value


def p(text, env=None):
    return parse(text, "t.conf", env={} if env is None else env)


# -- key/value forms -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "foo: 1",
        "foo = 1",
        "foo 1",
        "foo:1",
        "foo=1",
        "foo  :  1",
        "foo\t=\t1",
        "foo: 1;",
        "foo: 1,",
        '"foo": 1',
        "'foo': 1",
        "  foo: 1  # trailing comment",
        "foo: 1 // slash comment",
    ],
)
def test_key_value_separators(text):
    assert p(text) == {"foo": 1}


def test_multiple_entries_and_comments():
    tree = p("""
# hash comment
// slash comment
a: 1
b = "two"   # after value
c three
d: 4; e: 5
""")
    assert tree == {"a": 1, "b": "two", "c": "three", "d": 4, "e": 5}


def test_json_like_top_level_block():
    assert p('{ "a": 1, "b": [1, 2], "c": {"d": true} }') == {"a": 1, "b": [1, 2], "c": {"d": True}}


def test_maps_nested_and_separators():
    tree = p("""
auth {
  user: a, password: b
  nested { x = 1; y 2 }
  inline: {z: 3}
}
empty {}
""")
    assert tree == {"auth": {"user": "a", "password": "b", "nested": {"x": 1, "y": 2}, "inline": {"z": 3}}, "empty": {}}
    assert isinstance(tree["auth"], ConfigMap)


def test_arrays_comma_and_newline_separated():
    tree = p("""
a: [1, 2, 3]
b: [
  "x"   # comment
  y
  z,
]
c: []
d: [ {user: u1}, {user: u2} ]
e: [[1], [2, 3]]
""")
    assert tree["a"] == [1, 2, 3]
    assert tree["b"] == ["x", "y", "z"]
    assert tree["c"] == []
    assert tree["d"] == [{"user": "u1"}, {"user": "u2"}]
    assert tree["e"] == [[1], [2, 3]]
    assert isinstance(tree["b"], ConfigList)


def test_strings_quoted_unquoted_escapes():
    tree = p(r"""
a: "double \"quoted\" \t \n \\ \x41"
b: 'single $NOT_A_VAR \n raw'
c: unquoted.value-with_chars*>
d: foo#notacomment
e: "with # hash"
f: 127.0.0.1:4222
g: localhost:4222
h: "2m"
i: 30s
j: 1h30m
k: 500ms
""")
    assert tree["a"] == 'double "quoted" \t \n \\ A'
    assert tree["b"] == r"single $NOT_A_VAR \n raw"
    assert tree["c"] == "unquoted.value-with_chars*>"
    assert tree["d"] == "foo#notacomment"
    assert tree["e"] == "with # hash"
    assert tree["f"] == "127.0.0.1:4222"
    assert tree["g"] == "localhost:4222"
    assert tree["h"] == "2m"
    assert tree["i"] == "30s"
    assert tree["j"] == "1h30m"
    assert tree["k"] == "500ms"


def test_block_string():
    tree = p("text (\nline one\n  line two\n)\nnext: 1\n")
    # As the reference: the value starts right after "(" (so with its newline) and ends
    # before the newline that precedes the lone ")".
    assert tree == {"text": "\nline one\n  line two", "next": 1}


@pytest.mark.parametrize(
    "word,value",
    [
        ("true", True),
        ("false", False),
        ("yes", True),
        ("no", False),
        ("on", True),
        ("off", False),
        ("TRUE", True),
        ("Off", False),
        ("Yes", True),
    ],
)
def test_booleans(word, value):
    assert p(f"x: {word}")["x"] is value


def test_quoted_boolean_is_a_string():
    assert p('x: "true"')["x"] == "true"


@pytest.mark.parametrize(
    "text,value",
    [
        ("0", 0),
        ("42", 42),
        ("-1", -1),
        ("-42", -42),
        ("1k", 1000),
        ("1K", 1000),
        ("1kb", 1024),
        ("1KB", 1024),
        ("1Ki", 1024),
        ("1kib", 1024),
        ("2m", 2_000_000),
        ("2M", 2_000_000),
        ("2mb", 2 * 1024**2),
        ("2MB", 2 * 1024**2),
        ("2MiB", 2 * 1024**2),
        ("3g", 3_000_000_000),
        ("3G", 3_000_000_000),
        ("3gb", 3 * 1024**3),
        ("3GB", 3 * 1024**3),
        ("1t", 10**12),
        ("1TB", 1024**4),
        ("1p", 10**15),
        ("1PB", 1024**5),
        ("1e", 10**18),
        ("-1K", -1000),
    ],
)
def test_integers_and_size_suffixes(text, value):
    # Exactly nats-server conf/parse.go: the bare letter is decimal, the b/i/ib forms binary,
    # and the suffix is case-insensitive (so K == k == 1000).
    assert p(f"x: {text}")["x"] == value
    assert parse_value(text, env={}) == value


def test_floats():
    assert p("x: 1.5")["x"] == 1.5
    assert p("x: -0.25")["x"] == -0.25


def test_datetime():
    assert p("x: 2024-01-02T03:04:05Z")["x"] == dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)


def test_number_followed_by_letters_is_a_string():
    assert p("x: 4222abc")["x"] == "4222abc"
    with pytest.raises(ConfigError):
        p("x: 10.5s")  # a float followed by garbage


# -- variables -------------------------------------------------------------------------------


def test_variables_from_earlier_keys_and_scopes():
    tree = p("""
PASS: "s3cret"
N = 10
auth {
  password: $PASS
  LOCAL: inner
  nested { v: $LOCAL, n: $N }
}
list: [$N, $PASS]
""")
    assert tree["auth"]["password"] == "s3cret"
    assert tree["auth"]["nested"] == {"v": "inner", "n": 10}
    assert tree["list"] == [10, "s3cret"]
    assert "PASS" in tree.used_vars and "N" in tree.used_vars
    assert "LOCAL" in tree["auth"].used_vars


def test_variable_can_be_a_map():
    tree = p('PERMS = {publish: "a.>"}\nuser: {permissions: $PERMS}')
    assert tree["user"]["permissions"] == {"publish": "a.>"}


def test_environment_variables_are_parsed_as_values():
    env = {"NATS_PORT": "4333", "SIZE": "2MB", "NAME": "srv-1", "FLAG": "true", "ARR": "[1, 2]"}
    tree = p("port: $NATS_PORT\nsize: $SIZE\nname: $NAME\nflag: $FLAG\narr: $ARR", env=env)
    assert tree == {"port": 4333, "size": 2 * 1024 * 1024, "name": "srv-1", "flag": True, "arr": [1, 2]}


def test_file_variables_shadow_environment():
    assert p("X: 1\ny: $X", env={"X": "2"})["y"] == 1


def test_environment_variable_referencing_another():
    env = {"A": "$B", "B": "7"}
    assert p("x: $A", env=env)["x"] == 7


def test_environment_variable_cycle_is_an_error():
    with pytest.raises(ConfigError, match="cycle"):
        p("x: $A", env={"A": "$B", "B": "$A"})


def test_unknown_variable_error_position():
    with pytest.raises(ConfigError) as ei:
        p("a: 1\n  b: $MISSING\n")
    e = ei.value
    assert (e.file, e.line, e.column) == ("t.conf", 2, 6)
    assert "variable reference for 'MISSING' on line 2 can not be found" in str(e)
    assert str(e).startswith("t.conf:2:6: ")


def test_bcrypt_hash_is_not_a_variable():
    h = "$2a$11$W2zko751KUvVy59mUTWmpOdWjpEm5qhcCZRd05GjI/sSOT.xtiHyG"
    assert p(f"password: {h}")["password"] == h


def test_variable_does_not_see_later_definitions():
    with pytest.raises(ConfigError, match="can not be found"):
        p("a: $LATER\nLATER: 1")


# -- includes --------------------------------------------------------------------------------


def test_include_relative_to_including_file(tmp_path):
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "auth.conf").write_text("user: u\npassword: p\n")
    (tmp_path / "conf.d" / "limits.conf").write_text("max_payload: 1MB\ninclude 'more.conf'\n")
    (tmp_path / "conf.d" / "more.conf").write_text("ping_max: 5\n")
    main = tmp_path / "main.conf"
    main.write_text('port: 1\ninclude "conf.d/limits.conf"\nauthorization {\n  include conf.d/auth.conf\n}\n')
    tree = parse_file(main, env={})
    assert tree == {
        "port": 1,
        "max_payload": 1024 * 1024,
        "ping_max": 5,
        "authorization": {"user": "u", "password": "p"},
    }
    # Positions of included keys name the included file.
    assert tree.pos("max_payload") == Pos(str(tmp_path / "conf.d" / "limits.conf"), 1, 1)
    assert tree["authorization"].pos("user").file.endswith("auth.conf")


def test_include_missing_file(tmp_path):
    main = tmp_path / "main.conf"
    main.write_text("port: 1\ninclude nope.conf\n")
    with pytest.raises(ConfigError) as ei:
        parse_file(main, env={})
    assert ei.value.line == 2 and "error parsing include file 'nope.conf'" in str(ei.value)


def test_include_cycle(tmp_path):
    (tmp_path / "a.conf").write_text("include b.conf\n")
    (tmp_path / "b.conf").write_text("include a.conf\n")
    with pytest.raises(ConfigError, match="include cycle"):
        parse_file(tmp_path / "a.conf", env={})


def test_error_inside_include_names_the_included_file(tmp_path):
    (tmp_path / "bad.conf").write_text("ok: 1\nbad: [1,\n")
    (tmp_path / "main.conf").write_text("include bad.conf\n")
    with pytest.raises(ConfigError) as ei:
        parse_file(tmp_path / "main.conf", env={})
    assert "bad.conf" in str(ei.value)


def test_missing_file_error():
    with pytest.raises(ConfigError, match="no such file or directory"):
        parse_file("/nonexistent/x.conf")


# -- positions -------------------------------------------------------------------------------


def test_positions_of_keys_and_items():
    tree = p("a: 1\n  b {\n    c: [x,\n        y]\n  }\n")
    assert tree.pos("a") == Pos("t.conf", 1, 1)
    assert tree.pos("b") == Pos("t.conf", 2, 3)
    assert tree["b"].pos("c") == Pos("t.conf", 3, 5)
    assert tree["b"]["c"].pos(0) == Pos("t.conf", 3, 9)
    assert tree["b"]["c"].pos(1) == Pos("t.conf", 4, 9)
    assert str(tree.pos("b")) == "t.conf:2:3"


def test_lexer_items():
    items = lex("a: [1, 'x']\nb { c: $V }\ninclude f.conf\n")
    kinds = [(i.type, i.value) for i in items]
    assert kinds == [
        (ItemType.KEY, "a"),
        (ItemType.ARRAY_START, "["),
        (ItemType.INTEGER, "1"),
        (ItemType.STRING, "x"),
        (ItemType.ARRAY_END, "]"),
        (ItemType.KEY, "b"),
        (ItemType.MAP_START, "{"),
        (ItemType.KEY, "c"),
        (ItemType.VARIABLE, "V"),
        (ItemType.MAP_END, "}"),
        (ItemType.INCLUDE, "f.conf"),
        (ItemType.EOF, ""),
    ]


@pytest.mark.parametrize(
    "text,line,col,fragment",
    [
        ("a: 1\nb: [1, 2\n", 3, 1, "Unexpected EOF processing array"),
        ("a: 1\nb {\n  c: 1\n", 4, 1, "Unexpected EOF processing map"),
        ('a: "unterminated\n', 2, 1, "Unexpected EOF"),
        ("a: 1\nb: [1 2]\n", 2, 7, "Expected an array value terminator"),
        ("a: 1 2\n", 1, 6, "Expected a top-level value to end"),
        ("a {\n  b: 1 c\n}\n", 2, 8, "Expected a map value to end"),
        ("a: .5\n", 1, 4, "Floats must start with a digit"),
        ("a: 1.x\n", 1, 6, "Floats must have a digit after the '.'"),
        ('a: "bad \\q escape"\n', 1, 11, "Invalid escape character 'q'"),
        ("a: [,1]\n", 1, 5, "Unexpected array value terminator"),
        ("a:\n  1\n", 1, 3, "Expected value but found new line"),
        (": 1\n", 1, 1, "Unexpected key separator ':'"),
        ("a: 2024-01-0203:04:05Z\n", 1, 14, "Expected 'T' in ISO8601 datetime"),
        ("a: 5kbx\n", 1, 4, None),  # "5kbx" is a string: no error (see test below)
        ("x: 1ZZ3\n", 1, 4, None),
        ("a: -x\n", 1, 5, "Expected a digit"),
        ("lonely_key\n", 1, 1, "key without a value"),
        ("a: 99999999999999999999\n", 1, 4, "out of the range"),
    ],
)
def test_syntax_errors_name_file_line_column(text, line, col, fragment):
    if fragment is None:
        p(text)  # accepted
        return
    with pytest.raises(ConfigError) as ei:
        p(text)
    e = ei.value
    assert fragment in e.message
    assert (e.file, e.line, e.column) == ("t.conf", line, col), str(e)
    assert str(e).startswith(f"t.conf:{line}:{col}: ")


def test_unknown_size_suffix_is_an_error():
    with pytest.raises(ConfigError, match="unknown size suffix"):
        p("a: 5kbib\n")


def test_duplicate_keys_last_wins():
    assert p("a: 1\na: 2\n") == {"a": 2}


def test_empty_and_comment_only_files():
    assert p("") == {}
    assert p("# nothing\n\n// here\n") == {}


def test_crlf_line_endings():
    assert p("a: 1\r\nb: [1,\r\n 2]\r\nc {\r\n d: x\r\n}\r\n") == {"a": 1, "b": [1, 2], "c": {"d": "x"}}


# -- robustness ------------------------------------------------------------------------------

_ALPHABET = st.sampled_from(list("ab1.:=-{}[],;#/\"'\\$ \t\n\rkKmMx()T0Z") + ["true", "include "])


@settings(max_examples=400, deadline=None)
@given(st.lists(_ALPHABET, max_size=40).map("".join))
def test_random_text_parses_or_raises_config_error(text):
    # Never hangs, never raises anything but ConfigError, and errors are located.
    try:
        p(text)
    except ConfigError as e:
        assert e.line >= 1 and e.column >= 1 and e.file == "t.conf"
