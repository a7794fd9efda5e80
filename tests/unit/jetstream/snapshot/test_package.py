"""natsd.jetstream.snapshot is the public face of its four modules: every name it exported when it
was one module still imports from it, and it defines none of them itself."""

from __future__ import annotations

import importlib

import pytest

import natsd.jetstream.snapshot as snapshot

pytestmark = pytest.mark.unit

# What ``natsd.jetstream.snapshot`` exported as a single module (api/snapshot.py and the tests use these).
EXPORTED = [
    "MAGIC",
    "encode_uvarint",
    "encode_varint",
    "encode_entry",
    "END_ENTRY",
    "ArchiveReader",
    "ArchiveEntry",
    "ArchiveError",
    "iter_archive",
    "SnapshotSender",
    "RestoreReceiver",
    "consumer_state_to_json",
    "consumer_state_from_json",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_WINDOW_SIZE",
    "ACK_TIMEOUT_NS",
    "STATUS_DONE",
    "STATUS_NO_INTEREST",
    "STATUS_NO_FLOW",
    "remove_stale_restores",
    "S2StreamDecoder",
    "s2_decode_block",
    "RESTORE_DIR_PREFIX",
    "frame_archive",
    "is_framed",
]
PARTS = ["archive", "s2", "transfer", "restore"]


def test_every_name_still_imports_from_the_package():
    assert sorted(snapshot.__all__) == sorted(EXPORTED)
    for name in EXPORTED:
        assert getattr(snapshot, name) is not None, name


def test_each_name_is_defined_in_exactly_one_part():
    parts = [importlib.import_module(f"natsd.jetstream.snapshot.{p}") for p in PARTS]
    for name in EXPORTED:
        homes = [m.__name__ for m in parts if name in getattr(m, "__all__", ())]
        assert len(homes) == 1, (name, homes)
        assert getattr(snapshot, name) is getattr(importlib.import_module(homes[0]), name)
