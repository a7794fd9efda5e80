"""``jetstream { cipher, key, prev_key }`` (encryption at rest): the reference's spellings and
errors; the keys stay out of every message and repr."""

from __future__ import annotations

import pytest

from natsd.config.lexer import ConfigError
from natsd.config.options import ConfigErrors, ServerOptions, options_from_tree
from natsd.config.parser import parse


def opts(text: str) -> ServerOptions:
    return options_from_tree(parse(text, "t.conf", env={}))


def errors_of(text: str) -> list[ConfigError]:
    with pytest.raises(ConfigError) as ei:
        opts(text)
    e = ei.value
    return e.errors if isinstance(e, ConfigErrors) else [e]


@pytest.mark.parametrize("key_name", ["key", "ek", "encryption_key"])
@pytest.mark.parametrize("prev_name", ["prev_key", "prev_ek", "prev_encryption_key"])
def test_keys_and_their_aliases(key_name, prev_name):
    o = opts(f'jetstream {{ {key_name}: "k-now", {prev_name}: "k-before" }}')
    js = o.jetstream
    assert (js.key, js.prev_key, js.cipher) == ("k-now", "k-before", "chachapoly")
    assert o.config_notices == [] and o.config_warnings == []  # supported now: no "ignored" notice


@pytest.mark.parametrize("spelling,cipher", [("chacha", "chachapoly"), ("ChaChaPoly", "chachapoly"), ("AES", "aes")])
def test_cipher_spellings(spelling, cipher):
    assert opts(f'jetstream {{ cipher: {spelling}, key: "k" }}').jetstream.cipher == cipher


def test_unknown_cipher_is_the_reference_error():
    (err,) = errors_of('jetstream {\n  cipher: "des"\n}')
    assert str(err) == 't.conf:2:3: Unknown cipher type: "des"'


def test_a_key_of_the_wrong_type_is_reported_without_its_value():
    (err,) = errors_of("jetstream { key: 123456789 }")
    assert "key: expected a string" in str(err) and "123456789" not in str(err)


def test_keys_are_not_in_the_options_repr():
    o = opts('jetstream { key: "do-not-print-1", prev_key: "do-not-print-2" }')
    assert "do-not-print" not in repr(o) and "do-not-print" not in repr(o.jetstream)
