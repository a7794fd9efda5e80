"""The default save mode shim and the workers' interpreter check (no Spark session)."""

from __future__ import annotations

import sys

import pytest

from natsd.spark.session import WorkerPythonError, _wrap, check_worker_python


class FakeWriter:
    """The shape of PySpark's DataFrameWriter: format/mode record, save sends what was set."""

    def __init__(self):
        self.sent_mode = None
        self.fmt = None
        self.saved = None

    def format(self, source):
        self.fmt = source
        return self

    def mode(self, saveMode):
        if saveMode is not None:
            self.sent_mode = saveMode
        return self

    def save(self, path=None, format=None, mode=None, partitionBy=None, **options):
        self.mode(mode)
        if format is not None:
            self.format(format)
        self.saved = (self.fmt, self.sent_mode, options)


_wrap(FakeWriter)


@pytest.mark.parametrize(
    "build,expected_mode",
    [
        (lambda w: w.format("jetstream").save(), "append"),
        (lambda w: w.format("JetStream").mode("error").save(), "append"),
        (lambda w: w.mode("errorifexists").format("jetstream").save(), "append"),
        (lambda w: w.save(format="jetstream", subject="x"), "append"),
        (lambda w: w.format("jetstream").mode("overwrite").save(), "overwrite"),  # the sink refuses it
        (lambda w: w.format("jetstream").mode("ignore").save(), "ignore"),  # Spark refuses it
        (lambda w: w.format("parquet").save(), None),  # other formats untouched
        (lambda w: w.format("parquet").mode("error").save(), "error"),
    ],
)
def test_default_save_mode_is_append_for_jetstream_only(build, expected_mode):
    w = FakeWriter()
    build(w)
    assert w.saved[1] == expected_mode


def test_wrapping_twice_is_harmless():
    _wrap(FakeWriter)
    w = FakeWriter()
    w.format("jetstream").save()
    assert w.saved[1] == "append"


def test_worker_python_check_passes_for_this_interpreter_and_says_what_to_set_otherwise(tmp_path):
    check_worker_python(sys.executable)
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'natsd'\" >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(
        WorkerPythonError,
        match=r"No module named 'natsd'.*set the environment variable PYSPARK_PYTHON=.*"
        r"with spark-submit use --conf spark.pyspark.python",
    ):
        check_worker_python(str(fake))
    with pytest.raises(WorkerPythonError, match="not an executable"):
        check_worker_python(str(tmp_path / "missing-python"))


def test_register_checks_the_workers_python_before_registering(tmp_path):
    from types import SimpleNamespace

    from natsd.spark.session import register

    registered = []
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)

    def session(python, master="local[2]"):
        return SimpleNamespace(
            sparkContext=SimpleNamespace(master=master, pythonExec=python),
            dataSource=SimpleNamespace(register=registered.append),
        )

    # The venv's python run without activating it: workers get `python3` from PATH, without natsd.
    with pytest.raises(WorkerPythonError, match=rf"workers run {fake}.*PYSPARK_PYTHON={sys.executable}"):
        register(session(str(fake)))
    assert registered == []
    register(session(sys.executable))
    register(session(str(fake), master="spark://elsewhere:7077"))  # not checkable from here: registers
    assert [ds.name() for ds in registered] == ["jetstream", "jetstream"]
