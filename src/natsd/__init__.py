"""natsd: a NATS server with JetStream persistence, written in Python.

The version follows nats-server's semver: clients such as nats-py gate features on
``major == 2 and minor >= 9`` (consumer-create subjects) and ``minor >= 11`` (2.11 features),
so the version advertised in INFO states which reference feature level we implement.
"""

__version__ = "2.11.0"

__all__ = ["__version__"]
