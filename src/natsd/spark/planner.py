"""Planning on the driver through nats-py: stream state and names, time -> sequence, credentials.

The connector keeps its own socket (:mod:`natsd.spark.wire`) only where it was measured to be
needed: the per-task data path (``read()`` / ``write()``), where nats-py's per-message objects cap
a task far below the hand-parsed reader and the batch-encoded writer. Everything the driver does
to *plan* a query — a few ``$JS.API`` requests per trigger — goes through nats-py, which also owns
authentication there (user/password, token, ``.creds`` via its ``user_credentials``, TLS).

Spark calls the planning methods from plain synchronous code, so :class:`Planner` runs one nats-py
connection on a private event loop in a daemon thread and offers blocking methods. A streaming
reader keeps one planner between micro-batches (nats-py reconnects by itself when the server
restarts); batch planning opens one per query.

Requests and replies are the JSON documents of nats-server 2.11+ (see :mod:`natsd.spark.jsapi`).
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any
from urllib.parse import urlparse

from natsd.redact import redact
from natsd.spark.wire import ConnectOptions, JSApiError, NatsError, seed_text, tls_context

__all__ = ["Planner", "nats_connect_kwargs"]


def nats_connect_kwargs(co: ConnectOptions) -> dict:
    """The nats-py ``connect()`` arguments for the connector's options (same meaning as on the data path)."""
    kw: dict = {
        "servers": co.urls(),
        "name": co.name,
        "connect_timeout": max(1, int(co.connect_timeout)),
        "max_reconnect_attempts": 5,
        "reconnect_time_wait": 0.5,
    }
    if co.token:
        kw["token"] = co.token
    if co.user:
        kw["user"] = co.user
        kw["password"] = co.password or ""
    if co.creds:
        kw["user_credentials"] = co.creds
    elif co.nkey_seed:
        kw["nkeys_seed_str"] = seed_text(co.nkey_seed)
    if co.tls_ca or co.tls_cert or any(urlparse(u).scheme == "tls" for u in kw["servers"]):
        kw["tls"] = tls_context(co)
    return kw


class Planner:
    """A blocking facade over one nats-py connection (see the module docstring).

    Offers ``js_request`` (what :mod:`natsd.spark.jsapi` needs) and
    :meth:`first_seq_at_or_after`. Not picklable on purpose: executors never plan.
    """

    def __init__(self, co: ConnectOptions, timeout: float = 10.0):
        self.opts = co
        self.timeout = timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="natsd-spark-planner", daemon=True)
        self._thread.start()
        self._nc = None
        try:
            self._nc = self._run(self._connect(), co.connect_timeout * len(co.urls()) + 5)
        except BaseException:
            self._stop_loop()
            raise

    @property
    def nc(self) -> Any:
        """The nats-py client: connected from ``__init__`` until ``close()``."""
        nc = self._nc
        if nc is None:
            raise NatsError("the planner's connection is closed")
        return nc

    async def _connect(self):
        import nats

        errors = []  # what nats-py's error callback saw

        async def quiet(exc):  # nats-py's default error callback prints; failures surface as exceptions
            errors.append(exc)

        try:
            return await nats.connect(**nats_connect_kwargs(self.opts), error_cb=quiet)
        except Exception as exc:  # nats-py raises several kinds
            # nats-py ends with NoServersError whatever happened; the callback saw the cause (the
            # server's "authorization violation", a refused connection, ...).
            raise NatsError(
                f"could not connect to {redact(self.opts.servers)}: "
                f"{redact(connect_error_words(errors[-1] if errors else exc))}"
            ) from None

    def _run(self, coro, timeout: float):
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(timeout)
        except TimeoutError:
            fut.cancel()
            raise

    # ------------------------------------------------------------------ what jsapi needs
    def js_request(self, subject: str, body: dict | None = None, timeout: float = 10.0) -> dict:
        """A ``$JS.API`` request; raises :class:`JSApiError` on an error reply."""
        payload = b"" if body is None else json.dumps(body).encode()
        data = self._run(self._request(subject, payload, timeout), timeout + 5)
        err = data.get("error")
        if err:
            raise JSApiError(err.get("code", 0), err.get("err_code", 0), err.get("description", ""))
        return data

    async def _request(self, subject: str, payload: bytes, timeout: float) -> dict:
        from nats.errors import NoRespondersError, TimeoutError as NatsTimeout

        try:
            msg = await self.nc.request(subject, payload, timeout=timeout)
        except NoRespondersError:
            raise NatsError(f"JetStream not enabled or not reachable ({subject})") from None
        except NatsTimeout:
            raise TimeoutError(f"no reply to {subject} within {timeout}s") from None
        return json.loads(msg.data)

    # ------------------------------------------------------------------ time -> sequence
    def first_seq_at_or_after(self, stream: str, when_iso: str, timeout: float = 10.0) -> int | None:
        """The first sequence of ``stream`` stored at or after ``when_iso`` (RFC 3339), or None.

        ``STREAM.INFO``'s ``last_ts`` says whether any message is that new; if one is, an ephemeral
        ack-less pull consumer with ``deliver_policy=by_start_time`` hands over its first message,
        whose ``$JS.ACK`` reply subject names the stream sequence. Works on every JetStream server
        (no dependence on Direct Get).
        """
        from natsd.spark.jsapi import rfc3339_to_ns, stream_state

        st = stream_state(self, stream, timeout)
        if st.messages == 0 or rfc3339_to_ns(st.last_ts) < rfc3339_to_ns(when_iso):
            return None
        cfg = {
            "deliver_policy": "by_start_time",
            "opt_start_time": when_iso,
            "ack_policy": "none",
            "max_deliver": 1,
            "replay_policy": "instant",
            "mem_storage": True,
            "num_replicas": 1,
            "inactive_threshold": 60_000_000_000,
        }
        api = self.opts.api_prefix
        resp = self.js_request(f"{api}.CONSUMER.CREATE.{stream}", {"stream_name": stream, "config": cfg}, timeout)
        name = resp.get("name", "")
        try:
            return self._run(self._first_delivery(stream, name, timeout), timeout + 5)
        finally:
            try:
                self._run(self.nc.publish(f"{api}.CONSUMER.DELETE.{stream}.{name}", b""), timeout)
            except Exception:  # inactive_threshold reaps it anyway
                pass

    async def _first_delivery(self, stream: str, consumer: str, timeout: float) -> int:
        # A pulled message arrives under its own subject, not the reply inbox, so nats-py's request
        # multiplexer cannot match it: use a dedicated inbox subscription, as pull subscribers do.
        nc = self.nc
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox, max_msgs=1)
        try:
            await nc.publish(
                f"{self.opts.api_prefix}.CONSUMER.MSG.NEXT.{stream}.{consumer}",
                json.dumps({"batch": 1, "expires": int(timeout * 1e9)}).encode(),
                reply=inbox,
            )
            msg = await sub.next_msg(timeout)
        finally:
            try:
                await sub.unsubscribe()
            except Exception:  # already auto-unsubscribed after one message
                pass
        t = (msg.reply or "").split(".")
        if t[0:2] != ["$JS", "ACK"]:
            raise NatsError(f"stream {stream}: no message delivered from the by-time consumer ({msg.headers})")
        return int(t[5]) if len(t) == 9 else int(t[7])  # v1 (9 tokens) or v2 layout

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        if self._nc is not None:
            nc, self._nc = self._nc, None
            try:
                self._run(nc.close(), 5)
            except Exception:  # closing a broken connection
                pass
        self._stop_loop()

    def _stop_loop(self) -> None:
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        if not self._loop.is_running():
            self._loop.close()

    def __enter__(self) -> "Planner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getstate__(self):
        raise TypeError("Planner holds a live connection; executors open their own")


def connect_error_words(exc: BaseException) -> str:
    """nats-py's error as words: ``nats: 'authorization violation'`` -> ``authorization violation``,
    an OS error's text, else the class name (``NoServersError``)."""
    text = str(exc).strip()
    if text.startswith("nats: "):
        text = text[len("nats: ") :].strip("'")
    return text or type(exc).__name__
