"""Shared plumbing for ``natsctl``: errors and exit codes, value parsing/formatting, prompts, the JSON API.

Nothing here imports natsd's server packages: the CLI is a plain nats-py client and must work against the
reference nats-server too.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Sequence

import nats
from nats.errors import NoRespondersError
from nats.js.errors import BucketNotFoundError, InvalidBucketNameError, NotFoundError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import StorageType

from natsd import gotime
from natsd.redact import redact, url_has_credentials

#: Exit codes scripts can rely on (also listed in ``natsctl --help``).
EXIT_OK = 0
EXIT_ERROR = 1  # the server or the API refused or failed (includes "not found", timeouts, no connection)
EXIT_USAGE = 2  # bad command line, or a required value missing with no terminal to prompt on
EXIT_INTERRUPTED = 130  # Ctrl-C, as shells report a SIGINT death (128 + 2)

if TYPE_CHECKING:
    from natsd.cli.context import Ctx

DEFAULT_URL = "nats://127.0.0.1:4222"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
API_PREFIX = "$JS.API"


class CliError(Exception):
    """An error reported as ``natsctl: error: <message>`` with exit code 1."""

    exit_code = EXIT_ERROR


class UsageError(CliError):
    """A usage problem: exit code 2."""

    exit_code = EXIT_USAGE


class ApiError(CliError):
    """A ``$JS.API`` error response: ``{"error": {"code", "err_code", "description"}}``."""

    def __init__(self, code: int, err_code: int, description: str):
        super().__init__(description)
        self.code = code
        self.err_code = err_code
        self.description = description

    def __str__(self) -> str:
        return f"{self.description} (code {self.code}, err_code {self.err_code})"


# ---------------------------------------------------------------------------------------------------------------
# Durations, sizes and numbers
# ---------------------------------------------------------------------------------------------------------------

# natsctl takes natscli's extra units on top of Go's (a month is 30 days, a year 365).
_DAY_NS = 86_400_000_000_000
_CLI_UNITS = {"d": _DAY_NS, "w": 7 * _DAY_NS, "M": 30 * _DAY_NS, "y": 365 * _DAY_NS}
_SECONDS = re.compile(r"\d+(\.\d+)?")


def parse_duration(text: str | int | float, *, flag: str = "duration") -> int:
    """Parse ``1y``, ``2d``, ``1h30m``, ``500ms``, ``1.5s`` (Go style plus d/w/M/y, as the ``nats`` tool) to ns.

    ``-1``, ``0``, ``unlimited`` and ``never`` mean 0 (no limit). A bare number is taken as seconds.
    Anything else is Go's ``time.ParseDuration`` (:func:`natsd.gotime.parse_duration`) with the extra
    units; negative durations are refused.
    """
    if isinstance(text, (int, float)):
        return int(text * 1_000_000_000) if text > 0 else 0
    s = str(text).strip()
    if s in ("", "-1", "0", "unlimited", "never", "inf"):
        return 0
    if _SECONDS.fullmatch(s):
        return int(float(s) * 1_000_000_000)
    try:
        ns = gotime.parse_duration(s, extra_units=_CLI_UNITS)
    except ValueError:
        ns = -1
    if ns < 0:
        raise UsageError(f"invalid {flag} {text!r}: use a duration like 1y, 2d, 1h30m, 10s, 500ms")
    return ns


def format_duration(ns: int | None) -> str:
    """Go's ``time.Duration.String()``: ``8760h0m0s``, ``30s``, ``1.5s``, ``500ms``, ``0s``."""
    return gotime.format_duration(int(ns or 0))


_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1024,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 1024**3,
    "t": 1000**4,
    "tb": 1000**4,
    "tib": 1024**4,
}


def parse_size(text: str | int, *, flag: str = "size") -> int:
    """Parse ``-1``, ``1024``, ``10KB``, ``1GiB``, ``512M`` to bytes (``-1`` stays -1 = unlimited)."""
    if isinstance(text, int):
        return text
    s = str(text).strip()
    if s in ("-1", "unlimited"):
        return -1
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([a-zA-Z]*)", s)
    if not m or m.group(2).lower() not in _SIZE_UNITS:
        raise UsageError(f"invalid {flag} {text!r}: use a number of bytes like 1024, 10KB, 1GiB or -1")
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()])


def parse_int(text: str | int, *, flag: str) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        raise UsageError(f"invalid {flag} {text!r}: expected an integer") from None


def human_bytes(n: int | float | None) -> str:
    """IEC sizes as the ``nats`` tool prints them: ``0 B``, ``147 B``, ``1.5 KiB``, ``10 GiB``."""
    n = float(n or 0)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            if unit == "B":
                return f"{int(n)} B"
            return f"{n:.1f} {unit}".replace(".0 ", " ")
        n /= 1024
    return f"{n} B"  # pragma: no cover


def comma(n: int | None) -> str:
    """``1,000,001``."""
    return f"{int(n or 0):,}"


def limit(n: int | None, fmt: Callable[[int], str] = comma) -> str:
    """A limit where -1 (or 0 for some fields) means unlimited."""
    if n is None or n < 0:
        return "unlimited"
    return fmt(n)


def parse_time(s: str | None) -> datetime | None:
    """RFC3339 with nanoseconds (as nats-server writes it) to an aware UTC datetime (to the
    microsecond, truncated); None for Go's zero time or anything unparsable."""
    if not s:
        return None
    try:
        ns = gotime.parse_rfc3339(s)
    except ValueError:
        return None
    if ns == gotime.GO_ZERO_NS:
        return None
    return _EPOCH + timedelta(microseconds=ns // 1000)


def format_time(s: str | None) -> str:
    dt = parse_time(s)
    if dt is None:
        return "never"
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def rfc3339(dt: datetime) -> str:
    """An aware datetime as Go marshals a time.Time (UTC, fraction trimmed): what natscli sends."""
    return gotime.format_rfc3339((dt - _EPOCH) // timedelta(microseconds=1) * 1000)


def choice(value: str, table: dict[str, str], flag: str, expected: Sequence[str] | None = None) -> str:
    """``table[value]`` (case-insensitive), or a usage error listing ``expected`` (default: the values, sorted)."""
    v = table.get(str(value).lower())
    if v is None:
        names = expected if expected is not None else sorted(set(table.values()))
        raise UsageError(f"invalid {flag} {value!r}: expected one of {', '.join(names)}")
    return v


def optional_count(text: str | None) -> int | None:
    """``--count``: how many to take, or None (no limit) when not given."""
    return parse_int(text, flag="--count") if text is not None else None


def optional_seconds(text: str | None) -> float | None:
    """``--wait``: seconds to wait, or None (no limit) when not given or empty."""
    return parse_duration(text, flag="--wait") / 1e9 if text else None


# ---------------------------------------------------------------------------------------------------------------
# Prompts
# ---------------------------------------------------------------------------------------------------------------


def stdin_is_tty() -> bool:
    try:
        return bool(sys.stdin and sys.stdin.isatty())
    except Exception:  # closed or replaced stdin (e.g. under pytest) is "no terminal"
        return False


def ask(
    flag: str,
    question: str,
    default: str | None = None,
    *,
    choices: Sequence[str] | None = None,
    allow_empty: bool = False,
) -> str:
    """Prompt on the terminal for a value a flag would have given, or fail with a usage error naming the flag.

    Without a terminal there is nobody to ask, so scripts get ``--flag is required (no terminal to prompt)``.
    """
    if not stdin_is_tty():
        raise UsageError(f"{flag} is required (no terminal to prompt)")
    hint = f" ({'/'.join(choices)})" if choices else ""
    dflt = f" [{default}]" if default not in (None, "") else ""
    while True:
        sys.stderr.write(f"? {question}{hint}{dflt} ")
        sys.stderr.flush()
        line = sys.stdin.readline()
        if not line:
            raise UsageError(f"{flag} is required (end of input)")
        value = line.strip()
        if not value and default is not None:
            value = default
        if not value and not allow_empty:
            continue
        if choices and value.lower() not in [c.lower() for c in choices]:
            sys.stderr.write(f"  please answer one of: {', '.join(choices)}\n")
            continue
        return value


def choose(names: Sequence[str], arg: str, label: str, none_defined: str) -> str:
    """Pick one of ``names`` on the terminal for the positional ``arg`` that was not given.

    ``label`` is what a name names ("Stream"); ``none_defined`` says why there is nothing to pick. The choices
    are listed one per line, numbered; the answer is a name or its number. Ctrl-D (end of input) gives up with
    the usage error naming ``arg``, as a script without a terminal gets.
    """
    if not names:
        raise CliError(f"could not pick a {label} to operate on: {none_defined}")
    if not stdin_is_tty():
        raise UsageError(f"{arg} is required (no terminal to prompt)")
    width = len(str(len(names)))
    sys.stderr.write("".join(f"  {str(i).rjust(width)}) {n}\n" for i, n in enumerate(names, 1)))
    default = names[0] if len(names) == 1 else None
    while True:
        answer = ask(arg, f"Select a {label} (name or number)", default)
        if answer in names:
            return answer
        if answer.isdigit() and 1 <= int(answer) <= len(names):
            return names[int(answer) - 1]
        lowered = [n for n in names if n.lower() == answer.lower()]
        if len(lowered) == 1:
            return lowered[0]
        sys.stderr.write(f"  {answer!r} is not one of the {len(names)} choices above\n")


def read_stdin_bytes() -> bytes:
    """All of stdin as bytes (binary-safe when stdin has a buffer)."""
    buf = getattr(sys.stdin, "buffer", None)
    if buf is not None:
        return buf.read()
    return sys.stdin.read().encode()


def confirm(question: str, force: bool) -> None:
    """Ask yes/no before a destructive action; ``-f`` skips it; without a terminal ``--force`` is required."""
    if force:
        return
    if not stdin_is_tty():
        raise UsageError("--force is required (no terminal to prompt)")
    sys.stderr.write(f"? {question} (y/N) ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise CliError("aborted")


# ---------------------------------------------------------------------------------------------------------------
# The connection and the JSON API
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class ConnOptions:
    """Connection flags shared by every verb."""

    server: str = DEFAULT_URL
    user: str | None = None
    password: str | None = None
    creds: str | None = None
    token: str | None = None
    timeout: float = 5.0
    name: str = "natsctl"
    nkey: str | None = None  # path of an nkey seed file
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    tls_first: bool = False
    js_domain: str | None = None
    js_api_prefix: str | None = None
    inbox_prefix: str | None = None
    context: str = ""  # the context these came from, for messages

    @property
    def api_prefix(self) -> str:
        """``$JS.API``, ``$JS.<domain>.API`` for a JetStream domain, or the explicit API prefix."""
        if self.js_api_prefix:
            return self.js_api_prefix.rstrip(".")
        if self.js_domain:
            return f"$JS.{self.js_domain}.API"
        return API_PREFIX

    def tls_context(self) -> Any:
        """An ``ssl.SSLContext`` when a CA or client certificate is set (tls:// URLs work without one)."""
        if not (self.tls_ca or self.tls_cert):
            return None
        import ssl

        for path in (self.tls_ca, self.tls_cert, self.tls_key):
            try:
                if path:
                    with open(os.path.expanduser(path), "rb"):
                        pass
            except OSError as exc:  # ssl's own error does not say which file
                raise UsageError(f"cannot load the TLS files: {os_error_words(exc)}") from None
        try:
            tls = ssl.create_default_context(cafile=os.path.expanduser(self.tls_ca) if self.tls_ca else None)
            if self.tls_cert:
                tls.load_cert_chain(
                    os.path.expanduser(self.tls_cert), os.path.expanduser(self.tls_key) if self.tls_key else None
                )
        except ssl.SSLError as exc:  # a file that is there but is no PEM certificate/key, or they do not match
            words = str(exc.reason or exc.strerror or "not PEM").lower().replace("_", " ")
            raise UsageError(f"cannot load the TLS files: {words}") from None
        except OSError as exc:
            raise UsageError(f"cannot load the TLS files: {os_error_words(exc)}") from None
        return tls

    def check_files(self) -> None:
        """The credentials and nkey files must be readable before connecting (nats-py only opens them when the
        server asks, so a mistyped path would pass unnoticed against a server without authentication)."""
        for what, path in (("credentials", self.creds), ("nkey", self.nkey)):
            if path:
                try:
                    with open(os.path.expanduser(path), "rb"):
                        pass
                except OSError as exc:
                    raise UsageError(f"cannot read the {what} file: {os_error_words(exc)}") from None


def os_error_words(exc: OSError) -> str:
    """An OS error as words, without Python's ``[Errno N]`` (``/x.pem: no such file or directory``,
    ``connection refused``)."""
    words = (exc.strerror or str(exc) or type(exc).__name__).strip()
    if words.endswith("."):
        words = words[:-1]
    words = words[:1].lower() + words[1:]
    if words.startswith("connect call failed"):  # asyncio's words for a refused TCP connect
        words = "connection refused"
    name = exc.filename if isinstance(exc.filename, str) else None
    return f"{name}: {words}" if name else words


async def connect(opts: ConnOptions, *, on_error: Callable[[Exception], None] | None = None, **extra: Any) -> nats.NATS:
    """Connect with nats-py; failures become a :class:`CliError` naming the server (credentials
    redacted). ``on_error`` also sees the errors nats-py reports after connecting."""
    servers = [s.strip() for s in opts.server.split(",") if s.strip()]
    servers = [s if "://" in s else f"nats://{s}" for s in servers]
    kw: dict[str, Any] = dict(
        servers=servers,
        name=opts.name,
        connect_timeout=max(min(opts.timeout, 5.0), 1.0),
        # nats-py treats max_reconnect_attempts=0 as "forever", even for the first connect: allow one retry
        # per server with a short wait, so an unreachable server fails in about connect_timeout.
        allow_reconnect=False,
        max_reconnect_attempts=1,
        reconnect_time_wait=0.1,
    )
    # A URL that carries a user (nats://sys:pass@host, or a token) is the identity used, over the
    # context's and the flags' credentials, as in the nats CLI (nats.go takes the URL's user info).
    # nats-py would do the opposite (its user/password/credentials options win over the URL).
    if not url_has_credentials(opts.server):
        opts.check_files()
        if opts.user:
            kw["user"] = opts.user
            kw["password"] = opts.password or ""
        if opts.token:
            kw["token"] = opts.token
        if opts.creds:
            kw["user_credentials"] = os.path.expanduser(opts.creds)
        if opts.nkey:
            kw["nkeys_seed"] = os.path.expanduser(opts.nkey)
    tls = opts.tls_context()
    if tls is not None:
        kw["tls"] = tls
    if opts.tls_first:
        kw["tls_handshake_first"] = True
    if opts.inbox_prefix:
        kw["inbox_prefix"] = opts.inbox_prefix
    kw.update(extra)

    errors: list[Exception] = []

    async def _quiet(e: Exception) -> None:
        # nats-py logs connection errors through these callbacks; the CLI reports them once itself.
        errors.append(e)
        if on_error is not None:
            on_error(e)

    kw.setdefault("error_cb", _quiet)
    nc = nats.NATS()
    try:
        await asyncio.wait_for(nc.connect(**kw), timeout=2 * kw["connect_timeout"] * len(servers) + 1)
    except Exception as exc:  # nats-py raises a variety here
        cause = errors[-1] if errors else exc
        try:
            await nc.close()
        except Exception:
            pass
        via = f" (context {opts.context})" if opts.context else ""
        if isinstance(cause, OSError):
            words = os_error_words(cause)
        else:
            words = str(cause).strip() or type(cause).__name__
            words = words[len("nats: ") :] if words.startswith("nats: ") else words
        raise CliError(f"could not connect to {redact(opts.server)}{via}: {redact(words)}") from None
    return nc


def api_reply(data: bytes, invalid: str) -> dict:
    """A ``$JS.API`` reply's JSON; an ``error`` in it raises :class:`ApiError`, bad JSON ``CliError(invalid …)``."""
    try:
        resp = json.loads(data) if data else {}
    except ValueError:
        raise CliError(f"{invalid} {data[:200]!r}") from None
    err = resp.get("error") if isinstance(resp, dict) else None
    if err:
        raise ApiError(int(err.get("code", 0)), int(err.get("err_code", 0)), str(err.get("description", "")))
    return resp


class JsApi:
    """Raw ``$JS.API`` requests with JSON in and out (the server's JSON is kept verbatim for ``-j``)."""

    def __init__(self, nc: nats.NATS, timeout: float, prefix: str = API_PREFIX):
        self.nc = nc
        self.timeout = timeout
        self.prefix = prefix

    async def request(
        self, subject: str, body: Any = None, *, timeout: float | None = None, raw: bytes | None = None
    ) -> dict:
        """Request ``$JS.API.<subject>``; an ``error`` in the reply raises :class:`ApiError`."""
        full = f"{self.prefix}.{subject}"
        payload = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        try:
            msg = await self.nc.request(full, payload, timeout=timeout or self.timeout)
        except NoRespondersError:
            raise CliError("JetStream not enabled (no responders for " + full + ")") from None
        except (NatsTimeoutError, asyncio.TimeoutError):
            raise CliError(f"no response from the server to {full} (timeout)") from None
        return api_reply(msg.data, f"invalid JSON response from {full}:")

    async def paged(self, subject: str, key: str, body: dict | None = None) -> list:
        """Collect every page of a paged list/names response (``offset``/``limit``/``total``)."""
        out: list = []
        offset = 0
        while True:
            req = dict(body or {})
            req["offset"] = offset
            resp = await self.request(subject, req)
            items = resp.get(key) or []
            out.extend(items)
            total = int(resp.get("total", len(out)))
            if not items or len(out) >= total:
                return out
            offset = len(out)

    async def stream_names(self, subject: str | None = None) -> list[str]:
        body = {"subject": subject} if subject else None
        return sorted(await self.paged("STREAM.NAMES", "streams", body))

    async def stream_infos(self, subject: str | None = None) -> list[dict]:
        """Every stream's info (``STREAM.LIST``, all pages), sorted by name; ``subject``: only streams capturing it."""
        body = {"subject": subject} if subject else None
        return sorted(await self.paged("STREAM.LIST", "streams", body), key=lambda i: i["config"]["name"])

    async def consumer_names(self, stream: str) -> list[str]:
        return sorted(await self.paged(f"CONSUMER.NAMES.{stream}", "consumers"))


def strip_type(resp: dict) -> dict:
    """The response minus the ``type`` envelope key, for ``-j`` output."""
    return {k: v for k, v in resp.items() if k != "type"}


def without_server_metadata(cfg: dict) -> dict:
    """``cfg`` minus the bookkeeping metadata the server adds (``_nats.*``), so configs compare and restore cleanly."""
    out = dict(cfg)
    md = {k: v for k, v in (out.get("metadata") or {}).items() if not k.startswith("_nats.")}
    if md:
        out["metadata"] = md
    else:
        out.pop("metadata", None)
    return out


def config_diff(old: dict, new: dict) -> list[str]:
    """``-key: old`` / ``+key: new`` lines for every changed top-level field."""
    lines = []
    for k in sorted(set(old) | set(new)):
        if old.get(k) != new.get(k):
            if k in old:
                lines.append(f"-  {k}: {json.dumps(old[k])}")
            if k in new:
                lines.append(f"+  {k}: {json.dumps(new[k])}")
    return lines


def error_text(exc: BaseException) -> str:
    """What nats-py's errors say: an APIError's description, else the exception's text."""
    return str(getattr(exc, "description", None) or exc)


def _comment_hint(path: str) -> str:
    """A hint when a JSON file that failed to parse has comment lines (JSON has no comments; people add them)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [ln.strip() for ln in f]
    except OSError:
        return ""
    if any(ln.startswith(("//", "/*", "#")) or " // " in ln for ln in lines):
        return " (JSON does not allow comments: remove the // , /* */ or # lines)"
    return ""


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2)


def payload_json(data: bytes | None) -> dict[str, str]:
    """A message body in ``-j`` output: ``{"data": text}``, or base64 with ``"encoding": "base64"`` when the bytes
    are not UTF-8 (the same rule for every command, so binary bodies survive a round trip through JSON)."""
    data = data or b""
    try:
        return {"data": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"data": base64.b64encode(data).decode("ascii"), "encoding": "base64"}


def text_of(data: bytes | None) -> str:
    """A body for human output (undecodable bytes shown as U+FFFD; ``--raw`` and ``-j`` keep them exact)."""
    return (data or b"").decode("utf-8", errors="replace")


def check_subject(subject: str, *, wildcards: bool, what: str = "subject") -> str:
    """A usage error naming the subject when it is not a valid NATS subject (nats-py's own says only
    ``nats: invalid subject``); ``wildcards``: ``*`` and a final ``>`` are allowed (subscriptions)."""
    bad = not subject or any(c in subject for c in " \t\r\n")
    if not bad:
        tokens = subject.split(".")
        for i, t in enumerate(tokens):
            if not t:
                bad = True
            elif not wildcards and t in ("*", ">"):
                bad = True
            elif t == ">" and i != len(tokens) - 1:
                bad = True
            elif wildcards and t not in ("*", ">") and ("*" in t or ">" in t):
                bad = True  # a wildcard must be a whole token in a subscription
    if bad:
        raise UsageError(f"invalid {what} {subject!r}")
    return subject


def read_json_file(path: str, flag: str = "--config") -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise UsageError(f"cannot read {flag} file {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise UsageError(f"invalid JSON in {flag} file {path}: {exc}{_comment_hint(path)}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{flag} file {path} must hold a JSON object")
    # Accept the bare config, a whole `stream info -j` / `consumer info -j`, or a create request
    # ({"stream_name", "config"}): the config is under "config" in all but the first.
    if isinstance(data.get("config"), dict) and ("stream_name" in data or "state" in data or "name" not in data):
        outer = data
        data = dict(outer["config"])
        if "stream_name" in outer:
            data["stream_name"] = outer["stream_name"]
    return data


@dataclass
class Out:
    """Where a command writes: human text or JSON to stdout, log lines to stderr."""

    json: bool = False
    progress: bool = True

    def print(self, *parts: Any, end: str = "\n") -> None:
        sys.stdout.write(" ".join(str(p) for p in parts) + end)

    def json_out(self, obj: Any) -> None:
        sys.stdout.write(dumps(obj) + "\n")

    def json_line(self, obj: Any) -> None:
        """One JSON object on one line: the output of streaming commands (``sub -j``, ``kv watch -j``)."""
        sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
        sys.stdout.flush()

    def raw(self, data: bytes, end: bytes = b"\n") -> None:
        """Bytes exactly as received (``--raw``): through stdout's binary buffer when it has one."""
        buf = getattr(sys.stdout, "buffer", None)
        if buf is not None:
            sys.stdout.flush()
            buf.write(data + end)
            buf.flush()
        else:  # a text-only stdout (tests capturing output in-process): the closest text
            sys.stdout.write((data + end).decode("utf-8", errors="replace"))

    def log(self, text: str) -> None:
        """A timestamped log line on stderr (like the ``nats`` tool's ``15:56:11 Creating backup``)."""
        sys.stderr.write(f"{datetime.now().strftime('%H:%M:%S')} {text}\n")

    def show_progress(self) -> bool:
        try:
            return self.progress and sys.stderr.isatty()
        except (AttributeError, ValueError):
            return False


def env_url() -> str:
    return os.environ.get("NATS_URL") or DEFAULT_URL


# ---------------------------------------------------------------------------------------------------------------
# Command plumbing shared by the verbs
# ---------------------------------------------------------------------------------------------------------------


def show_result(ctx: Ctx, resp: dict, *texts: str) -> None:
    """``-j``: the API response without its ``type`` envelope; otherwise print each human text."""
    if ctx.json:
        ctx.out.json_out(strip_type(resp))
        return
    for text in texts:
        ctx.out.print(text)


async def show_api(ctx: Ctx, subject: str, text: Callable[[dict], str]) -> dict:
    """Request ``$JS.API.<subject>`` and show the response (``-j``) or ``text(response)``; returns the response."""
    resp = await (await ctx.api()).request(subject)
    show_result(ctx, resp, text(resp))
    return resp


def print_names(ctx: Ctx, names: Sequence[str]) -> None:
    """``ls -j`` (a JSON list) or ``ls --names`` (one a line)."""
    if ctx.json:
        ctx.out.json_out(names)
        return
    for n in names:
        ctx.out.print(n)


def confirm_edit(ctx: Ctx, what: str, old: dict, new: dict, force: bool) -> None:
    """Show the configuration diff for an edit of ``what`` and confirm it; no difference is an error."""
    diff = config_diff(old, new)
    if not diff:
        raise CliError(f"no difference in configuration for {what}")
    if not ctx.json:
        ctx.out.print("Differences (-old +new):")
        ctx.out.print("\n".join(diff) + "\n")
    if stdin_is_tty():
        confirm(f"Really edit {what}", force)


async def arrivals(
    next_item: Callable[[float | None], Awaitable[Any]],
    count: int | None,
    wait_s: float | None,
    *,
    idle: float | None = None,
    stop_on: tuple[type[BaseException], ...] = (asyncio.TimeoutError,),
) -> AsyncIterator[Any]:
    """Yield ``await next_item(timeout)`` until ``count`` items, ``wait_s`` seconds, or a ``stop_on`` error.

    Without ``wait_s`` each wait is ``idle`` seconds (None: forever); a None item is skipped, not counted.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s if wait_s else None
    n = 0
    while count is None or n < count:
        remaining = idle if deadline is None else deadline - loop.time()
        if remaining is not None and remaining <= 0:
            return
        try:
            item = await next_item(remaining)
        except stop_on:
            return
        if item is None:
            continue
        n += 1
        yield item


def queue_subscriber(maxsize: int) -> tuple[asyncio.Queue, Callable[[Any], Awaitable[None]]]:
    """A bounded queue and a subscription callback that fills it (dropping messages when it is full)."""
    queue: asyncio.Queue = asyncio.Queue(maxsize=maxsize)

    async def on_msg(msg: Any) -> None:
        if not queue.full():
            queue.put_nowait(msg)

    return queue, on_msg


async def next_from(queue: asyncio.Queue, timeout: float | None) -> Any:
    return await asyncio.wait_for(queue.get(), timeout)


# ---------------------------------------------------------------------------------------------------------------
# KV and object store buckets (nats-py's KeyValue/ObjectStore over streams named KV_<b> / OBJ_<b>)
# ---------------------------------------------------------------------------------------------------------------


def bucket_flags(p: Any, **help: str) -> None:
    """The ``add`` flags a KV and an object store bucket share; ``help`` gives texts by flag dest."""
    p.add_argument("bucket")
    p.add_argument("--ttl", default=None, help=help.get("ttl"))
    p.add_argument("--max-bucket-size", dest="max_bucket_size", default=None, help=help.get("max_bucket_size"))
    p.add_argument("--storage", default="file", choices=["file", "memory"])
    p.add_argument("--replicas", default="1")
    p.add_argument("--description", default=None)


def bucket_limits(a: Any) -> dict[str, Any]:
    """``KeyValueConfig``/``ObjectStoreConfig`` keyword arguments from :func:`bucket_flags`."""
    return dict(
        description=a.description,
        ttl=parse_duration(a.ttl, flag="--ttl") / 1e9 if a.ttl else None,
        max_bytes=parse_size(a.max_bucket_size, flag="--max-bucket-size") if a.max_bucket_size else None,
        storage=StorageType.MEMORY if a.storage == "memory" else StorageType.FILE,
        replicas=parse_int(a.replicas, flag="--replicas"),
    )


async def open_bucket(opened: Awaitable[Any], bucket: str) -> Any:
    """Await nats-py's ``key_value(b)``/``object_store(b)``; a missing bucket is a :class:`CliError`."""
    try:
        return await opened
    except (BucketNotFoundError, NotFoundError):
        raise CliError(f"bucket {bucket} not found") from None
    except InvalidBucketNameError:
        raise UsageError(f"invalid bucket name '{bucket}'") from None


async def create_bucket(created: Awaitable[Any], bucket: str) -> None:
    try:
        await created
    except Exception as exc:  # nats-py APIError and friends
        raise CliError(f"could not create bucket {bucket}: {error_text(exc)}") from None


async def delete_bucket(deleted: Awaitable[Any], bucket: str) -> None:
    try:
        await deleted
    except NotFoundError:
        raise CliError(f"bucket {bucket} not found") from None


async def bucket_streams(ctx: Ctx, prefix: str) -> tuple[list[dict], list[str]]:
    """The infos of the streams backing ``prefix`` buckets (sorted by name) and the bucket names."""
    api = await ctx.api()
    infos = [i for i in await api.stream_infos() if i["config"]["name"].startswith(prefix)]
    return infos, [i["config"]["name"][len(prefix) :] for i in infos]


def backing_store(cfg: dict) -> tuple[str, str]:
    """The ``Backing Store`` row of a bucket's status."""
    return ("Backing Store", f"JetStream ({str(cfg.get('storage')).capitalize()} stream {cfg.get('name')})")
