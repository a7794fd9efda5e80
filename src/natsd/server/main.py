"""The ``natsd`` console script: nats-server's command line in front of :class:`Server`.

Behaviour matches ``nats-server``'s ``main``:

* ``-h`` prints the usage on stdout and exits 0; ``-v`` prints ``natsd: v<version>`` and exits 0;
* ``-t -c FILE`` checks the file and prints ``natsd: configuration file FILE is valid
  (sha256:...)`` on stderr (exit 0), or the problems (exit 1). As in the reference, warnings
  (unknown fields, deprecated forms) fail the check too; notices about valid nats-server settings
  natsd ignores (cluster, leafnodes, ...) are printed but do not;
* a bad flag prints Go's message and the usage (exit 2); a bad config prints
  ``natsd: <file>:<line>:<col>: <message>`` on stderr (exit 1);
* ``-sl SIGNAL=PID|PIDFILE`` signals a running natsd and exits;
* otherwise config warnings go to stderr and the server runs until it is stopped.
"""

from __future__ import annotations

import atexit
import gc
import os
import signal as _signal
import sys
import threading
from typing import NoReturn

from natsd.config.flags import FlagError, build_options, parse_flags, usage, version_line
from natsd.config.lexer import ConfigError

__all__ = ["main", "cli", "leave", "PROGRAM"]

PROGRAM = "natsd"

# nats-server -sl names -> POSIX signals (server/signal.go: ldm=USR2, reopen=USR1, reload=HUP,
# stop=KILL, quit=INT, term=TERM).
_SIGNALS = {
    "ldm": "SIGUSR2",
    "reopen": "SIGUSR1",
    "reload": "SIGHUP",
    "stop": "SIGKILL",
    "quit": "SIGINT",
    "term": "SIGTERM",
}


def _err(msg: str) -> None:
    print(msg, file=sys.stderr)


def _send_signal(spec: str) -> int:
    name, _, target = spec.partition("=")
    signame = _SIGNALS.get(name.lower())
    if signame is None or not hasattr(_signal, signame):
        _err(f'{PROGRAM}: unknown signal "{name}"')
        return 1
    if not target:
        _err(f"{PROGRAM}: signal {name} needs a PID or PID file, e.g. -sl {name}=/var/run/natsd.pid")
        return 1
    if target.isdigit():
        pid = int(target)
    else:
        try:
            with open(target, encoding="ascii") as f:
                pid = int(f.read().strip())
        except (OSError, ValueError) as e:
            _err(f"{PROGRAM}: could not read PID from {target}: {e}")
            return 1
    try:
        os.kill(pid, getattr(_signal, signame))
    except OSError as e:
        _err(f"{PROGRAM}: {e}")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run natsd with nats-server's flags; returns the process exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        flags = parse_flags(args)
    except FlagError as e:
        _err(str(e))
        _err(usage())
        return 2
    if flags.show_version:
        print(version_line(PROGRAM))
        return 0
    if flags.show_help:
        print(usage())
        return 0
    if flags.signal:
        return _send_signal(flags.signal)
    if flags.check_config and not flags.config_file:
        _err(f"{PROGRAM}: must specify [-c, --config] option to check configuration file syntax")
        return 1
    try:
        options = build_options(args, flags)
    except ConfigError as e:
        _err(f"{PROGRAM}: {e}")
        return 1
    for note in options.config_notices:
        _err(f"{PROGRAM}: {note}")
    if flags.check_config:
        if options.config_warnings:
            for w in options.config_warnings:
                _err(f"{PROGRAM}: {w}")
            return 1
        ignored = sum(1 for n in options.config_notices if "is not supported by natsd" in n)
        if ignored:
            # one line per ignored key was printed above (file:line:column); say how many
            _err(
                f"{PROGRAM}: {ignored} setting{'s' if ignored != 1 else ''} of this file "
                f"{'are' if ignored != 1 else 'is'} ignored by natsd"
            )
        _err(f"{PROGRAM}: configuration file {options.config_file} is valid ({options.config_digest})")
        return 0
    for w in options.config_warnings:
        _err(f"{PROGRAM}: {w}")
    # deferred (issue 26, start-up time): --help, --version and -t (config check) answer without
    # loading the server. Its imports make objects by the ten thousand and none is garbage: the
    # collector would run some fifty passes over them for nothing (Server.run pauses it too).
    collecting = gc.isenabled()
    gc.disable()
    try:
        from natsd.server.log import setup_logging_from
        from natsd.server.server import Server
    finally:
        if collecting:
            gc.enable()

    try:
        setup_logging_from(options)
    except OSError as e:
        what = f"could not open log file {options.log_file}" if options.log_file else "error connecting to syslog"
        _err(f"{PROGRAM}: {what}: {e.strerror or e}")
        return 1
    except ValueError as e:  # a remote_syslog URL natsd cannot dial
        _err(f"{PROGRAM}: {e}")
        return 1
    try:
        server = Server(options)
        rc = server.run()
    except KeyboardInterrupt:
        return 0
    except (ConfigError, OSError) as e:
        _err(f"{PROGRAM}: {e}")
        return 1
    return rc if isinstance(rc, int) else 0


def cli() -> NoReturn:
    """The process entry point (the ``natsd`` console script, ``python -m natsd``): :func:`main`, then
    :func:`leave`. Tests and embedders call :func:`main` (or ``Server``) and keep a normal exit."""
    leave(main())


def leave(code: int) -> NoReturn:
    """End the process with ``code`` once everything Python would still do at exit that reaches
    the outside world is done, skipping the rest: the interpreter's teardown.

    When :func:`main` returns, the server has stopped: every store is flushed, synced and closed,
    the restart file is written, the event loop is closed. What the interpreter's normal exit does
    next is (1) join non-daemon threads and run ``threading``'s exit hooks (thread pools finish
    their queued work), (2) run ``atexit`` functions (``logging.shutdown`` flushes and closes the
    log handlers), (3) flush ``sys.stdout``/``sys.stderr``, then (4) free every object, module by
    module. Steps 1-3 are done here, in that order; step 4 only returns memory to an OS about to
    take it back, and it was most of a clean stop (issue 31): ~0.4 s with 1,000 streams and
    consumers, 15-40 ms with one stream. Nothing is lost by skipping it: the store closes its
    files at stop (a file object left open would have had its buffer flushed by its finaliser;
    ``tests/acceptance/test_clean_stop.py`` checks that none is). ADR 0016."""
    shutdown = getattr(threading, "_shutdown", None)  # (what Py_Finalize calls first; CPython 3.11+)
    if shutdown is not None:
        shutdown()
    else:  # pragma: no cover - another interpreter: join the non-daemon threads ourselves
        for t in threading.enumerate():
            if t is not threading.current_thread() and not t.daemon:
                t.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: as the normal exit, nothing to do
            pass
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    cli()
