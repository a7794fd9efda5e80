"""``natsctl``: the command-line tool for NATS and JetStream (natsd or nats-server).

Verbs follow the reference ``nats`` tool. Every command builds its parser in its own module
(``streams``, ``consumers``, ``pubsub``, ...) and registers an ``async def cmd_...(ctx)`` as ``func``;
it returns None or an exit code, and raises ``CliError`` (exit 1) or ``UsageError`` (exit 2).
Flags shared by every command (``-s``, ``--user``, ``-j``, ...) are accepted before or after the verb.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import sys
from typing import Sequence

from natsd.cli.common import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    ConnOptions,
    Out,
    env_url,
    os_error_words,
    parse_duration,
)
from natsd.cli.context import Ctx
from natsd.redact import redact

EPILOG = """\
exit codes:
  0  success
  1  the server or the JetStream API reported an error (not found, refused, timeout, cannot connect)
  2  usage error: bad flags, or a required value missing with no terminal to prompt on
  130  interrupted (Ctrl-C); long-running commands print a summary of what they did first

environment:
  NATS_URL  server URL when -s/--server is not given (default: the context's, else nats://127.0.0.1:4222)
  NATS_CONTEXT, NATS_USER, NATS_PASSWORD, NATS_CREDS, NATS_NKEY, NATS_CERT, NATS_KEY, NATS_CA, NATS_TIMEOUT
            stand for --context, --user, ... as in the nats CLI (a flag given wins; they win over the context)

contexts:
  `natsctl context add NAME -s URL --creds FILE ...` saves connection settings as the nats CLI does (under
  $XDG_CONFIG_HOME/nats or ~/.config/nats); the selected context, or --context NAME, supplies every flag not given
"""

_SHARED_DEFAULTS = {
    "server": None,
    "user": None,
    "password": None,
    "creds": None,
    "token": None,
    "timeout": None,  # 5s unless NATS_TIMEOUT says otherwise
    "json": False,
    "no_progress": False,
    "force": False,
    "context": None,
    "nkey": None,
    "tlscert": None,
    "tlskey": None,
    "tlsca": None,
    "tlsfirst": False,
    "js_domain": None,
    "js_api_prefix": None,
}


def shared_parent() -> argparse.ArgumentParser:
    """Flags every leaf command accepts. Defaults are SUPPRESSed so a later position does not reset an earlier one."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("connection and output")
    s = argparse.SUPPRESS
    g.add_argument("-s", "--server", default=s, help="NATS server URL(s), comma separated (env NATS_URL)")
    g.add_argument("--user", default=s, help="username")
    g.add_argument("--password", default=s, help="password")
    g.add_argument("--creds", default=s, help="user credentials file")
    g.add_argument("--token", default=s, help="authentication token")
    g.add_argument("--nkey", default=s, help="nkey seed file")
    g.add_argument("--tlscert", default=s, help="TLS client certificate file")
    g.add_argument("--tlskey", default=s, help="TLS client key file")
    g.add_argument("--tlsca", default=s, help="CA file to verify the server's certificate")
    g.add_argument("--tlsfirst", action="store_true", default=s, help="TLS handshake before the server's INFO")
    g.add_argument("--js-domain", dest="js_domain", default=s, help="JetStream domain")
    g.add_argument("--js-api-prefix", dest="js_api_prefix", default=s, help="JetStream API subject prefix")
    g.add_argument("--context", default=s, help="use this context (natsctl context ls) instead of the selected one")
    g.add_argument("--timeout", default=s, help="time to wait for responses, e.g. 2s (default 5s)")
    g.add_argument("-j", "--json", action="store_true", default=s, help="JSON output")
    g.add_argument("--no-progress", action="store_true", default=s, help="no progress bars (log lines instead)")
    g.add_argument("-f", "--force", action="store_true", default=s, help="do not ask for confirmation")
    return p


class Parser(argparse.ArgumentParser):
    """argparse with ``natsctl: error: ...`` messages and exit code 2."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        sys.stderr.write(f"natsctl: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    from natsd.cli import account, backup, bench, consumers, contexts, kv, objects, pubsub, streams, trace

    common = shared_parent()
    parser = Parser(
        prog="natsctl",
        description="NATS and JetStream command-line tool (works with natsd and nats-server)",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    from natsd import __version__

    parser.add_argument("--version", action="version", version=f"natsctl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for mod in (streams, consumers, pubsub, account, backup, kv, objects, bench, contexts, trace):
        mod.register(sub, common)
    return parser


#: Context field -> the nats CLI's environment variable for the same flag.
_ENV_OF = {
    "user": "NATS_USER",
    "password": "NATS_PASSWORD",
    "creds": "NATS_CREDS",
    "nkey": "NATS_NKEY",
    "cert": "NATS_CERT",
    "key": "NATS_KEY",
    "ca": "NATS_CA",
}


def _flag_or_env(flag_value: str | None, env: str) -> str | None:
    if flag_value is not None or not env:
        return flag_value
    return os.environ.get(env) or None


def _conn_options(args: argparse.Namespace) -> ConnOptions:
    """Flags over ``NATS_URL`` over the context (``--context`` or the selected one) over the defaults."""
    from natsd.cli import contexts

    # the nats CLI's environment variables stand for their flags (a flag given wins), as there
    timeout = _flag_or_env(args.timeout, "NATS_TIMEOUT")
    timeout_ns = (parse_duration(timeout, flag="--timeout") if timeout is not None else 0) or 5_000_000_000
    name, c = contexts.active(_flag_or_env(args.context, "NATS_CONTEXT"))

    def pick(flag_value: str | None, field: str) -> str | None:
        flag_value = _flag_or_env(flag_value, _ENV_OF.get(field, ""))
        return flag_value if flag_value is not None else (c.get(field) or None)

    server = args.server or os.environ.get("NATS_URL") or c.get("url") or env_url()
    return ConnOptions(
        server=server,
        user=pick(args.user, "user"),
        password=pick(args.password, "password"),
        creds=pick(args.creds, "creds"),
        token=pick(args.token, "token"),
        timeout=timeout_ns / 1e9,
        nkey=pick(args.nkey, "nkey"),
        tls_cert=pick(args.tlscert, "cert"),
        tls_key=pick(args.tlskey, "key"),
        tls_ca=pick(args.tlsca, "ca"),
        tls_first=bool(args.tlsfirst or c.get("tls_first")),
        js_domain=pick(args.js_domain, "jetstream_domain"),
        js_api_prefix=pick(args.js_api_prefix, "jetstream_api_prefix"),
        inbox_prefix=c.get("inbox_prefix") or None,
        context=name,
    )


async def _run(ctx: Ctx) -> int:
    """Run the command; Ctrl-C (SIGINT) cancels it, prints its summary (``ctx.summary``) and exits 130.

    The first Ctrl-C cancels the command's task, so even a loop that never waits for the network (``pub
    --count``) stops at its next ``await``; the handler is then removed, so a second Ctrl-C interrupts at once.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()

    def on_sigint() -> None:
        ctx.interrupted = True
        loop.remove_signal_handler(signal.SIGINT)
        if task is not None:
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals (Windows)
        pass
    try:
        rc = await ctx.args.func(ctx)
        if ctx.interrupted:  # the command caught the interrupt itself and finished its summary
            return EXIT_INTERRUPTED
        return EXIT_OK if rc is None else int(rc)
    except asyncio.CancelledError:
        if not ctx.interrupted:
            raise
        return EXIT_INTERRUPTED
    finally:
        try:
            loop.remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
        if ctx.interrupted and ctx.summary is not None:
            sys.stdout.flush()
            line = ctx.summary()
            if line:
                sys.stderr.write(f"natsctl: interrupted: {line}\n")
        await ctx.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``natsctl`` console script; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    for k, v in _SHARED_DEFAULTS.items():
        if not hasattr(args, k):
            setattr(args, k, v)
    if not hasattr(args, "func"):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        ctx = Ctx(args, _conn_options(args), Out(json=bool(args.json), progress=not args.no_progress))
        return asyncio.run(_run(ctx))
    except CliError as exc:
        sys.stdout.flush()
        sys.stderr.write(f"natsctl: error: {redact(str(exc))}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `natsctl sub x | head` closes our stdout early; that is not an error for us.
        try:
            sys.stdout = open(os.devnull, "w")  # silence the interpreter's flush at exit
        except OSError:
            pass
        return EXIT_OK
    except Exception as exc:  # last resort: one clear line, not a traceback
        if os.environ.get("NATSCTL_DEBUG"):
            raise
        description, code = getattr(exc, "description", None), getattr(exc, "code", None)
        if description and code:
            # nats-py's APIError (from KV and object store calls): the server's words.
            sys.stderr.write(f"natsctl: error: {description} (code {code}, err_code {getattr(exc, 'err_code', 0)})\n")
            return EXIT_ERROR
        sys.stderr.write(f"natsctl: error: {redact(plain_error(exc))}\n")
        return EXIT_ERROR


def plain_error(exc: BaseException) -> str:
    """An unexpected exception as a user reads it: nats-py's text without its ``nats: `` prefix and without
    Python class names (``BadSubjectError: nats: invalid subject`` → ``invalid subject``); an exception with no
    text is named in words (``ConnectionClosedError`` → ``connection closed``). NATSCTL_DEBUG=1 shows the trace."""
    text = str(exc).strip()
    if text.startswith("nats: "):
        text = text[len("nats: ") :]
    if re.fullmatch(r"(\w+\.)*\w+Error", text):  # nats-py's JetStream errors say only their class name
        text = ""
    if isinstance(exc, OSError):
        text = os_error_words(exc)
    if not text:
        name = type(exc).__name__
        name = name[: -len("Error")] if name.endswith("Error") and name != "Error" else name
        text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).lower() or "unexpected error"
    return text


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
