"""natsd.server.main.main() in-process, for the paths that never start a server."""

from __future__ import annotations

from pathlib import Path

from natsd import __version__
from natsd.server.main import main

DATA = Path(__file__).resolve().parents[2] / "data" / "conf"


def test_version(capsys):
    assert main(["-v"]) == 0
    out = capsys.readouterr()
    assert out.out == f"natsd: v{__version__}\n" and out.err == ""


def test_help(capsys):
    assert main(["-h"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("\nUsage: natsd [options]\n") and out.err == ""


def test_bad_flag(capsys):
    assert main(["-x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("flag provided but not defined: -x\n") and "Usage: natsd" in err


def test_check_valid(capsys):
    path = DATA / "full.conf"
    assert main(["-t", "-c", str(path)]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"natsd: configuration file {path} is valid (sha256:")


def test_check_invalid(capsys):
    path = DATA / "bad_value.conf"
    assert main(["-c", str(path), "-t"]) == 1
    assert capsys.readouterr().err == f"natsd: {path}:2:1: max_payload: expected an integer, got string 'lots'\n"


def test_check_without_config(capsys):
    assert main(["-t"]) == 1
    assert "must specify [-c, --config]" in capsys.readouterr().err


def test_check_fails_on_warnings_but_not_on_notices(tmp_path, capsys):
    conf = tmp_path / "w.conf"
    conf.write_text("port: 1\ncluster { port: 2 }\n")
    assert main(["-t", "-c", str(conf)]) == 0  # valid for nats-server; natsd just ignores cluster
    err = capsys.readouterr().err
    assert f'natsd: {conf}:2:1: field "cluster" is not supported by natsd and is ignored\n' in err
    assert "is valid (sha256:" in err
    conf.write_text("port: 1\nping_interval: 30\nbogus: 1\n")
    assert main(["-t", "-c", str(conf)]) == 1
    err = capsys.readouterr().err
    assert f'natsd: {conf}:3:1: unknown field "bogus"' in err
    assert "should be converted to a duration" in err and "is valid" not in err


def test_signal_errors(tmp_path, capsys):
    assert main(["-sl", "reload"]) == 1
    assert "needs a PID or PID file" in capsys.readouterr().err
    assert main(["-sl", "frobnicate=1"]) == 1
    assert 'unknown signal "frobnicate"' in capsys.readouterr().err
    assert main(["-sl", f"reload={tmp_path / 'missing.pid'}"]) == 1
    assert "could not read PID" in capsys.readouterr().err


def test_unopenable_log_file_is_reported(tmp_path, capsys):
    assert main(["-p", "-1", "-l", str(tmp_path / "no" / "such" / "dir" / "x.log")]) == 1
    assert "could not open log file" in capsys.readouterr().err


def test_check_lists_each_ignored_key_in_file_order(tmp_path, capsys):
    conf = tmp_path / "i.conf"
    conf.write_text(
        "cluster { name: c }\njetstream { strict: true }\naccounts { A { imports: [] } }\n"
        'mappings { "a": "b" }\nserver_tags: [x]\n'
    )
    assert main(["-t", "-c", str(conf)]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[:4] == [
        f'natsd: {conf}:1:1: field "cluster" is not supported by natsd and is ignored',
        f'natsd: {conf}:2:13: field "strict" is not supported by natsd and is ignored',
        f'natsd: {conf}:3:16: field "imports" is not supported by natsd and is ignored',
        "natsd: 3 settings of this file are ignored by natsd",
    ]  # mappings and server_tags are implemented: not listed
    assert "is valid (sha256:" in lines[4]
