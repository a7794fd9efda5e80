"""natsctl flags for natsd's own features (issue 27) and for config metadata.

Every natsd feature is a ``natsd.*`` key of a stream or consumer's ``metadata``
(``natsd.jetstream.features.metadata``); these flags write those keys, so the configs they make
are plain JetStream configs any server accepts (nats-server keeps the keys and ignores them).

Stream (``stream add|edit``):
    ``--metadata KEY=VALUE``           any metadata key (repeatable; as ``nats --metadata``)
    ``--keep-last-under-max-age``      ``natsd.keep_last_under_max_age: true`` (``--no-...``: off)
    ``--schema SUBJECT=SCHEMA``        ``natsd.schema.<SUBJECT>``: inline JSON, ``@file.json`` or
                                       ``kv:<bucket>/<key>``; an empty SCHEMA removes it
Consumer (``consumer add|edit``):
    ``--metadata KEY=VALUE``           any metadata key (repeatable)
    ``--dead-letter SUBJECT``          ``natsd.dead_letter`` ('' removes it)
    ``--partition-key KEY``            ``natsd.partition_key``: ``{{wildcard(n)}}`` or ``header:<Name>``
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from natsd.cli.common import UsageError

__all__ = ["apply_consumer", "apply_stream", "consumer_flags", "stream_flags"]

KEEP_LAST = "natsd.keep_last_under_max_age"
SCHEMA_PREFIX = "natsd.schema."
DEAD_LETTER = "natsd.dead_letter"
PARTITION_KEY = "natsd.partition_key"


def _metadata_flag(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--metadata",
        action="append",
        metavar="KEY=VALUE",
        help="a metadata key (repeatable; an empty VALUE removes the key)",
    )


def _set(cfg: dict, key: str, value: str | None) -> None:
    md = dict(cfg.get("metadata") or {})
    if value is None or value == "":
        md.pop(key, None)
    else:
        md[key] = value
    if md:
        cfg["metadata"] = md
    else:
        cfg.pop("metadata", None)


def _apply_metadata(cfg: dict, values: list[str] | None) -> None:
    for kv in values or []:
        key, sep, value = kv.partition("=")
        if not sep or not key:
            raise UsageError(f"--metadata: expected KEY=VALUE, got {kv!r}")
        _set(cfg, key, value)


def stream_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("metadata and natsd features")
    _metadata_flag(g)
    g.add_argument(
        "--keep-last-under-max-age",
        dest="keep_last",
        action="store_true",
        default=None,
        help="natsd: max_age never expires the last message of a subject",
    )
    g.add_argument(
        "--no-keep-last-under-max-age",
        dest="keep_last",
        action="store_false",
        help="natsd: switch keep-last-under-max-age off",
    )
    g.add_argument(
        "--schema",
        action="append",
        metavar="SUBJECT=SCHEMA",
        help="natsd: JSON Schema for payloads on SUBJECT (inline JSON, @file, or kv:<bucket>/<key>)",
    )


def apply_stream(cfg: dict, a: argparse.Namespace) -> dict:
    _apply_metadata(cfg, getattr(a, "metadata", None))
    keep = getattr(a, "keep_last", None)
    if keep is not None:
        _set(cfg, KEEP_LAST, "true" if keep else None)
    for spec in getattr(a, "schema", None) or []:
        subject, sep, schema = spec.partition("=")
        if not sep or not subject:
            raise UsageError(f"invalid --schema {spec!r}: use SUBJECT=SCHEMA")
        if schema.startswith("@"):
            try:
                schema = Path(schema[1:]).read_text()
            except OSError as e:
                raise UsageError(f"--schema {subject}: can not read {schema[1:]}: {e.strerror}") from None
        if schema and not schema.startswith("kv:"):
            try:
                schema = json.dumps(json.loads(schema), separators=(",", ":"))
            except ValueError as e:
                raise UsageError(f"--schema {subject}: not JSON: {e}") from None
        _set(cfg, SCHEMA_PREFIX + subject, schema)
    return cfg


def consumer_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("metadata and natsd features")
    _metadata_flag(g)
    g.add_argument(
        "--dead-letter",
        dest="dead_letter",
        metavar="SUBJECT",
        help="natsd: publish messages that reach max deliveries or are terminated here",
    )
    g.add_argument(
        "--partition-key",
        dest="partition_key",
        metavar="KEY",
        help="natsd: deliver in order per key, one message per key in flight "
        "({{wildcard(n)}} of the filter, or header:<Name>)",
    )


def apply_consumer(cfg: dict, a: argparse.Namespace) -> dict:
    _apply_metadata(cfg, getattr(a, "metadata", None))
    dl = getattr(a, "dead_letter", None)
    if dl is not None:
        _set(cfg, DEAD_LETTER, dl)
    pk = getattr(a, "partition_key", None)
    if pk is not None:
        _set(cfg, PARTITION_KEY, pk)
    return cfg
