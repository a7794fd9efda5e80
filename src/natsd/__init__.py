"""natsd: a NATS server with JetStream persistence, written in Python.

The version follows nats-server's semver: clients such as nats-py gate features on
``major == 2 and minor >= 9`` (consumer-create subjects), ``minor >= 11`` (2.11 features) and nats.js
on ``2.14.0`` (consumer reset), so the version advertised in INFO states which reference feature
level we implement: nats-server 2.15's JetStream (API level 5, ``natsd.jetstream.config.models.JS_API_LEVEL``).
"""

__version__ = "2.15.1"

__all__ = ["__version__", "Server"]


# An opt-in compiled build of the hot modules (NATSD_COMPILED=<dir>), used only when it matches
# these sources: installed before any of them is imported (see natsd/_compiled.py).
from natsd import _compiled

_compiled.install()


def __getattr__(name: str):
    # ``natsd.Server`` for embedding, loaded on first use: ``import natsd`` (every CLI, the Spark
    # connector, ``python -m natsd -v``) must not pay for the server's modules.
    if name == "Server":
        from natsd.server.server import Server

        return Server
    raise AttributeError(f"module 'natsd' has no attribute {name!r}")
