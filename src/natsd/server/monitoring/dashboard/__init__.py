"""The live dashboard served on the monitoring port (``/`` and ``/dashboard``).

A static page (``static/``: HTML, CSS, JS written for natsd, no third-party code and no CDN, so it works on a
machine without internet access) that polls the monitoring JSON every second (``/varz``, ``/connz``,
``/jsz?accounts=true&streams=true&consumers=true``, ``/accountz``) and draws its charts itself in SVG.
The server side only hands out these files; ``http_dashboard: false`` in the config turns the page off
(``/`` then shows the plain list of endpoints, as before).
"""

from __future__ import annotations

from importlib import resources

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
_cache: dict[str, bytes] = {}


def _asset(name: str) -> bytes | None:
    """A file of ``static/`` by its plain name (no directories, so no path can escape the folder)."""
    if name not in _cache:
        if "/" in name or "\\" in name or name.startswith(".") or not name:
            return None
        f = resources.files(__name__).joinpath("static", name)
        if not f.is_file():
            return None
        _cache[name] = f.read_bytes()
    return _cache[name]


def serve(path: str) -> tuple:
    """``(code, body, content type)`` for ``/``, ``/dashboard`` or ``/dashboard/<asset>``."""
    name = "index.html" if path in ("/", "/dashboard") else path[len("/dashboard/") :]
    data = _asset(name)
    if data is None:
        return 404, b"404 page not found\n", "text/plain; charset=utf-8"
    ext = name[name.rfind(".") :]
    return 200, data, _TYPES.get(ext, "application/octet-stream")
