"""Subject transforms as streams apply them (``subject_transform``, sources' ``subject_transforms``,
``republish``): the subset of nats-server's mappings natsd implements.

Pure functions over subject strings; shared by :mod:`natsd.jetstream.stream` and
:mod:`natsd.jetstream.stream.sourcing`.
"""

from __future__ import annotations

__all__ = ["transform"]


def transform(src: str, dest: str, subject: str) -> str:
    """Apply a simple subject mapping: ``>``-to-``>`` prefix swaps and ``{{wildcard(n)}}`` /
    ``$n`` references. Returns "" when the destination cannot be built."""
    if dest == ">" or dest == src:
        return subject
    st = src.split(".")
    tt = subject.split(".")
    stars: list[str] = []  # tokens matched by each "*" of src, in order
    rest = ""  # tokens matched by a trailing ">" of src
    for i, t in enumerate(st):
        if t == "*":
            stars.append(tt[i])
        elif t == ">":
            rest = ".".join(tt[i:])
    out: list[str] = []
    for t in dest.split("."):
        idx = 0
        if t.startswith("{{") and t.endswith("}}"):
            inner = t[2:-2].strip()
            if not (inner.lower().startswith("wildcard(") and inner.endswith(")")):
                return ""
            idx = int(inner[9:-1].strip())
        elif t.startswith("$") and t[1:].isdigit():
            idx = int(t[1:])
        elif t == ">":
            if not rest:
                return ""
            out.append(rest)
            continue
        else:
            out.append(t)
            continue
        if not 0 < idx <= len(stars):
            return ""
        out.append(stars[idx - 1])
    return ".".join(out)
