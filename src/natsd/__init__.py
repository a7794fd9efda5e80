"""natsd: a NATS server with JetStream persistence, written in Python.

The version follows nats-server's semver: clients such as nats-py gate features on
``major == 2 and minor >= 9`` (consumer-create subjects), ``minor >= 11`` (2.11 features) and nats.js
on ``2.14.0`` (consumer reset), so the version advertised in INFO states which reference feature
level we implement: nats-server 2.15's JetStream (API level 5, ``natsd.jetstream.models.JS_API_LEVEL``).
"""

__version__ = "2.15.1"

__all__ = ["__version__"]

# An opt-in compiled build of the hot modules (NATSD_COMPILED=<dir>), used only when it matches
# these sources: installed before any of them is imported (see natsd/_compiled.py).
from natsd import _compiled  # noqa: E402

_compiled.install()
