"""natsd.server.main.leave: the process's last step after a clean stop (issue 31). It skips the
interpreter's teardown (freeing every object) but nothing that reaches the outside world: threads
are joined, thread pools finish their queue, atexit functions run (logging.shutdown), stdio is
flushed, and the exit code is the one given. Run in a child: it ends its process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]

ROOT = Path(__file__).resolve().parents[3]

CHILD = r"""
import atexit, logging, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
from natsd.server.main import leave

out = sys.argv[1]

def write(name, text="x"):
    with open(out + "/" + name, "w") as f:
        f.write(text)

class Finalised:
    def __del__(self, _open=open, _path=out + "/finalised"):  # runs at teardown: leave() skips it
        _open(_path, "w").close()  # (builtins may be gone by then: bound as defaults)

keep = Finalised()
atexit.register(write, "atexit")
handler = logging.FileHandler(out + "/log", delay=True)
logging.getLogger("t").addHandler(handler)
logging.getLogger("t").warning("Server Exiting..")

def late():
    time.sleep(0.2)
    write("thread")

threading.Thread(target=late).start()
pool = ThreadPoolExecutor(1)
pool.submit(lambda: (time.sleep(0.2), write("pool")))
sys.stdout.write("buffered, no newline")  # (a pipe: block-buffered, still in Python's buffer)
leave(7)
"""


def test_leave_keeps_what_reaches_the_outside_and_skips_teardown(tmp_path):
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    r = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True, env=env, timeout=30
    )
    assert r.returncode == 7, r.stderr
    assert r.stdout == "buffered, no newline"
    assert (tmp_path / "log").read_text() == "Server Exiting..\n"
    assert (tmp_path / "thread").exists() and (tmp_path / "pool").exists() and (tmp_path / "atexit").exists()
    assert not (tmp_path / "finalised").exists()  # the teardown was skipped
