"""The nats-server configuration format and command line.

Layers, kept apart as in nats-server (``conf/`` vs ``server/opts.go``):

* :mod:`natsd.config.lexer` / :mod:`natsd.config.parser`: text -> a plain tree (``dict``/``list``)
  whose containers remember each entry's ``file:line:column``;
* :mod:`natsd.config.options`: tree -> typed :class:`ServerOptions`;
* :mod:`natsd.config.flags`: command line -> options (flags override the file), and
  :func:`reload_options` for SIGHUP.
"""

from natsd.config.flags import FlagError, build_options, parse_flags, reload_options
from natsd.config.lexer import ConfigError
from natsd.config.options import ConfigErrors, ServerOptions, options_from_file, options_from_tree
from natsd.config.parser import ConfigList, ConfigMap, Pos, parse, parse_file

__all__ = [
    "ConfigError",
    "ConfigErrors",
    "FlagError",
    "ServerOptions",
    "ConfigMap",
    "ConfigList",
    "Pos",
    "parse",
    "parse_file",
    "options_from_file",
    "options_from_tree",
    "parse_flags",
    "build_options",
    "reload_options",
]
