"""The sink's per-batch encoding and bulk PubAck counting, without sockets (a fake connection)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from natsd.spark.options import OptionError
from natsd.spark.writer import NoStreamError, Publisher, encode_frames, plan_columns, write_batches


def test_encode_frames_exact_bytes_with_and_without_ids():
    data = pa.array([b"hello", b""], pa.binary())
    frames = encode_frames(7, b"_INBOX.x.", b"s.a", data, None).to_pylist()
    assert frames == [b"PUB s.a _INBOX.x.7 5\r\nhello\r\n", b"PUB s.a _INBOX.x.8 0\r\n\r\n"]
    ids = pa.array([b"job-0-0", b"job-0-1"], pa.binary())
    subjects = pa.array([b"s.a", b"s.bb"], pa.binary())
    frames = encode_frames(1, b"_INBOX.x.", subjects, data, ids).to_pylist()
    hdr = b"NATS/1.0\r\nNats-Msg-Id: job-0-0\r\n\r\n"
    assert frames[0] == b"HPUB s.a _INBOX.x.1 %d %d\r\n%shello\r\n" % (len(hdr), len(hdr) + 5, hdr)
    assert frames[1].startswith(b"HPUB s.bb _INBOX.x.2 34 34\r\nNATS/1.0\r\nNats-Msg-Id: job-0-1\r\n\r\n")


class FakeSock:
    def __init__(self, chunks):
        self.chunks = list(chunks)

    def settimeout(self, t):
        pass

    def recv(self, n):
        return self.chunks.pop(0) if self.chunks else b""


class FakeConn:
    def __init__(self, chunks):
        self.sock = FakeSock(chunks)
        self.sent: list[bytes] = []

    def send(self, data):
        self.sent.append(bytes(data))

    def close(self):
        pass


def _publisher(chunks, window=4096) -> Publisher:
    p = Publisher.__new__(Publisher)
    from collections import deque

    from natsd.spark.writer import PublishStats

    p.conn = FakeConn(chunks)
    p.reply_prefix = "_INBOX.x."
    p._reply_prefix_b = b"_INBOX.x."
    p.window, p.chunk, p.ack_timeout = window, 512, 1.0
    p.stats, p.outstanding, p._n, p._pending, p._buf = PublishStats(), 0, 0, [], b""
    p._recent = deque(maxlen=window + 513)
    return p


def _ack(n, seq, dup=False):
    body = b'{"stream":"S","seq":%d%s}' % (seq, b',"duplicate": true' if dup else b"")
    return b"MSG _INBOX.x.%d 1 %d\r\n%s\r\n" % (n, len(body), body)


def test_acks_are_counted_in_bulk_across_split_reads_with_duplicates():
    wire = b"".join(_ack(i, i, dup=i % 3 == 0) for i in range(1, 1001))
    # Split at awkward places: inside a control line, inside a payload, at a CRLF.
    b = wire.index(b"MSG ", 40000)  # the server's PING arrives between two messages
    chunks = [wire[:37], wire[37:5001], wire[5001:5002], wire[5002:b], b"PING\r\n" + wire[b:]]
    p = _publisher(chunks)
    p.publish_batch(b"s.a", pa.array([b"x"] * 1000, pa.binary()), None)
    stats = p.finish()
    assert (stats.published, stats.duplicates) == (1000, 333)
    assert b"PONG\r\n" in p.conn.sent
    assert sum(s.count(b"PUB s.a ") for s in p.conn.sent) == 1000


def test_the_rest_of_a_line_received_during_the_handshake_is_not_lost(monkeypatch):
    # nats-server sends an INFO (ending " \r\n") right after the handshake's PONG, and over TLS
    # that line may be split between records. The writer must go on from the connection's unread
    # bytes: starting afresh, it read 'MNOP"} ' as a message line and failed on its size.
    from natsd.spark.options import connect_options
    from natsd.spark.wire import SyncConnection

    class Sock(FakeSock):
        def sendall(self, data):
            pass

        def close(self):
            pass

    rest = b'MNOP"} \r\n' + _ack(0, 1) + _ack(1, 2)

    def connect(self):
        self.sock = Sock([rest])
        self.buf = b'INFO {"server_id":"NB"} \r\nPONG\r\nINFO {"server_id":"NB'
        self.pos = self.buf.index(b"PONG") + 6
        return self

    monkeypatch.setattr(SyncConnection, "connect", connect)
    p = Publisher(connect_options({"servers": "nats://127.0.0.1:1"}))
    p.publish("s.a", b"x")
    p.publish("s.a", b"y")
    assert p.finish().published == 2


def test_a_rejected_publish_names_its_subject_even_in_a_bulk_run():
    err = b'{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"},"stream":"S","seq":0}'
    wire = _ack(0, 1) + b"MSG _INBOX.x.1 1 %d\r\n%s\r\n" % (len(err), err)
    p = _publisher([wire])
    p.publish_batch(pa.array([b"s.one", b"s.two"], pa.binary()), pa.array([b"a", b"b"], pa.binary()), None)
    with pytest.raises(Exception, match=r"row 1 of this task \(subject 's.two'\): publish rejected: maximum messages"):
        p.finish()


def test_no_responders_names_the_subject_not_the_inbox():
    status = b"NATS/1.0 503\r\n\r\n"
    p = _publisher([b"HMSG _INBOX.x.0 1 %d %d\r\n%s\r\n" % (len(status), len(status), status)])
    p.publish("nowhere.x", b"d")
    with pytest.raises(NoStreamError, match=r"subject 'nowhere.x'.*no stream stores this subject"):
        p.finish()


def test_write_batches_positional_ids_column_aliases_and_headers():
    p = _publisher([b"".join(_ack(i, i) for i in range(1, 6))])
    plan = plan_columns(["topic", "value", "headers"], None, None)
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(["t.a", "t.b"]),
            pa.array(["v1", None]),
            pa.array([[], [("K", b"bin")]], pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        ],
        names=["topic", "value", "headers"],
    )
    batch2 = pa.RecordBatch.from_arrays(
        [
            pa.array(["t.c"] * 3),
            pa.array([b"x", b"y", b"z"], pa.binary()),
            pa.array([None] * 3, batch.schema.field(2).type),
        ],
        names=["topic", "value", "headers"],
    )
    write_batches(p, plan, [batch, batch2], part=3, id_prefix="job-3-")
    sent = b"".join(p.conn.sent) + b"".join(p._pending)
    assert (
        b"HPUB t.b _INBOX.x.1 " in sent and b"Nats-Msg-Id: job-3-1\r\nK: bin\r\n\r\n\r\n" in sent
    )  # null value -> b""
    assert b"Nats-Msg-Id: job-3-4\r\n\r\nz\r\n" in sent  # row numbers run across batches
    assert p.finish().published == 5


def test_write_batches_refuses_bad_subjects_and_missing_ids():
    p = _publisher([])
    plan = plan_columns(["subject", "data", "id"], None, "id")
    bad_subject = pa.RecordBatch.from_arrays(
        [pa.array(["ok.a", "has space"]), pa.array([b"1", b"2"]), pa.array(["i1", "i2"])],
        names=["subject", "data", "id"],
    )
    with pytest.raises(ValueError, match=r"row 1 of partition 0: invalid subject 'has space'"):
        write_batches(p, plan, [bad_subject], part=0, id_prefix=None)
    no_id = pa.RecordBatch.from_arrays(
        [pa.array(["ok.a", "ok.b"]), pa.array([b"1", b"2"]), pa.array(["i1", None])], names=["subject", "data", "id"]
    )
    with pytest.raises(ValueError, match=r"row 1 of partition 0: idempotence column 'id' is None"):
        write_batches(p, plan, [no_id], part=0, id_prefix=None)


@pytest.mark.parametrize(
    "names,subject,id_col,pattern",
    [
        (["subject"], None, None, "needs a 'data' \\(or Kafka-style 'value'\\) column"),
        (["data"], None, None, "needs option 'subject' \\(or 'topic'\\)"),
        (["data", "value", "subject"], None, None, "both a 'data' and a 'value' column"),
        (["data", "key"], "a.b", None, "JetStream messages have no key"),
        (["data"], "a.b", "order_id", "column 'order_id' is not in the DataFrame"),
    ],
)
def test_plan_columns_errors(names, subject, id_col, pattern):
    with pytest.raises(OptionError, match=pattern):
        plan_columns(names, subject, id_col)
    assert plan_columns(["data", "key"], "a.b", "key").id_column == "key"


def test_large_batches_are_encoded_in_bounded_slices(monkeypatch):
    import natsd.spark.writer as w

    monkeypatch.setattr(w, "_MAX_ENCODE_BYTES", 1000)
    p = _publisher([b"".join(_ack(i, i) for i in range(1, 41))])
    batch = pa.RecordBatch.from_arrays([pa.array([b"y" * 100] * 40, pa.binary())], names=["data"])
    assert [b.num_rows for b in w._bounded([batch], "data")] == [9, 9, 9, 9, 4]
    write_batches(p, plan_columns(["data"], "s.a", None), [batch], part=0, id_prefix="j-")
    sent = b"".join(p.conn.sent) + b"".join(p._pending)
    assert sent.count(b"HPUB s.a ") == 40 and b"Nats-Msg-Id: j-39\r\n" in sent
    assert p.finish().published == 40


@pytest.mark.parametrize(
    "opts,streaming,warned",
    [
        ({"idempotence": "positional", "msgidprefix": "job-1"}, False, "spark.sql.shuffle.partitions"),
        ({"idempotence": "positional"}, True, "not after a shuffle"),
        ({"idempotence": "column:order_id"}, False, None),
        ({"idempotence": "none"}, False, None),
    ],
)
def test_the_sink_warns_that_positional_ids_change_with_partitioning(caplog, opts, streaming, warned):
    """Positional ids follow partitions and row order: a re-run partitioned differently is stored
    twice, so the sink says so (and recommends column:<name>) whenever they are used."""
    pytest.importorskip("pyspark")
    from pyspark.sql.types import StringType, StructField, StructType

    from natsd.spark.datasource import JetStreamBatchWriter, JetStreamStreamWriter
    from natsd.spark.options import WriteOptions

    caplog.set_level("WARNING", logger="natsd.spark")
    schema = StructType([StructField(n, StringType()) for n in ("subject", "data", "order_id")])
    cls = JetStreamStreamWriter if streaming else JetStreamBatchWriter
    cls(WriteOptions.parse(opts, streaming=streaming), schema)  # no 'subject' option: no server asked
    if warned is None:
        assert "positional" not in caplog.text
    else:
        assert warned in caplog.text and "Prefer idempotence=column:<name>" in caplog.text
