"""JetStream's parts name narrow views of their whole, never the whole: no import cycle -- not even
one closed by ``if TYPE_CHECKING:`` imports -- crosses a package's own folder in natsd.jetstream.

Consumers, snapshots, advisories, templates, domain mappings and the consumer registry see a
stream, an account and the engine through :mod:`natsd.jetstream.views`; a stream's counters,
sourcing, expiry and batches through the protocols in their own modules. Inside one folder
(``stream/``, ``consumer/``) a part may still name its package's class for type checking (the
bound-method publish path of ``stream/``: ingest and turnflush; the consumer's parts). Before
issue 24 one type-only cycle held 25 modules across the package; print the graph with
``python -m tests.unit.test_layering --graph jetstream``.
"""

from __future__ import annotations

import pytest

from tests.unit.test_layering import FUNCTION, TOP, TYPE_ONLY, cycles, module_graph

pytestmark = pytest.mark.unit

ROOT = "natsd.jetstream"


def _folder(module: str) -> str:
    """The package folder a module lives in (``natsd.jetstream.stream.core`` -> ``natsd.jetstream.stream``)."""
    return module.rsplit(".", 1)[0]


def test_no_type_only_cycle_crosses_a_package_folder() -> None:
    comps = cycles(module_graph(), ROOT, kinds=(TOP, FUNCTION, TYPE_ONLY))
    crossing = [c for c in comps if len({_folder(m) for m in c}) > 1]
    assert not crossing, "type-only import cycles across folders:\n" + "\n".join(", ".join(c) for c in crossing)


def test_loosely_coupled_parts_do_not_name_stream_or_account() -> None:
    graph = module_graph()
    whole = {"natsd.jetstream.stream.core", "natsd.jetstream.manager", "natsd.jetstream.consumer.core"}
    parts = [
        "natsd.jetstream.stream.counters",
        "natsd.jetstream.stream.sourcing",
        "natsd.jetstream.stream.expiry",
        "natsd.jetstream.stream.batch",
        "natsd.jetstream.stream.fastbatch",
        "natsd.jetstream.advisories",
        "natsd.jetstream.templates",
        "natsd.jetstream.domain_mappings",
        "natsd.jetstream.consumer_registry",
        "natsd.jetstream.snapshot.archive",
        "natsd.jetstream.snapshot.transfer",
        "natsd.jetstream.consumer.core",
        "natsd.jetstream.consumer.acks",
    ]
    bad = [
        f"{p} -> {t} [{k}]"
        for p in parts
        for t, k in graph[p].items()
        if t in whole - {p}
        and not (p.startswith("natsd.jetstream.consumer.") and t.startswith("natsd.jetstream.consumer."))
    ]
    # (consumer_registry creates Consumers: it imports the consumer package at run time, which is
    # the registry's job; it must not name the stream or the account)
    bad = [b for b in bad if not b.startswith("natsd.jetstream.consumer_registry -> natsd.jetstream.consumer.core")]
    assert not bad, "\n".join(bad)
