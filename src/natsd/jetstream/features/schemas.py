"""JSON Schema validation at publish (``natsd.schema.<subject pattern>`` stream metadata).

A stream maps subject patterns to JSON Schemas, inline or ``kv:<bucket>/<key>`` (the schema is
the KV entry's value, so it changes with a KV put, without a stream update). A publish whose
payload does not validate is refused with a PubAck error (``NatsdErrors.SCHEMA_VALIDATION``,
19010) naming the subject, the schema and the first violation; nothing is stored.

Validator: ``fastjsonschema`` (compiles a schema to Python code; ``bench/bench_schemas.py``
measured it several times faster per payload than ``jsonschema``'s validators on a typical
object schema). Compiled validators are cached by the schema's text, so a KV-referenced schema is
compiled again only when its value changes.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from natsd.jetstream.errors import ApiError, NatsdErrors
from natsd.subjects.tokens import matcher

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.features.metadata import SchemaSpec

__all__ = ["SchemaChecker", "check_schema", "compiled"]

#: Compiled validators kept (by schema text); a KV schema rewritten often does not grow this.
CACHE_MAX = 256
_cache: OrderedDict[str, Callable[[object], object]] = OrderedDict()


def check_schema(doc: object) -> str:
    """ "" when ``doc`` compiles as a JSON Schema, else why not."""
    try:
        compiled(json.dumps(doc, sort_keys=True))
    except Exception as e:
        return str(e) or type(e).__name__
    return ""


def compiled(text: str) -> Callable[[object], object]:
    """The compiled validator of the schema whose JSON text is ``text`` (cached)."""
    fn = _cache.get(text)
    if fn is not None:
        _cache.move_to_end(text)
        return fn
    import fastjsonschema  # (loaded only by streams that use schemas)

    fn = fastjsonschema.compile(json.loads(text))
    _cache[text] = fn
    if len(_cache) > CACHE_MAX:
        _cache.popitem(last=False)
    return fn


class SchemaChecker:
    """A stream's schemas: ``check(subject, payload)`` returns ``None`` when the payload may be
    stored, else the ApiError to put in the PubAck. ``kv_get(bucket, key)`` reads a KV entry as
    ``(revision, value)`` (``None`` when absent or deleted); it is how ``kv:`` schemas are
    resolved at publish time (the compiled validator is reused while the revision is the same)."""

    def __init__(self, specs: tuple[SchemaSpec, ...], kv_get: Callable[[str, str], tuple[int, bytes] | None]) -> None:
        self._kv_fns: dict[tuple[str, str], tuple[int, Callable[[object], object]]] = {}
        # (pattern matcher, spec, the inline schema's text: its cache key, made once)
        self._rules = [
            (matcher(s.pattern), s, json.dumps(s.inline, sort_keys=True) if s.inline is not None else "") for s in specs
        ]
        self._kv_get = kv_get

    def check(self, subject: str, payload: bytes) -> ApiError | None:
        for match, spec, text in self._rules:
            if not match(subject):
                continue
            try:
                if text:
                    fn = compiled(text)
                else:
                    entry = self._kv_get(spec.bucket, spec.key)
                    if entry is None:
                        return NatsdErrors.SCHEMA_UNAVAILABLE(schema=spec.name, subject=subject, err="no such KV entry")
                    k = (spec.bucket, spec.key)
                    known = self._kv_fns.get(k)
                    if known is not None and known[0] == entry[0]:
                        fn = known[1]
                    else:
                        fn = compiled(entry[1].decode("utf-8", "replace"))
                        self._kv_fns[k] = (entry[0], fn)
            except Exception as e:
                return NatsdErrors.SCHEMA_UNAVAILABLE(schema=spec.name, subject=subject, err=str(e))
            try:
                doc = json.loads(payload)
            except ValueError as e:
                return NatsdErrors.SCHEMA_VALIDATION(subject=subject, schema=spec.name, err=f"payload is not JSON: {e}")
            try:
                fn(doc)
            except Exception as e:
                return NatsdErrors.SCHEMA_VALIDATION(subject=subject, schema=spec.name, err=str(e))
            return None  # the first matching pattern decides
        return None
