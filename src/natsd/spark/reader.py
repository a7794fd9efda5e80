"""Read one stream sequence range fast: an ephemeral push consumer parsed by hand into Arrow.

Per range (one Spark partition) the reader:

1. opens its own :class:`~natsd.spark.wire.SyncConnection`;
2. ``SUB <deliver_inbox> 2``;
3. sends ``<apiPrefix>.CONSUMER.CREATE.<stream>`` (``$JS.API``, or ``$JS.<domain>.API`` with
   option ``domain``) with ``{"stream_name": S, "config": {
   "deliver_policy": "by_start_sequence", "opt_start_seq": lo, "ack_policy": "none",
   "max_deliver": 1, "replay_policy": "instant", "flow_control": true, "idle_heartbeat": ns,
   "deliver_subject": inbox, "mem_storage": true, "num_replicas": 1, "inactive_threshold": ns,
   "filter_subject(s)": ...}}`` (an ordered-consumer configuration: no acks, no durable);
4. parses deliveries straight from the socket buffer. A data message's reply subject is the
   ack subject ``$JS.ACK.<stream>.<consumer>.<delivered>.<stream_seq>.<consumer_seq>.<ts_ns>.
   <pending>`` (9 tokens; the v2 layout ``$JS.ACK.<domain>.<hash>.<stream>...`` has >= 11),
   which carries the stream sequence, timestamp and pending count, so no header parsing is
   needed unless ``includeHeaders`` is on;
5. answers flow-control requests (``HMSG`` with reply ``$JS.FC...`` and status ``100``) as soon
   as they are parsed, which is after every earlier message was consumed, so the server's flow
   control window doubles as back-pressure; heartbeats (status 100, no reply) are checked for a
   consumer-sequence gap (``Nats-Last-Consumer``) and answered when stalled
   (``Nats-Consumer-Stalled``);
6. stops at the first stream sequence >= ``hi`` or when the pending count reaches 0, deletes
   the consumer (``$JS.API.CONSUMER.DELETE.<stream>.<name>``, reply ignored; the
   ``inactive_threshold`` reaps it if that is lost) and closes.

A consumer-sequence gap (a lost delivery) re-creates the consumer from the last stream sequence
seen + 1, like nats-py's ordered consumer, at most a few times per range.

Rows are emitted as ``pyarrow.RecordBatch`` built from flat buffers (no per-row Python objects
except when headers are requested).
"""

from __future__ import annotations

import json
import time
from array import array
from dataclasses import dataclass, replace

import pyarrow as pa

from natsd import nats_headers as NH
from natsd.spark.wire import ConnectOptions, NatsError, SyncConnection, header_pairs_raw, parse_headers

_CONSUMER_STALLED = NH.CONSUMER_STALLED.decode()
_LAST_CONSUMER = NH.LAST_CONSUMER.decode()

__all__ = ["RangeSpec", "read_range", "arrow_schema", "DataLossError"]

_DELIVER_SID = 2
_ACK_PREFIX = b"$JS.ACK."
_FC_PREFIX = b"$JS.FC."
_HEARTBEAT_NS = 2_000_000_000
_INACTIVE_NS = 60_000_000_000
_MAX_RESETS = 5
_BATCH_BYTES = 32 << 20  # flush an Arrow batch before int32 offsets could overflow


class DataLossError(RuntimeError):
    """Sequences the query needs are gone (limits, purge) or the stream was re-created."""


@dataclass(frozen=True)
class RangeSpec:
    """One inclusive stream sequence range to read, with how to read it (picklable)."""

    stream: str
    lo: int
    hi: int
    filters: tuple[str, ...] = ()
    include_headers: bool = False
    headers_as_strings: bool = False  # headerValueType=string; Kafka's BINARY values otherwise
    batch_rows: int = 8192
    fetch_timeout: float = 30.0
    fail_on_data_loss: bool = True
    created: str = ""  # stream creation time the plan saw; "" = do not check
    # A KV table's batch read: only the last message of each subject (deliver_policy
    # last_per_subject), delivered in sequence order.
    last_per_subject: bool = False


def arrow_schema(include_headers: bool, headers_as_strings: bool = False) -> pa.Schema:
    """The Arrow schema PySpark expects for the connector's Spark schema (UTC, microseconds)."""
    fields = [pa.field("subject", pa.string()), pa.field("data", pa.binary())]
    if include_headers:
        kv = pa.struct(
            [pa.field("key", pa.string()), pa.field("value", pa.string() if headers_as_strings else pa.binary())]
        )
        fields.append(pa.field("headers", pa.list_(kv)))
    fields += [
        pa.field("stream", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    ]
    return pa.schema(fields)


def _consumer_config(inbox: str, start: dict, filters: tuple[str, ...]) -> dict:
    cfg = {
        **start,
        "ack_policy": "none",
        "max_deliver": 1,
        "replay_policy": "instant",
        "flow_control": True,
        "idle_heartbeat": _HEARTBEAT_NS,
        "deliver_subject": inbox,
        "mem_storage": True,
        "num_replicas": 1,
        "inactive_threshold": _INACTIVE_NS,
    }
    if len(filters) == 1:
        cfg["filter_subject"] = filters[0]
    elif filters:
        cfg["filter_subjects"] = list(filters)
    return cfg


class _Batcher:
    """Column buffers for one Arrow batch."""

    __slots__ = ("schema", "stream_b", "n", "sub_buf", "sub_off", "data_buf", "data_off", "seqs", "tss", "hdrs")

    def __init__(self, schema: pa.Schema, stream: str, with_headers: bool):
        self.schema = schema
        self.stream_b = stream.encode()
        self.hdrs: list | None = [] if with_headers else None
        self.reset()

    def reset(self) -> None:
        self.n = 0
        self.sub_buf = bytearray()
        self.sub_off = array("i", [0])
        self.data_buf = bytearray()
        self.data_off = array("i", [0])
        self.seqs = array("q")
        self.tss = array("q")
        if self.hdrs is not None:
            self.hdrs = []

    def build(self) -> pa.RecordBatch:
        n = self.n
        subj = pa.Array.from_buffers(
            pa.string(), n, [None, pa.py_buffer(self.sub_off), pa.py_buffer(bytes(self.sub_buf))]
        )
        data = pa.Array.from_buffers(
            pa.binary(), n, [None, pa.py_buffer(self.data_off), pa.py_buffer(bytes(self.data_buf))]
        )
        sl = len(self.stream_b)
        stream = pa.Array.from_buffers(
            pa.string(),
            n,
            [
                None,
                pa.py_buffer(array("i", range(0, (n + 1) * sl, sl) if sl else [0] * (n + 1))),
                pa.py_buffer(self.stream_b * n),
            ],
        )
        seq = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(self.seqs)])
        # Timestamps arrive in ns; Spark wants microseconds (truncate, like nats-server's RFC3339 µs).
        us = array("q", [t // 1000 for t in self.tss])
        ts = pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n, [None, pa.py_buffer(us)])
        cols = [subj, data]
        if self.hdrs is not None:
            cols.append(pa.array(self.hdrs, type=self.schema.field("headers").type))
        cols += [stream, seq, ts]
        batch = pa.RecordBatch.from_arrays(cols, schema=self.schema)
        self.reset()
        return batch


def read_range(opts: ConnectOptions, spec: RangeSpec):
    """Yield ``pyarrow.RecordBatch`` es with every message of ``spec.stream`` in ``[lo, hi]``.

    Runs on executors; opens and closes its own connection. Raises :class:`DataLossError` when
    ``fail_on_data_loss`` and the range starts below the stream's first sequence or the stream was
    re-created since planning.
    """
    if spec.hi < spec.lo:
        return
    conn = SyncConnection(opts).connect()
    try:
        from natsd.spark.jsapi import stream_state

        st = stream_state(conn, spec.stream)
        if spec.fail_on_data_loss:
            if spec.created and st.created and st.created != spec.created:
                raise DataLossError(
                    f"stream {spec.stream} was re-created (created {st.created}, planned against {spec.created})"
                )
            if st.first_seq > spec.lo and not (st.messages == 0 and st.last_seq < spec.lo):
                raise DataLossError(
                    f"stream {spec.stream}: next sequence {spec.lo} < first available {st.first_seq} "
                    "(messages removed by limits or purge); set failOnDataLoss=false to skip"
                )
        if st.last_seq < spec.lo:
            return
        if st.last_seq < spec.hi:
            # Nothing beyond last_seq existed at planning time; stop there instead of waiting for
            # a pending count of 0 (new messages may keep arriving).
            spec = replace(spec, hi=st.last_seq)
        yield from _PushRange(conn, spec, opts).run()
    finally:
        conn.close()


class _Disconnected(NatsError):
    """The server closed the connection mid-range."""


class _PushRange:
    def __init__(self, conn: SyncConnection, spec: RangeSpec, opts: ConnectOptions):
        self.opts = opts
        self.conn = conn
        self.spec = spec
        self.schema = arrow_schema(spec.include_headers, spec.headers_as_strings)

    def _create(self, start_seq: int) -> str:
        """Subscribe a fresh deliver inbox and send the consumer create; returns the inbox."""
        inbox = self.conn.inbox_prefix + ".d" + str(start_seq)
        self.conn.subscribe(inbox, sid=self.sid)
        start = {"deliver_policy": "by_start_sequence", "opt_start_seq": start_seq}
        if self.spec.last_per_subject:
            start = {"deliver_policy": "last_per_subject"}
        cfg = _consumer_config(inbox, start, self.spec.filters)
        body = json.dumps({"stream_name": self.spec.stream, "config": cfg}).encode()
        self.create_reply = self.conn.new_reply().encode()
        api = self.opts.api_prefix  # $JS.API, or $JS.<domain>.API across a leafnode link
        self.conn.publish(f"{api}.CONSUMER.CREATE.{self.spec.stream}", body, self.create_reply.decode())
        return inbox

    def _delete(self) -> None:
        """Stop deliveries and delete the consumer without waiting (inactive_threshold backs it up)."""
        try:
            self.conn.unsubscribe(self.sid)
            if self.consumer:
                api = self.opts.api_prefix
                self.conn.publish(f"{api}.CONSUMER.DELETE.{self.spec.stream}.{self.consumer}", b"")
            self.conn.close_after_send()
        except (OSError, NatsError):
            pass

    def run(self):
        spec = self.spec
        conn = self.conn
        lo, hi = spec.lo, spec.hi
        self.sid = _DELIVER_SID
        self.consumer = ""
        self._create(lo)
        bt = _Batcher(self.schema, spec.stream, spec.include_headers)
        batch_rows = spec.batch_rows
        want_headers = spec.include_headers
        split_headers = (lambda b: parse_headers(b)[2]) if spec.headers_as_strings else header_pairs_raw
        expected_cseq = 1
        last_sseq = lo - 1
        resets = 0
        done = False
        created_ok = False
        buf = conn.take_buffered()
        pos = 0
        sid_b = str(self.sid).encode()
        sock = conn.sock
        sock.settimeout(spec.fetch_timeout)
        recv = sock.recv
        idle_deadline = time.monotonic() + spec.fetch_timeout
        reconnects = 0
        while not done:
            try:
                while not done:
                    i = buf.find(b"\r\n", pos)
                    if i < 0:
                        buf = self._refill(buf, pos, recv, idle_deadline)
                        pos = 0
                        continue
                    c = buf[pos]
                    if c == 77 or c == 72:  # 'M'SG / 'H'MSG
                        parts = buf[pos:i].split(b" ")
                        if c == 72:
                            tlen = int(parts[-1])
                            hlen = int(parts[-2])
                            has_reply = len(parts) == 6
                        else:
                            tlen = int(parts[-1])
                            hlen = 0
                            has_reply = len(parts) == 5
                        start = i + 2
                        end = start + tlen
                        if end + 2 > len(buf):
                            buf = self._refill(buf, pos, recv, idle_deadline)
                            pos = 0
                            continue
                        pos = end + 2
                        sid = parts[2]
                        reply = parts[3] if has_reply else b""
                        if sid == sid_b and reply[:8] == _ACK_PREFIX:
                            t = reply.split(b".")
                            if len(t) == 9:
                                sseq = int(t[5])
                                cseq = int(t[6])
                                ts = int(t[7])
                                pend = int(t[8])
                            else:
                                sseq = int(t[7])
                                cseq = int(t[8])
                                ts = int(t[9])
                                pend = int(t[10])
                            if cseq != expected_cseq:
                                # A delivery was lost: restart an ordered consumer after the last good one.
                                resets += 1
                                if resets > _MAX_RESETS:
                                    raise NatsError(f"stream {spec.stream}: consumer sequence gaps persist, giving up")
                                self._reset(last_sseq + 1)
                                sid_b = str(self.sid).encode()
                                expected_cseq = 1
                                continue
                            expected_cseq = cseq + 1
                            if sseq > hi:
                                done = True
                                break
                            last_sseq = sseq
                            bt.sub_buf += parts[1]
                            bt.sub_off.append(len(bt.sub_buf))
                            bt.data_buf += buf[start + hlen : end]
                            bt.data_off.append(len(bt.data_buf))
                            bt.seqs.append(sseq)
                            bt.tss.append(ts)
                            if want_headers:
                                bt.hdrs.append(split_headers(buf[start : start + hlen]) if hlen else [])
                            bt.n += 1
                            if sseq >= hi or pend == 0:
                                done = True
                            elif bt.n >= batch_rows or len(bt.data_buf) >= _BATCH_BYTES:
                                yield bt.build()
                                idle_deadline = time.monotonic() + spec.fetch_timeout
                            continue
                        if sid == sid_b:
                            # Status on the deliver subject: flow control (reply $JS.FC...) or heartbeat.
                            if reply[:7] == _FC_PREFIX:
                                conn.send(b"PUB " + reply + b" 0\r\n\r\n")
                                continue
                            status, _, hdrs = parse_headers(buf[start : start + hlen]) if hlen else (0, "", [])
                            if status == 100:
                                for k, v in hdrs:
                                    if k == _CONSUMER_STALLED:
                                        conn.send(b"PUB " + v.encode() + b" 0\r\n\r\n")
                                    elif k == _LAST_CONSUMER and int(v) != expected_cseq - 1:
                                        resets += 1
                                        if resets > _MAX_RESETS:
                                            raise NatsError(f"stream {spec.stream}: consumer sequence gaps persist")
                                        self._reset(last_sseq + 1)
                                        sid_b = str(self.sid).encode()
                                        expected_cseq = 1
                                        break
                                if created_ok and self.pending0 and expected_cseq == 1:
                                    done = True  # nothing matched in the range
                            continue
                        if sid == b"1" and parts[1] == self.create_reply:
                            body = buf[start + hlen : end]
                            if not body:
                                raise NatsError(f"no JetStream responders for stream {spec.stream}")
                            resp = json.loads(body)
                            if "error" in resp:
                                e = resp["error"]
                                raise NatsError(
                                    f"consumer create on {spec.stream} failed: {e.get('description')} "
                                    f"({e.get('err_code')})"
                                )
                            self.consumer = resp.get("name", "")
                            created_ok = True
                            self.pending0 = (
                                int(resp.get("num_pending", 1)) == 0
                                and int(resp.get("delivered", {}).get("consumer_seq", 0)) == 0
                            )
                            if self.pending0 and expected_cseq == 1:
                                done = True
                            continue
                        continue  # stale deliveries from a replaced consumer, stray replies
                    line = buf[pos:i]
                    pos = i + 2
                    if line == b"PING":
                        conn.send(b"PONG\r\n")
                    elif line[:4] == b"-ERR":
                        raise NatsError(line.decode(errors="replace"))
            except TimeoutError:
                raise
            except (_Disconnected, OSError) as exc:
                # The link dropped (server restart, slow-consumer cut while Spark was busy): resume
                # on a new connection after the last sequence we kept, like an ordered consumer.
                reconnects += 1
                if reconnects > _MAX_RESETS:
                    raise NatsError(f"stream {spec.stream}: connection lost {reconnects} times: {exc}") from exc
                if spec.last_per_subject:
                    raise
                self._reconnect(last_sseq + 1)
                conn = self.conn
                buf, pos = conn.take_buffered(), 0
                sid_b = str(self.sid).encode()
                recv = conn.sock.recv
                expected_cseq = 1
                created_ok = False
        if bt.n:
            yield bt.build()
        self._delete()

    def _refill(self, buf: bytes, pos: int, recv, idle_deadline: float) -> bytes:
        try:
            chunk = recv(SyncConnection.RECV_SIZE)
        except TimeoutError:
            raise TimeoutError(
                f"stream {self.spec.stream}: no data within fetchTimeout={self.spec.fetch_timeout}s "
                f"while reading [{self.spec.lo}, {self.spec.hi}]"
            ) from None
        if not chunk:
            raise _Disconnected("connection closed by the server")
        rest = buf[pos:]
        return rest + chunk if rest else chunk

    def _reconnect(self, start_seq: int) -> None:
        try:
            self.conn.close()
        except OSError:
            pass
        deadline = time.monotonic() + self.spec.fetch_timeout
        while True:
            try:
                self.conn = SyncConnection(self.opts).connect()
                break
            except NatsError:
                # The server may be restarting; keep trying until fetchTimeout runs out.
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)
        sock = self.conn.sock
        assert sock is not None  # connected above
        sock.settimeout(self.spec.fetch_timeout)
        self.sid = _DELIVER_SID
        self.consumer = ""
        self._create(start_seq)

    def _reset(self, start_seq: int) -> None:
        if self.spec.last_per_subject:
            # A last-per-subject consumer cannot resume at a sequence; Spark retries the task.
            raise NatsError(f"stream {self.spec.stream}: a delivery was lost in a last-per-subject read")
        self.conn.unsubscribe(self.sid)
        old = self.consumer
        if old:
            self.conn.publish(f"{self.opts.api_prefix}.CONSUMER.DELETE.{self.spec.stream}.{old}", b"")
        self.consumer = ""
        self.sid += 1
        self._create(start_seq)
