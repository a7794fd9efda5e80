"""natsctl human output: the seeds' `Information for Stream/Consumer` layout (no sockets)."""

from __future__ import annotations

from natsd.cli import render

STREAM = {
    "config": {
        "name": "ORDERS",
        "subjects": ["ORDERS.*"],
        "retention": "limits",
        "max_consumers": -1,
        "max_msgs": -1,
        "max_bytes": -1,
        "max_age": 31536000000000000,
        "max_msg_size": -1,
        "storage": "file",
        "num_replicas": 1,
        "discard": "old",
        "duplicate_window": 120000000000,
    },
    "created": "2026-11-21T09:54:49.787067136Z",
    "state": {"messages": 3, "bytes": 147, "first_seq": 1, "last_seq": 3, "consumer_count": 0},
}


def test_stream_info_layout():
    text = render.stream_info(STREAM)
    lines = text.splitlines()
    assert lines[0] == "Information for Stream ORDERS created 2026-11-21 09:54:49 UTC"
    assert "Configuration:" in lines and "State:" in lines
    # labels are right-aligned on one column, as the nats tool prints them
    colons = {line.index(":") for line in lines if line.startswith(" ")}
    assert len(colons) == 1
    body = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip() for line in lines if line.startswith(" ")}
    assert body["Subjects"] == "ORDERS.*" and body["Acknowledgements"] == "true"
    assert body["Retention"] == "File - Limits" and body["Replicas"] == "1"
    assert body["Maximum Messages"] == "unlimited" and body["Maximum Age"] == "8760h0m0s"
    assert body["Messages"] == "3" and body["Bytes"] == "147 B" and body["FirstSeq"] == "1"
    assert body["Active Consumers"] == "0"


def test_consumer_info_layout():
    info = {
        "stream_name": "ORDERS",
        "name": "DISPATCH",
        "config": {
            "durable_name": "DISPATCH",
            "filter_subject": "ORDERS.processed",
            "deliver_policy": "all",
            "ack_policy": "explicit",
            "ack_wait": 30000000000,
            "replay_policy": "instant",
            "max_deliver": 20,
            "sample_freq": "100%",
        },
        "delivered": {"consumer_seq": 4, "stream_seq": 3},
        "ack_floor": {"consumer_seq": 1, "stream_seq": 1},
        "num_ack_pending": 1,
        "num_redelivered": 1,
        "num_pending": 0,
    }
    text = render.consumer_info(info)
    assert text.startswith("Information for Consumer ORDERS > DISPATCH")
    for frag in (
        "Durable Name: DISPATCH",
        "Pull Mode: true",
        "Filter Subject: ORDERS.processed",
        "Deliver All: true",
        "Ack Policy: explicit",
        "Ack Wait: 30s",
        "Maximum Deliveries: 20",
        "Sampling Rate: 100",
        "Last Delivered Message: Consumer sequence: 4 Stream sequence: 3",
        "Acknowledgment floor: Consumer sequence: 1 Stream sequence: 1",
        "Pending Messages: 1",
        "Redelivered Messages: 1",
    ):
        assert frag in text, frag


def test_account_info_and_table():
    text = render.account_info(
        {
            "memory": 0,
            "storage": 1024,
            "streams": 1,
            "consumers": 0,
            "limits": {"max_memory": -1, "max_storage": 2048, "max_streams": -1, "max_consumers": -1},
            "api": {"total": 3, "errors": 0, "level": 1},
        }
    )
    assert "Streams: 1 of Unlimited" in text and "Storage: 1 KiB of 2 KiB" in text
    t = render.table("Streams", ["Name", "Messages"], [["ORDERS", "3"]])
    assert "Streams" in t and "ORDERS" in t and "\x1b[" not in t  # no colour codes when not a terminal


def test_deleted_and_lost_are_shown_only_when_present():
    state = {
        "messages": 5,
        "bytes": 10,
        "first_seq": 1,
        "last_seq": 7,
        "consumer_count": 0,
        "num_deleted": 2,
        "lost": {"msgs": [3, 4], "bytes": 2048},
    }
    text = render.stream_info({"config": STREAM["config"], "state": state})
    assert "Deleted Messages: 2" in text and "Lost Messages: 2 (2 KiB)" in text
    assert "Lost" not in render.stream_info(STREAM) and "Deleted" not in render.stream_info(STREAM)
