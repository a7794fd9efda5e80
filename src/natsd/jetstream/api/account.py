"""``$JS.API.INFO``: the account's JetStream usage, limits and API counters."""

from __future__ import annotations

from natsd.jetstream.api.router import ApiRequest
from natsd.jetstream.features.metadata import advertised
from natsd.jetstream.wire import resp

__all__ = ["account_info"]


def account_info(req: ApiRequest) -> dict:
    """account_info_response: memory, storage, reserved_*, streams, consumers, limits, api."""
    # "natsd": the features natsd offers beyond nats-server (clients ignore unknown fields).
    return resp("account_info_response", {**req.account.account_info(), "natsd": advertised()})
