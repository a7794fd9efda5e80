"""``python -m natsd`` runs the server (same as the ``natsd`` console script)."""

from natsd.server.main import main

if __name__ == "__main__":
    raise SystemExit(main())
