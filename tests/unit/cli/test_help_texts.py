"""Every flag and argument of the verbs a new user meets first says what it does in --help."""

from __future__ import annotations

import argparse

import pytest

from natsd.cli.main import build_parser

pytestmark = [pytest.mark.unit, pytest.mark.timeout(10)]


def _subparser(parser: argparse.ArgumentParser, *path: str) -> argparse.ArgumentParser:
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


@pytest.mark.parametrize("path", [("pub",), ("stream", "add"), ("server", "report", "accounts")])
def test_every_option_has_a_description(path):
    p = _subparser(build_parser(), *path)
    missing = [
        a.option_strings or [a.dest]
        for a in p._actions
        if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) and not (a.help or "").strip()
    ]
    assert missing == []


def test_pub_wait_says_what_it_waits_for():
    p = _subparser(build_parser(), "pub")
    wait = next(a for a in p._actions if "--wait" in a.option_strings)
    assert "--jetstream" in wait.option_strings and "acknowledgement" in wait.help
