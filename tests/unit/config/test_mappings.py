"""mappings {} in a config file: parsed per account, errors at file:line with nats-server's texts."""

from __future__ import annotations

import pytest

from natsd.config.options import ConfigErrors, options_from_tree
from natsd.config.parser import parse

pytestmark = [pytest.mark.unit, pytest.mark.timeout(10)]


def test_top_level_and_account_mappings():
    o = options_from_tree(
        parse("""
mappings { "a.*": "b.$1", "c": [ {dest: "d", weight: "40%"}, {destination: "e", weight: 60, cluster: "x"} ] }
accounts { A { mappings { "f": "g" } } }
""")
    )
    assert [s for s, _ in o.mappings] == ["a.*", "c"]
    assert [(d.subject, d.weight, d.cluster) for d in o.mappings[1][1]] == [("d", 40, ""), ("e", 60, "x")]
    assert o.accounts[0].mappings[0][0] == "f"
    assert not o.config_notices  # no longer "not supported"


def test_errors_as_the_reference_prints_them():
    text = """mappings {
  "j.*": "k.{{foo(1)}}"
  "l.*": [ {destination: "m.$1", weight: 120} ]
  "n.*": [ {dest: "o.$1"} ]
  "p.*": [ {dest: "o.$1", weight: 10, bogus: 1} ]
  "e.*.*": [ {dest: "f.$1", weight: 50%}, {dest: "g.$2", weight: 60%} ]
  "a..b": "c"
}
"""
    with pytest.raises(ConfigErrors) as e:
        options_from_tree(parse(text, file="m.conf"))
    got = {(err.line, err.message) for err in e.value.errors}
    assert got == {
        (
            2,
            'Error adding mapping for "j.*" to "k.{{foo(1)}}" : '
            "invalid mapping destination: unknown function in {{foo(1)}}",
        ),
        (3, "Invalid weight 120 for mapping destination"),
        (4, 'Missing weight for mapping destination "o.$1"'),
        (5, 'Unknown field "bogus" for mapping destination'),
        (6, 'Error adding mapping for "e.*.*" : total weight needs to be <= 100'),
        (7, 'Subject "a..b" is not a valid subject'),
    }
    assert all(err.file == "m.conf" for err in e.value.errors)


def test_server_tags_and_metadata():
    o = options_from_tree(parse('server_tags: ["Region:EU", " az:1 ", "region:eu"]\nserver_metadata { env: prod }'))
    assert o.server_tags == ["region:eu", "az:1"] and o.server_metadata == {"env": "prod"}
    assert options_from_tree(parse('server_tags: "A, b"')).server_tags == ["a, b"]  # one tag, as the reference
    with pytest.raises(ConfigErrors, match="error parsing tags"):
        options_from_tree(parse("server_tags: 5"))
