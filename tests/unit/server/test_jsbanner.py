"""nats-server's node name (getHash) and byte formatting (friendlyBytes) for the start-up log."""

from __future__ import annotations

import pytest

from natsd.server.jsbanner import friendly_bytes, node_name

pytestmark = [pytest.mark.unit, pytest.mark.timeout(10)]


def test_node_name_is_nats_servers_hash_of_the_name():
    assert node_name("edge1") == "u0GDDaas"  # what nats-server 2.15 prints for server_name: edge1
    assert node_name("edge1") == node_name("edge1") and len(node_name("x")) == 8
    assert node_name("edge2") != node_name("edge1")


@pytest.mark.parametrize(
    "n,text",
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.00 KB"),
        (1 << 30, "1.00 GB"),
        (10 << 30, "10.00 GB"),
        (18_963_000_000, "17.66 GB"),
        (1536, "1.50 KB"),
    ],
)
def test_friendly_bytes(n, text):
    assert friendly_bytes(n) == text
