"""What the start-up log says about JetStream: nats-server's banner and node name, and natsd's
account of what recovery restored and what a crash cost.

nats-server prints, after ``Starting JetStream``, an ASCII-art banner and a block of its resources
(``Max Memory``, ``Max Storage``, ``Store Directory``, ``Domain``, ``API Level``), then one line
per restored stream, then ``Took 2.8ms to start JetStream``. natsd prints the same lines (operators
and log scrapers know them), then one summary nats-server lacks: how many streams, consumers,
messages and bytes were restored, and, after a crash, how many records recovery dropped (the file
store truncates a torn tail and reports it; see natsd.store.file.recovery).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from natsd.gotime import format_duration
from natsd.server.log import logger

if TYPE_CHECKING:
    from natsd.jetstream.manager import JetStreamEngine

__all__ = ["node_name", "friendly_bytes", "log_jetstream_banner", "log_recovery_summary"]

_ART = (
    "    _ ___ _____ ___ _____ ___ ___   _   __  __",
    " _ | | __|_   _/ __|_   _| _ \\ __| /_\\ |  \\/  |",
    "| || | _|  | | \\__ \\ | | |   / _| / _ \\| |\\/| |",
    " \\__/|___| |_| |___/ |_| |_|_\\___/_/ \\_\\_|  |_|",
    "",
    "         https://docs.nats.io/jetstream",
    "",
)


def node_name(server_name: str) -> str:
    """nats-server's node name: the first 8 bytes of sha256(server name), each taken modulo 62 as a
    base-62 digit (its getHash). Stable for a fixed ``server_name`` (``edge1`` -> ``u0GDDaas``);
    an unnamed server is named by its ID, so its node changes with the ID."""
    from natsd.gohash import get_hash  # (hashlib: only a JetStream start names its node, ADR 0015)

    return get_hash(server_name)


def friendly_bytes(n: int) -> str:
    """nats-server's friendlyBytes: ``512 B``, ``1.00 GB``, ``17.66 GB`` (powers of 1024)."""
    if n < 1024:
        return f"{n} B"
    exp = min(int(math.log(n) / math.log(1024)), 6)
    return f"{n / 1024**exp:.2f} {'KMGTPE'[exp - 1]}B"


def log_jetstream_banner(engine: JetStreamEngine, api_level: int) -> None:
    """The banner and resource block, as nats-server prints them before recovering streams."""
    for line in _ART:
        logger.info("%s", line)
    logger.info("---------------- JETSTREAM ----------------")
    logger.info("  Strict:          true")  # (requests are decoded as strictly as nats-server's)
    logger.info("  Max Memory:      %s", friendly_bytes(engine.max_memory))
    logger.info("  Max Storage:     %s", friendly_bytes(engine.max_store))
    logger.info('  Store Directory: "%s"', engine.store_dir)
    if engine.domain:
        logger.info("  Domain:          %s", engine.domain)
    logger.info("  API Level:       %d", api_level)
    logger.info("-------------------------------------------")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def log_recovery_summary(engine: JetStreamEngine, took_ns: int) -> None:
    """``Took ... to start JetStream`` (nats-server's line), then what was restored and, as a
    warning, what recovery dropped (per stream, from each store's ``recovered_lost``)."""
    logger.info("Took %s to start JetStream", format_duration(took_ns))
    streams = consumers = msgs = nbytes = 0
    damaged: list[str] = []
    lost_msgs = lost_bytes = 0
    for acc in engine.accounts.values():
        for stream in acc.streams.values():
            st = stream.store.state()
            streams += 1
            consumers += stream.num_consumers()
            msgs += st.msgs
            nbytes += st.bytes
            lm, lb = stream.store.recovered_lost
            if lm or lb:
                lost_msgs += lm
                lost_bytes += lb
                damaged.append(f"'{acc.name} > {stream.name}' {_plural(lm, 'message')} ({_plural(lb, 'byte')})")
    logger.info(
        "JetStream restored %s, %s, %s (%s) in %s",
        _plural(streams, "stream"),
        _plural(consumers, "consumer"),
        _plural(msgs, "message"),
        friendly_bytes(nbytes),
        format_duration(took_ns),
    )
    if damaged:
        logger.warning(
            "JetStream recovery dropped %s (%s) after an unclean stop, truncated at the last intact record: %s",
            _plural(lost_msgs, "message"),
            _plural(lost_bytes, "byte"),
            ", ".join(damaged),
        )
