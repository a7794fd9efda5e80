"""``natsctl context …``: named connection settings, stored exactly as the Go ``nats`` tool (natscli) keeps them.

Files (shared with natscli, so a context made by either tool works in the other)::

    $XDG_CONFIG_HOME/nats/context/<name>.json     (default ~/.config/nats/context/<name>.json)
    $XDG_CONFIG_HOME/nats/context.txt             the selected context's name

A context file is one JSON object; the fields natsctl uses are ``description``, ``url``, ``token``, ``user``,
``password``, ``creds``, ``nkey`` (path of an nkey seed file), ``cert``, ``key``, ``ca``, ``tls_first``,
``jetstream_domain``, ``jetstream_api_prefix``, ``jetstream_event_prefix`` and ``inbox_prefix``. Fields it does not
know (natscli adds some over time) are kept as they are when natsctl rewrites a file.

Which settings apply: ``--context NAME`` or else the selected context gives the defaults; ``NATS_URL`` then
replaces the URL, and every flag given on the command line (``-s``, ``--user``, ``--creds``, ``--tlsca``, ...)
replaces its field.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from natsd.atomicfile import atomic_write
from natsd.cli import render
from natsd.cli.common import CliError, UsageError, confirm, stdin_is_tty
from natsd.cli.context import Ctx
from natsd.redact import redact

#: natscli's field -> the flag that sets it (``context add``), in natscli's order.
FIELDS = [
    ("description", "--description"),
    ("url", "--server"),
    ("token", "--token"),
    ("user", "--user"),
    ("password", "--password"),
    ("creds", "--creds"),
    ("nkey", "--nkey"),
    ("cert", "--tlscert"),
    ("key", "--tlskey"),
    ("ca", "--tlsca"),
    ("jetstream_domain", "--js-domain"),
    ("jetstream_api_prefix", "--js-api-prefix"),
    ("jetstream_event_prefix", "--js-event-prefix"),
    ("inbox_prefix", "--inbox-prefix"),
]


def config_dir() -> Path:
    """``$XDG_CONFIG_HOME/nats`` or ``~/.config/nats`` (natscli's choice)."""
    parent = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(parent) / "nats"


def _valid(name: str) -> str:
    # natscli refuses names that could leave the folder
    if not name or ".." in name or "/" in name or os.sep in name:
        raise UsageError(f"invalid context name {name!r}")
    return name


def context_path(name: str) -> Path:
    return config_dir() / "context" / f"{_valid(name)}.json"


def known() -> list[str]:
    d = config_dir() / "context"
    try:
        return sorted(p.stem for p in d.iterdir() if p.suffix == ".json" and p.is_file() and p.stat().st_size)
    except OSError:
        return []


def selected() -> str:
    try:
        return (config_dir() / "context.txt").read_text().strip()
    except OSError:
        return ""


def load(name: str) -> dict[str, Any]:
    path = context_path(name)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise CliError(f"unknown context {name!r} (no {path})") from None
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read context {name!r} from {path}: {exc}") from None
    if not isinstance(data, dict):
        raise CliError(f"context file {path} does not hold a JSON object")
    return data


def save(name: str, data: dict[str, Any]) -> Path:
    path = context_path(name)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # 0600 as natscli writes them: a context may hold a password or token
    atomic_write(path, (json.dumps(data, indent=2) + "\n").encode(), fsync=False, mode=0o600)
    return path


def select(name: str) -> None:
    if not context_path(name).exists():
        raise CliError(f"unknown context {name!r}")
    d = config_dir()
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    (d / "context.txt").write_text(name)


def active(explicit: str | None) -> tuple[str, dict[str, Any]]:
    """The context in force: ``--context`` or the selected one; ``("", {})`` when there is none."""
    name = explicit or selected()
    if not name:
        return "", {}
    if not explicit and not context_path(name).exists():
        return "", {}  # a stale context.txt is not an error until someone asks for it by name
    return name, load(name)


# ---------------------------------------------------------------------------------------------------------------


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("context", aliases=["ctx"], help="named connection settings (shared with the nats CLI)")
    s = p.add_subparsers(dest="context_cmd", metavar="VERB", parser_class=type(p))
    s.required = True

    a = s.add_parser(
        "add", aliases=["save", "create"], parents=[common], help="create or update a context from the connection flags"
    )
    a.add_argument("name")
    a.add_argument("--description", default=None)
    a.add_argument("--select", action="store_true", help="also make it the selected context")
    a.set_defaults(func=cmd_add)

    ls = s.add_parser("ls", aliases=["list"], parents=[common], help="list contexts")
    ls.set_defaults(func=cmd_ls)

    se = s.add_parser("select", parents=[common], help="make a context the default")
    se.add_argument("name", nargs="?")
    se.set_defaults(func=cmd_select)

    i = s.add_parser("info", aliases=["show"], parents=[common], help="a context's settings")
    i.add_argument("name", nargs="?")
    i.set_defaults(func=cmd_info)

    r = s.add_parser("rm", aliases=["delete"], parents=[common], help="delete a context")
    r.add_argument("name")
    r.set_defaults(func=cmd_rm)


def _flag_values(a: argparse.Namespace) -> dict[str, Any]:
    """The context fields given as flags on this command line."""
    pairs = {
        "url": a.server,
        "user": a.user,
        "password": a.password,
        "creds": a.creds,
        "token": a.token,
        "nkey": a.nkey,
        "cert": a.tlscert,
        "key": a.tlskey,
        "ca": a.tlsca,
        "jetstream_domain": a.js_domain,
        "jetstream_api_prefix": a.js_api_prefix,
        "description": getattr(a, "description", None),
    }
    out = {k: v for k, v in pairs.items() if v is not None}
    if a.tlsfirst:
        out["tls_first"] = True
    return out


async def cmd_add(ctx: Ctx) -> None:
    a = ctx.args
    name = _valid(a.name)
    path = context_path(name)
    data = load(name) if path.exists() else {}
    for field, _ in FIELDS:  # natscli writes every field, empty ones as ""
        data.setdefault(field, "")
    data.update(_flag_values(a))
    if not data.get("url"):
        data["url"] = "nats://127.0.0.1:4222"
    saved = save(name, data)
    if a.select or not selected():
        select(name)
    if ctx.json:
        ctx.out.json_out({"name": name, "path": str(saved), "selected": selected() == name, **_shown(data)})
    else:
        ctx.out.print(f'NATS Configuration Context "{name}" saved to {saved}\n')
        ctx.out.print(_info_text(name, data, saved))


def _shown(data: dict[str, Any]) -> dict[str, Any]:
    """A context for display: secrets masked."""
    out = dict(data)
    for secret in ("password", "token"):
        if out.get(secret):
            out[secret] = "*********"
    return out


def _info_text(name: str, data: dict[str, Any], path: Path) -> str:
    rows = [
        ("Description", data.get("description") or ""),
        ("Server URLs", redact(data.get("url") or "")),
        ("Path", str(path)),
    ]
    labels = {
        "user": "Username",
        "password": "Password",
        "token": "Token",
        "creds": "Credentials",
        "nkey": "NKey",
        "cert": "Certificate",
        "key": "Key",
        "ca": "CA",
        "jetstream_domain": "JetStream Domain",
        "jetstream_api_prefix": "JetStream API Prefix",
        "jetstream_event_prefix": "JetStream Event Prefix",
        "inbox_prefix": "Inbox Prefix",
    }
    shown = _shown(data)
    for field, label in labels.items():
        if shown.get(field):
            rows.append((label, shown[field]))
    if data.get("tls_first"):
        rows.append(("TLS First", "true"))
    for field in ("creds", "nkey", "cert", "key", "ca"):
        if data.get(field) and not os.path.exists(os.path.expanduser(str(data[field]))):
            rows.append(("Warning", f"{field} file {data[field]} does not exist"))
    return render.sections(f'NATS Configuration Context "{name}"', [("Settings", rows)])


async def cmd_ls(ctx: Ctx) -> None:
    names = known()
    cur = selected()
    if ctx.json:
        ctx.out.json_out(names)
        return
    if not names:
        ctx.out.print(f"No contexts defined in {config_dir() / 'context'}")
        return
    rows = []
    for n in names:
        try:
            d = load(n)
        except CliError:
            d = {}
        rows.append([n + ("*" if n == cur else ""), d.get("description", ""), redact(d.get("url", ""))])
    ctx.out.print(render.table("Known Contexts", ["Name", "Description", "Server"], rows))


async def cmd_select(ctx: Ctx) -> None:
    a = ctx.args
    name = a.name
    if not name:
        from natsd.cli.common import choose

        name = choose(known(), "NAME", "Context", f"no contexts in {config_dir() / 'context'}")
    select(_valid(name))
    if ctx.json:
        ctx.out.json_out({"selected": name})
    else:
        ctx.out.print(f'Selected context "{name}"')


async def cmd_info(ctx: Ctx) -> None:
    name = ctx.args.name or selected()
    if not name:
        raise UsageError("NAME is required (no context is selected)")
    data = load(name)
    if ctx.json:
        ctx.out.json_out(
            {"name": name, "path": str(context_path(name)), "selected": selected() == name, **_shown(data)}
        )
    else:
        ctx.out.print(_info_text(name, data, context_path(name)))


async def cmd_rm(ctx: Ctx) -> None:
    a = ctx.args
    name = _valid(a.name)
    path = context_path(name)
    if not path.exists():
        raise CliError(f"unknown context {name!r}")
    if selected() == name and not a.force:
        raise CliError(f"{name!r} is the selected context: select another one first (or pass -f)")
    if stdin_is_tty():
        confirm(f"Really delete context {name}", a.force)
    path.unlink()
    if selected() == name:
        try:
            (config_dir() / "context.txt").unlink()
        except OSError:
            pass
    if ctx.json:
        ctx.out.json_out({"name": name, "deleted": True})
    else:
        ctx.out.print(f'Deleted context "{name}"')
