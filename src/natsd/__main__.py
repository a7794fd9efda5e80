"""``python -m natsd`` runs the server (same as the ``natsd`` console script)."""

import gc

# The command line's modules (flags, options) make objects by the thousand and none is garbage:
# the collector is paused while they load (issue 26, start-up time); main() pauses it for the
# server's own imports, Server.run for the start.
gc.disable()
from natsd.server.main import cli  # noqa: E402

gc.enable()

if __name__ == "__main__":
    cli()
