"""Several executors: ``local-cluster[2,1,1024]`` (two workers with one executor JVM each, which
the pip PySpark supports) runs batch and streaming reads and writes across both executors, and a
streaming copy with message ids stays exactly-once when one executor is killed (SIGKILL) mid-query
and the query is then stopped and restarted from its checkpoint:
Spark re-runs the lost tasks on a relaunched executor, reads replay the same sequences, and the
target stream drops the re-published ids. The job runs in its own process (``local_cluster_job.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.servers import start_server

from .conftest import make_stream, publish, stream_info

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

JOB = Path(__file__).with_name("local_cluster_job.py")
ROOT = Path(__file__).resolve().parents[3]
N = 6000


@pytest.fixture
def natsd_server(tmp_path):
    """natsd only: several JVMs on 2 cores make this the slowest Spark test (the connector's
    behaviour against nats-server is covered by the other modules)."""
    srv = start_server("natsd", tmp_path / "srv")
    yield srv
    srv.stop()


def test_reads_and_writes_across_two_executors_exactly_once_after_an_executor_kill(natsd_server, tmp_path):
    url = natsd_server.url
    make_stream(url, "CL", ["cl.>"])
    make_stream(url, "CLB", ["clb.>"], duplicate_window=600)
    make_stream(url, "CLS", ["cls.>"], duplicate_window=600)
    for start in range(0, N, 2000):
        publish(url, [(f"cl.{i % 7}", b"m%d" % i) for i in range(start, start + 2000)])
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    r = subprocess.run(
        [sys.executable, str(JOB), url, str(N)], capture_output=True, text=True, timeout=850, env=env, cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr[-4000:]
    seen = json.loads(r.stdout.strip().splitlines()[-1])
    assert seen["executors"] == [0, 1] and seen["reader_processes"] >= 2
    assert seen["batch_count"] == N
    assert stream_info(url, "CLB").state.messages == N  # the batch write, across executors
    assert seen["killed_executor"] and seen["first_run_error"] is None and seen["stream_error"] is None
    assert seen["killed_after_batches"] < seen["batches_before_stop"]  # the kill happened while the query ran
    assert stream_info(url, "CLS").state.messages == N  # exactly once: every id once, none lost
