"""nats-server's command line, for ``natsd``.

Flags follow Go's ``flag`` package, as nats-server uses it, so tools that start ``nats-server``
can start ``natsd`` instead:

* one or two dashes are the same: ``-port 4222``, ``--port 4222``, ``-port=4222``, ``--port=4222``;
  short and long names are aliases (``-p``/``--port``, ``-sd``/``--store_dir``, ...);
* a boolean flag takes no separate argument (``-js``), but accepts ``-js=false``;
* parsing stops at ``--`` or at the first argument that is not a flag; the words ``version`` and
  ``help`` there act like ``-v``/``-h``, anything else is an error.

Explicit flags override the config file (nats-server parses the flags again after the file).
The arguments are kept on the options (``ServerOptions.cli_flags``) so a reload re-reads the
file and re-applies the same flags (:func:`reload_options`).
"""

from __future__ import annotations

from dataclasses import field

from natsd.lazydataclass import dataclass
from typing import Any

from natsd import __version__
from natsd.config.lexer import ConfigError
from natsd.config.options import ConfigErrors, ServerOptions, options_from_file, tls_auth_timeout
from natsd.config.ports import PortConfigError
from natsd.config.tls import TLSConfigError, TLSOptions, build_server_context

__all__ = [
    "FlagError",
    "ParsedFlags",
    "parse_flags",
    "apply_flags",
    "build_options",
    "reload_options",
    "usage",
    "version_line",
    "FLAGS",
]


class FlagError(Exception):
    """A bad command line (Go's messages: ``flag provided but not defined: -x``, ...)."""


# Each flag: alias names -> (kind, destination). Destinations:
#   an attribute of ServerOptions; "js.<attr>" for JetStreamOptions; "@<name>" for main's own
#   controls (config, check, help, version, signal); "!<note>" accepted and ignored with a
#   warning (nats-server features natsd lacks that are harmless to skip).
_FLAG_SPECS: list[tuple[tuple[str, ...], str, str]] = [
    (("h", "help"), "bool", "@help"),
    (("v", "version"), "bool", "@version"),
    (("p", "port"), "int", "port"),
    (("a", "addr", "net"), "str", "host"),
    (("n", "name", "server_name"), "str", "server_name"),
    (("m", "http_port"), "int", "http_port"),
    (("c", "config"), "str", "@config"),
    (("t",), "bool", "@check"),
    (("sl", "signal"), "str", "@signal"),
    (("P", "pid"), "str", "pid_file"),
    (("ports_file_dir",), "str", "ports_file_dir"),
    (("l", "log"), "str", "log_file"),
    (("T", "logtime"), "bool", "logtime"),
    (("D", "debug"), "bool", "debug"),
    (("V", "trace"), "bool", "trace"),
    (("VV",), "bool", "@trace_verbose"),
    (("DV",), "bool", "@debug_trace"),
    (("DVV",), "bool", "@debug_trace"),
    (("js", "jetstream"), "bool", "js.enabled"),
    (("sd", "store_dir"), "str", "js.store_dir"),
    (("user",), "str", "username"),
    (("pass",), "str", "password"),
    (("auth",), "str", "authorization"),
    # TLS (applied together by _apply_tls_flags, as nats-server's configureTLS).
    (("tls",), "bool", "tls.enabled"),
    (("tlscert",), "str", "tls.cert_file"),
    (("tlskey",), "str", "tls.key_file"),
    (("tlscacert",), "str", "tls.ca_file"),
    (("tlsverify",), "bool", "tls.verify"),
    (("ms", "https_port"), "int", "https_port"),
    (("logtime_utc",), "bool", "logtime_utc"),
    (("s", "syslog"), "bool", "syslog"),
    (("r", "remote_syslog"), "str", "remote_syslog"),
    (("log_size_limit",), "int", "log_size_limit"),
    (("max_traced_msg_len",), "int", "max_traced_msg_len"),
    # Accepted for compatibility; natsd has no equivalent, so they only warn.
    (("client_advertise",), "str", "!client_advertise"),
    (("profile",), "int", "!profile"),
]

FLAGS: dict[str, tuple[str, str]] = {n: (kind, dest) for names, kind, dest in _FLAG_SPECS for n in names}

# nats-server flags natsd refuses rather than ignores: ignoring them would silently give the
# user something weaker than asked for (no TLS, no cluster).
_REFUSED = {
    "help_tls": "TLS help",
    "routes": "clustering",
    "cluster": "clustering",
    "cluster_listen": "clustering",
    "cluster_name": "clustering",
    "cluster_advertise": "clustering",
    "no_advertise": "clustering",
    "connect_retries": "clustering",
}

_GO_TRUE = {"1", "t", "T", "true", "TRUE", "True"}
_GO_FALSE = {"0", "f", "F", "false", "FALSE", "False"}


@dataclass(slots=True)
class ParsedFlags:
    """The command line, parsed. ``values`` holds only flags given explicitly, in order."""

    values: list[tuple[str, Any]] = field(default_factory=list)  # (destination, value)
    config_file: str = ""
    check_config: bool = False
    show_help: bool = False
    show_version: bool = False
    signal: str = ""
    warnings: list[str] = field(default_factory=list)


def _parse_go_int(text: str, flag: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        try:
            return int(text, 10)  # "0123": Go reads octal; plain decimal is the friendlier reading
        except ValueError:
            raise FlagError(f'invalid value "{text}" for flag -{flag}: parse error') from None


def parse_flags(argv: list[str]) -> ParsedFlags:
    """Parse nats-server style arguments (without the program name). Raises :class:`FlagError`."""
    out = ParsedFlags()
    i = 0
    n = len(argv)
    rest: list[str] = []
    while i < n:
        arg = argv[i]
        if len(arg) < 2 or arg[0] != "-":
            rest = argv[i:]
            break
        if arg == "--":
            rest = argv[i + 1 :]
            break
        name = arg[2:] if arg.startswith("--") else arg[1:]
        if not name or name[0] in "-=":
            raise FlagError(f"bad flag syntax: {arg}")
        value: str | None = None
        if "=" in name:
            name, value = name.split("=", 1)
        i += 1
        if name in _REFUSED:
            raise FlagError(f"flag -{name}: {_REFUSED[name]} is not supported by natsd")
        spec = FLAGS.get(name)
        if spec is None:
            raise FlagError(f"flag provided but not defined: -{name}")
        kind, dest = spec
        parsed: Any
        if kind == "bool":
            if value is None:
                parsed = True
            elif value in _GO_TRUE:
                parsed = True
            elif value in _GO_FALSE:
                parsed = False
            else:
                raise FlagError(f'invalid boolean value "{value}" for -{name}: parse error')
        else:
            if value is None:
                if i >= n:
                    raise FlagError(f"flag needs an argument: -{name}")
                value = argv[i]
                i += 1
            parsed = _parse_go_int(value, name) if kind == "int" else value
        if dest == "@help":
            out.show_help = bool(parsed)
        elif dest == "@version":
            out.show_version = bool(parsed)
        elif dest == "@config":
            out.config_file = parsed
        elif dest == "@check":
            out.check_config = bool(parsed)
        elif dest == "@signal":
            out.signal = parsed
        elif dest.startswith("!"):
            out.warnings.append(f"flag -{name} is not supported by natsd and is ignored")  # a notice
        else:
            out.values.append((dest, parsed))
    for word in rest:
        lw = word.lower()
        if lw == "version":
            out.show_version = True
        elif lw == "help":
            out.show_help = True
        else:
            raise FlagError(f'unrecognized command: "{word}"')
    return out


def apply_flags(options: ServerOptions, flags: ParsedFlags) -> ServerOptions:
    """Apply explicitly given flags onto ``options`` (after the config file: flags win)."""
    tls_flags: dict[str, Any] = {}
    for dest, value in flags.values:
        if dest.startswith("tls."):
            tls_flags[dest[4:]] = value
            continue
        if dest == "@trace_verbose":
            options.trace = value
        elif dest == "@debug_trace":
            options.debug = value
            options.trace = value
        elif dest.startswith("js."):
            setattr(options.jetstream, dest[3:], value)
        else:
            setattr(options, dest, value)
        options.origins[dest.lstrip("@").replace("js.", "jetstream.")] = "command line"
    if tls_flags:
        _apply_tls_flags(options, tls_flags)
    if options.host == "":
        options.host = "0.0.0.0"
    if "http_host" not in options.origins:
        # As nats-server's setBaselineOptions: monitoring binds the client host unless an
        # explicit `http: "host:port"` said otherwise (`-a 127.0.0.1 -m 8222` stays local).
        options.http_host = options.host
    return options


def _apply_tls_flags(options: ServerOptions, values: dict[str, Any]) -> None:
    """As nats-server: the file flags only count with ``--tls`` or ``--tlsverify``; they then
    override the config file's ``tls {}`` block field by field."""
    if not values.get("enabled") and not values.get("verify"):
        return
    tls = options.tls if options.tls is not None else TLSOptions(pos="command line")
    for k in ("cert_file", "key_file", "ca_file", "verify"):
        if k in values:
            setattr(tls, k, values[k])
    if not tls.cert_file:
        raise ConfigError("TLS Server certificate must be present and valid")
    if not tls.key_file:
        raise ConfigError("TLS Server private key must be present and valid")
    try:
        build_server_context(tls)
    except TLSConfigError as e:
        raise ConfigError(str(e)) from None
    options.tls = tls
    options.origins["tls"] = "command line"
    tls_auth_timeout(options)


def _load_config(path: str, options: ServerOptions, flags: ParsedFlags) -> None:
    """The config file onto ``options``; an out-of-range port a flag replaces (``-p 4222`` over
    ``port: 99999``) is no error, since the flag wins (the file's other errors still are)."""
    try:
        options_from_file(path, options)
    except ConfigErrors as e:
        given = {dest for dest, _ in flags.values}
        rest = [x for x in e.errors if not (isinstance(x, PortConfigError) and x.option and x.option in given)]
        if rest:
            raise ConfigErrors(rest) from None


def build_options(argv: list[str], flags: ParsedFlags | None = None) -> ServerOptions:
    """Options from a command line: defaults, then the config file (``-c``), then the flags.

    Raises :class:`FlagError` or :class:`ConfigError` (the latter naming file:line:column).
    """
    if flags is None:
        flags = parse_flags(argv)
    options = ServerOptions()
    if flags.config_file:
        _load_config(flags.config_file, options, flags)
    apply_flags(options, flags)
    options.cli_flags = list(argv)
    options.config_notices.extend(flags.warnings)
    return options


def reload_options(options: ServerOptions) -> ServerOptions:
    """Fresh options for a reload (SIGHUP): re-read ``options.config_file`` and re-apply the
    original command-line flags (``options.cli_flags``), so flags keep overriding the file.

    Returns a new :class:`ServerOptions`; raises :class:`ConfigError` if the file is now bad
    (the running server should then keep its current options and log the error).
    """
    flags = parse_flags(options.cli_flags)
    if options.config_file and not flags.config_file:
        # Options built without a command line (embedded use) but with a file: reload it.
        flags.config_file = options.config_file
    new = ServerOptions(pedantic_config=options.pedantic_config)
    if flags.config_file:
        _load_config(flags.config_file, new, flags)
    apply_flags(new, flags)
    new.cli_flags = list(options.cli_flags)
    return new


def version_line(program: str = "natsd") -> str:
    """``natsd: v<version>`` (the shape of ``nats-server -v``)."""
    return f"{program}: v{__version__}"


# The layout follows `nats-server -h` (same sections, flag columns and order) so people and
# tools find the same flags in the same places; only what natsd supports is listed.
_USAGE = """
Usage: natsd [options]

Server Options:
    -a, --addr, --net <host>         Bind to host address (default: 0.0.0.0)
    -p, --port <port>                Use port for clients (default: 4222)
    -n, --name
        --server_name <server_name>  Server name (default: auto)
    -P, --pid <file>                 File to store PID
    -m, --http_port <port>           Use port for http monitoring
    -c, --config <file>              Configuration file
    -t                               Test configuration and exit
    -sl,--signal <signal>[=<pid>]    Send signal to natsd process (ldm, stop, quit, term, reopen, reload)
                                     <pid> can be either a PID (e.g. 1) or the path to a PID file (e.g. /var/run/natsd.pid)
        --ports_file_dir <dir>       Creates a ports file in the specified directory (<executable_name>_<pid>.ports).

Logging Options:
    -l, --log <file>                 File to redirect log output
    -T, --logtime                    Timestamp log entries (default: true)
    -D, --debug                      Enable debugging output
    -V, --trace                      Trace the raw protocol
    -VV                              Verbose trace (same as -V in natsd)
    -DV                              Debug and trace
    -DVV                             Debug and verbose trace (same as -DV in natsd)

JetStream Options:
    -js, --jetstream                 Enable JetStream functionality
    -sd, --store_dir <dir>           Set the storage directory

TLS Options:
        --tls                        Enable TLS, do not verify clients (default: false)
        --tlscert <file>             Server certificate file
        --tlskey <file>              Private key for server certificate
        --tlsverify                  Enable TLS, verify client certificates
        --tlscacert <file>           Client certificate CA for verification
    -ms,--https_port <port>          Use port for https monitoring

Authorization Options:
        --user <user>                User required for connections
        --pass <password>            Password required for connections
        --auth <token>               Authorization token required for connections

Common Options:
    -h, --help                       Show this message
    -v, --version                    Show version
"""  # noqa: E501 - the usage text of nats-server, line for line


def usage() -> str:
    """The ``-h`` text."""
    return _USAGE
