"""Fixtures for the Spark connector tests: one SparkSession for the whole run, JetStream servers.

Spark's fixed costs (JVM start ~10 s, first Python data source query ~10 s on 2 cores) dominate,
so the session is shared by every Spark test module (``local[2,3]``: two task slots and up to 3
attempts per task, which the forced-failure tests need; UI off, 2 shuffle partitions, quiet logs).

The ``js_server`` fixture is parametrized over the reference nats-server and natsd (a natsd that
cannot start with JetStream fails the test).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile

import pytest

from tests.helpers.servers import reference_binary, start_server

pytestmark = [pytest.mark.spark]

# The `spark` extra pins pandas < 3 (PySpark warns at every session start with pandas >= 3), so no
# warning filter is needed here: warnings are errors and that one would fail the tests.


def _java_ok() -> bool:
    return bool(os.environ.get("JAVA_HOME") or shutil.which("java"))


@pytest.fixture(scope="session")
def spark():
    """A local SparkSession shared by all Spark tests, with the jetstream source registered."""
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    if not _java_ok():
        pytest.skip("Java is not installed")
    # Python workers must run this interpreter (it has nats-py, pyarrow and natsd importable).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from natsd.spark import register

    tmp = tempfile.mkdtemp(prefix="spark-tests-")
    session = (
        SparkSession.builder.master("local[2,3]")
        .appName("natsd-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.warehouse.dir", os.path.join(tmp, "warehouse"))
        .config("spark.local.dir", os.path.join(tmp, "local"))
        .config("spark.driver.extraJavaOptions", "-Dderby.system.home=" + os.path.join(tmp, "derby"))
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)  # the documented way: checks the workers' Python, append as the default save mode
    yield session
    session.stop()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module", params=[pytest.param("reference", marks=pytest.mark.reference), "natsd"])
def js_server(request, tmp_path_factory):
    """A JetStream server subprocess for one test module (reference nats-server or natsd)."""
    kind = request.param
    if kind == "reference" and reference_binary() is None:
        pytest.skip("reference nats-server binary not installed")
    srv = start_server(kind, tmp_path_factory.mktemp(f"js-{kind}"))
    yield srv
    srv.stop()


def run(coro):
    """Run a nats-py coroutine from a synchronous test (Spark tests are synchronous)."""
    return asyncio.run(coro)


async def _with_js(url, fn):
    import nats

    nc = await nats.connect(url)
    try:
        return await fn(nc, nc.jetstream())
    finally:
        await nc.close()


def js_call(url, fn):
    """``fn(nc, js)`` with a fresh nats-py connection to ``url``; returns its result."""
    return run(_with_js(url, fn))


def make_stream(url, name, subjects, **cfg):
    """(Re)create a stream with nats-py."""

    async def go(nc, js):
        try:
            await js.delete_stream(name)
        except Exception:
            pass
        await js.add_stream(name=name, subjects=subjects, **cfg)

    js_call(url, go)


def publish(url, items, headers=None):
    """Publish ``[(subject, bytes), ...]`` with acks (pipelined) and return the PubAck list."""

    async def go(nc, js):
        futs = [await js.publish_async(s, d, headers=headers) for s, d in items]
        return await asyncio.gather(*futs)

    return js_call(url, go)


def stream_info(url, name):
    async def go(nc, js):
        return await js.stream_info(name)

    return js_call(url, go)
