"""Atomic and fast batch limits: the reference's ``jetstream { limits { batch { ... } } }``,
resolved once per server (``JetStreamEngine.batch_limits``) and read by
:mod:`natsd.jetstream.stream.batch` / :mod:`natsd.jetstream.stream.fastbatch`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from natsd.lazydataclass import dataclass
from natsd.jetstream.config.constants import SECOND

if TYPE_CHECKING:  # pragma: no cover
    from natsd.config.options import JetStreamOptions

__all__ = ["BatchLimits", "DEFAULT_LIMITS", "batch_limits_for"]


@dataclass
class BatchLimits:
    """The reference's ``jetstream { limits { batch { ... } } }`` defaults."""

    max_msgs: int = 1000
    max_inflight_per_stream: int = 50
    max_inflight_total: int = 1000
    timeout_ns: int = 10 * SECOND
    # fast batches (natsd.jetstream.stream.fastbatch) have their own defaults; a configured inflight
    # limit applies to both kinds
    fast_max_inflight_per_stream: int = 1000
    fast_max_inflight_total: int = 50_000


DEFAULT_LIMITS = BatchLimits()


def batch_limits_for(js: "JetStreamOptions") -> BatchLimits:
    """The server's batch limits: ``jetstream { limits { batch { ... } } }``, a value <= 0
    meaning the default (as the reference)."""
    d = DEFAULT_LIMITS
    per_stream, total = js.batch_max_inflight_per_stream, js.batch_max_inflight_total
    return BatchLimits(
        fast_max_inflight_per_stream=per_stream if per_stream > 0 else d.fast_max_inflight_per_stream,
        fast_max_inflight_total=total if total > 0 else d.fast_max_inflight_total,
        max_msgs=js.batch_max_msgs if js.batch_max_msgs > 0 else d.max_msgs,
        max_inflight_per_stream=(
            js.batch_max_inflight_per_stream if js.batch_max_inflight_per_stream > 0 else d.max_inflight_per_stream
        ),
        max_inflight_total=js.batch_max_inflight_total if js.batch_max_inflight_total > 0 else d.max_inflight_total,
        timeout_ns=js.batch_timeout_ns if js.batch_timeout_ns > 0 else d.timeout_ns,
    )
