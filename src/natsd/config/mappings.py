"""``mappings {}`` (alias ``maps``), at the top level (the global account) and inside an account:
parsed into ``(source, [MapDest])`` pairs, each compiled once here so a bad destination is a
config error at file:line:column with nats-server's text.

A value is a destination subject (weight 100), one ``{dest, weight, cluster}`` map, or a list of
them. Weights are integers or ``"NN%"`` strings in [0, 100].
"""

from __future__ import annotations

from typing import Any

from natsd.config.parser import ConfigList, ConfigMap, Pos
from natsd.subjects.mapping import MapDest, Mapping, MappingError
from natsd.subjects.tokens import is_valid_subject
from natsd.protocolbase import Protocol


class _Ctx(Protocol):
    """What this module needs of the options loader's context (``config.options._Ctx``), named
    here so the loader's module is not imported back (no import circle)."""

    def error(self, pos: Pos | None, message: str) -> None: ...


__all__ = ["parse_mappings", "MappingList"]

# One account's mappings, in configuration order.
MappingList = list[tuple[str, list[MapDest]]]


def parse_mappings(ctx: _Ctx, m: ConfigMap, key: str) -> MappingList:
    """The mappings block ``m[key]``; errors go to ``ctx`` (all of them, as the reference)."""
    v = m[key]
    out: MappingList = []
    if not isinstance(v, ConfigMap):
        ctx.error(m.pos(key), f"Expected a map of subject mappings, got {type(v).__name__}")
        return out
    for subj in v:
        pos = v.pos(subj)
        if not is_valid_subject(subj):
            ctx.error(pos, f'Subject "{subj}" is not a valid subject')
            continue
        mv = v[subj]
        if isinstance(mv, str):
            dests = [MapDest(mv, 100)]
            label = f'"{subj}" to "{mv}"'
        elif isinstance(mv, (ConfigList, ConfigMap)):
            items = list(enumerate(mv)) if isinstance(mv, ConfigList) else [(-1, mv)]
            parsed = [
                _map_dest(ctx, it, mv.pos(i) if i >= 0 and isinstance(mv, ConfigList) else pos) for i, it in items
            ]
            if any(d is None for d in parsed):
                continue
            dests = [d for d in parsed if d is not None]
            label = f'"{subj}"'
        else:
            ctx.error(pos, f"Unknown type {type(mv).__name__} for mapping destination")
            continue
        try:
            Mapping(subj, dests)
        except MappingError as e:
            ctx.error(pos, f"Error adding mapping for {label} : {e}")
            continue
        out.append((subj, dests))
    return out


def _map_dest(ctx: _Ctx, v: Any, pos: Pos | None) -> MapDest | None:
    if not isinstance(v, ConfigMap):
        ctx.error(pos, "Expected an entry for the mapping destination")
        return None
    d = MapDest("", 0)
    weighted = False
    for k in v:
        kl = k.lower()
        kpos = v.pos(k)
        x = v[k]
        if kl in ("dest", "destination"):
            d.subject = x if isinstance(x, str) else str(x)
        elif kl == "weight":
            w = _weight(ctx, x, kpos)
            if w is None:
                return None
            d.weight = w
            weighted = True
        elif kl == "cluster":
            d.cluster = x if isinstance(x, str) else str(x)
        else:
            ctx.error(kpos, f'Unknown field "{k}" for mapping destination')
            return None
    if not weighted:
        ctx.error(pos, f'Missing weight for mapping destination "{d.subject}"')
        return None
    return d


def _weight(ctx: _Ctx, x: Any, pos: Pos | None) -> int | None:
    if isinstance(x, str):
        s = x.removesuffix("%")
        try:
            w = int(s)
        except ValueError:
            ctx.error(pos, f'Invalid weight "{s}" for mapping destination')
            return None
    elif isinstance(x, int) and not isinstance(x, bool):
        w = x
    else:
        ctx.error(pos, f"Unknown entry type for weight of {x}")
        return None
    if not 0 <= w <= 100:
        ctx.error(pos, f"Invalid weight {w} for mapping destination")
        return None
    return w
