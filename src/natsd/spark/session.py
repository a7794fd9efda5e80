"""Session-side conveniences: the default save mode, and registration that checks the workers' Python.

**Save mode.** Spark's JVM refuses every save mode but Append and Overwrite for a Python data
source (``UNSUPPORTED_DATA_SOURCE_SAVE_MODE``) before any connector code runs, while Spark's Kafka
sink accepts the default ``ErrorIfExists`` as an append. The JVM check cannot be changed from
Python, so :func:`install_default_save_mode` wraps PySpark's ``DataFrameWriter`` (classic and
Spark Connect): for ``format("jetstream")``, an unset mode or ``error``/``errorifexists`` is sent
as ``append``. ``overwrite`` reaches the sink, which refuses it with a clear message; ``ignore``
stays refused by Spark. It takes effect in every Python process that imports :mod:`natsd.spark`
(``register()`` does); a session relying only on auto-registration never imports it in the
driver, so there ``.mode("append")`` is needed (docs/spark.md says so).

**Registration.** PySpark finds the ``jetstream`` source by importing ``pyspark_jetstream`` in
*its worker's* Python, and runs every read/write task there too. When that interpreter is not the
one with this project installed (the venv's python run without activating the venv, no
``PYSPARK_PYTHON``), Spark answers ``DATA_SOURCE_NOT_FOUND`` under a Java stack, and an explicit
``spark.dataSource.register`` then fails in the workers with ``ModuleNotFoundError: natsd``.
:func:`register` registers the source and checks that interpreter first, saying what to set.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

__all__ = ["install_default_save_mode", "register", "check_worker_python", "WorkerPythonError"]

_DEFAULT_MODES = {"error", "errorifexists", "default"}
_FORMAT = "jetstream"


class WorkerPythonError(RuntimeError):
    """Spark's Python workers cannot import the connector."""


def _wrap(cls) -> None:
    if getattr(cls, "_natsd_default_save_mode", False):
        return
    orig_format, orig_mode, orig_save = cls.format, cls.mode, cls.save

    def format(self, source):  # PySpark's name
        self._natsd_format = str(source).lower()
        return orig_format(self, source)

    def mode(self, saveMode):  # PySpark's name
        if saveMode is not None:
            self._natsd_mode = str(saveMode).lower()
        return orig_mode(self, saveMode)

    def save(self, path=None, format=None, mode=None, partitionBy=None, **options):
        if format is not None:
            self.format(format)
        if mode is not None:
            self.mode(mode)
        if getattr(self, "_natsd_format", None) == _FORMAT and getattr(self, "_natsd_mode", None) in (
            None,
            *_DEFAULT_MODES,
        ):
            orig_mode(self, "append")  # what Kafka's sink does with the default mode
        return orig_save(self, path, None, None, partitionBy, **options)

    for fn, orig in ((format, orig_format), (mode, orig_mode), (save, orig_save)):
        fn.__doc__ = orig.__doc__
        fn.__wrapped__ = orig  # type: ignore[union-attr]  # (fn is one of the three functions above)
    cls.format, cls.mode, cls.save = format, mode, save
    cls._natsd_default_save_mode = True


def install_default_save_mode(connect: bool = False) -> None:
    """Make ``df.write.format("jetstream")...save()`` append by default (see the module docstring).

    Spark Connect's writer is patched when its module is already loaded or ``connect`` is set
    (importing it costs about a second, which every executor would pay on import otherwise).
    """
    try:
        from pyspark.sql.readwriter import DataFrameWriter
    except ImportError:  # pyspark missing: nothing to patch
        return
    _wrap(DataFrameWriter)
    if not connect and "pyspark.sql.connect.readwriter" not in sys.modules:
        return
    try:  # needs grpc etc.; absent in a plain pyspark[sql] install
        from pyspark.sql.connect.readwriter import DataFrameWriter as ConnectWriter
    except Exception:  # any import-time failure means Connect is not usable here
        return
    _wrap(ConnectWriter)


def _resolve(exe: str) -> str | None:
    if os.sep in exe:
        return exe if os.access(exe, os.X_OK) else None
    return shutil.which(exe)


def check_worker_python(python: str, timeout: float = 60.0) -> None:
    """Raise :class:`WorkerPythonError` unless ``python`` can import the connector and pyarrow."""
    path = _resolve(python)
    hint = (
        f"set the environment variable PYSPARK_PYTHON={sys.executable} before the SparkSession starts "
        "(a SparkSession.builder .config('spark.pyspark.python', ...) is not enough: the data source lookup "
        "ignores it), activate the environment that has natsd installed, or install natsd[spark] "
        f"into {python}; with spark-submit use --conf spark.pyspark.python=<that python> with natsd "
        "installed on every node, or ship a packed environment with --archives env.tar.gz#env and "
        "spark.pyspark.python=./env/bin/python (docs/spark.md, 'Running on a cluster')"
    )
    if path is None:
        raise WorkerPythonError(f"Spark's Python workers run {python!r}, which is not an executable here; {hint}")
    probe = "import natsd.spark, pyspark_jetstream, pyarrow"
    # Spark puts its own pyspark.zip and py4j zip on the workers' PYTHONPATH; the rest of the
    # environment is inherited from the driver, as for a local master.
    import glob

    import pyspark

    home = os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)
    zips = sorted(glob.glob(os.path.join(home, "python", "lib", "*.zip")))
    env = dict(os.environ, SPARK_HOME=home)
    env["PYTHONPATH"] = os.pathsep.join([p for p in [env.get("PYTHONPATH", "")] if p] + zips)
    try:
        r = subprocess.run([path, "-c", probe], capture_output=True, text=True, timeout=timeout, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WorkerPythonError(
            f"Spark's Python workers run {path}, which could not be started ({exc}); {hint}"
        ) from None
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise WorkerPythonError(f"Spark's Python workers run {path}, which cannot import the connector: {last}; {hint}")


def register(spark, check: bool = True):
    """Register the ``jetstream`` data source in ``spark`` and make the default save mode append.

    With ``check`` (and a classic session on a ``local`` master, where workers run on this
    machine) the workers' interpreter is checked first, so a wrong one fails here with what to
    set instead of ``DATA_SOURCE_NOT_FOUND`` or ``ModuleNotFoundError`` in a task.
    """
    from natsd.spark.datasource import JetStreamDataSource

    install_default_save_mode(connect=_is_connect(spark))
    if check:
        sc = getattr(spark, "sparkContext", None) if not _is_connect(spark) else None
        if sc is not None and str(sc.master).startswith("local"):
            check_worker_python(sc.pythonExec)
    spark.dataSource.register(JetStreamDataSource)
    return spark


def _is_connect(spark) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")
