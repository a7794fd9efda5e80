"""A ``$JS.API`` request from a nats-py connection, answered as a dict (the tests that check the
API's JSON, not the client's wrappers)."""

from __future__ import annotations

import json


async def js_api(nc, subject: str, body: dict | None = None, timeout: float = 10) -> dict:
    msg = await nc.request(subject, json.dumps(body).encode() if body is not None else b"", timeout=timeout)
    return json.loads(msg.data)
