"""What ``pip install 'natsd[spark]'`` brings (issue 17, item 6), checked offline.

setuptools writes ``[project] dependencies`` and ``[project.optional-dependencies]`` one to one as
the wheel's ``Requires-Dist`` (an extra's entries get ``; extra == "<name>"``), so the declaration
in pyproject.toml is what pip resolves. The transitive closure is walked through the metadata of
the distributions installed here (``make test`` installs ``.[test,bench,spark]``, and the server
extra), evaluating markers as pip does for the requested extras.
"""

from __future__ import annotations

import importlib.metadata as md
import tomllib
import warnings
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[3]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _requirements(extras: set[str]) -> list[Requirement]:
    reqs = [Requirement(r) for r in PROJECT["dependencies"]]
    for extra in sorted(extras):
        reqs += [Requirement(r) for r in PROJECT["optional-dependencies"][extra]]
    return reqs


def _closure(extras: set[str]) -> set[str]:
    """Canonical names of every distribution ``pip install natsd[<extras>]`` would install."""
    seen: set[str] = set()
    todo = [(r, frozenset()) for r in _requirements(extras)]
    while todo:
        req, parent_extras = todo.pop()
        env_extras = parent_extras or {""}
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in env_extras):
            continue
        name = canonicalize_name(req.name)
        key = f"{name}[{','.join(sorted(req.extras))}]"
        if key in seen:
            continue
        seen.add(key)
        try:
            dist_reqs = md.requires(req.name) or []
        except md.PackageNotFoundError:
            pytest.fail(f"{req.name} (required through natsd[{','.join(sorted(extras))}]) is not installed here")
        todo += [(Requirement(r), frozenset(req.extras)) for r in dist_reqs]
    return {k.split("[", 1)[0] for k in seen}


SERVER_ONLY = {canonicalize_name(Requirement(r).name) for r in PROJECT["optional-dependencies"]["server"]}


def test_the_server_extra_holds_uvloop_and_bcrypt():
    assert {"uvloop", "bcrypt"} <= SERVER_ONLY
    core = {canonicalize_name(Requirement(r).name) for r in PROJECT["dependencies"]}
    assert not core & SERVER_ONLY


def test_natsd_spark_pulls_none_of_the_servers_dependencies():
    spark = _closure({"spark"})
    assert {"pyspark", "pandas", "pyarrow", "nats-py", "grpcio"} <= spark  # the walk does follow extras
    assert spark & SERVER_ONLY == set(), f"natsd[spark] pulls server dependencies: {sorted(spark & SERVER_ONLY)}"
    # The walk finds them when they are asked for (so the assertion above is not vacuous).
    assert {"uvloop", "bcrypt"} <= _closure({"server"})


def test_the_spark_extra_pins_what_pyspark_supports():
    spark = {canonicalize_name(r.name): r for r in _requirements({"spark"})}
    pyspark_req = spark["pyspark"]
    assert {"sql", "pipelines"} <= pyspark_req.extras
    assert Version("4.2.0") in pyspark_req.specifier and Version("5.0.0") not in pyspark_req.specifier
    # PySpark 4.x requires pandas >= 2.2 and warns at every session start from pandas 3.0 on.
    pandas_req = spark["pandas"]
    assert Version("3.0.0") not in pandas_req.specifier and Version("2.2.0") in pandas_req.specifier
    for name in ("pyspark", "pandas"):
        assert Version(md.version(name)) in spark[name].specifier, (
            f"installed {name} {md.version(name)} is outside the pin"
        )


def test_pysparks_pandas_check_is_silent_with_the_pinned_pandas():
    """The check SparkSession runs for Arrow/pandas: with pandas >= 3 it emits a FutureWarning."""
    pytest.importorskip("pyspark")
    from pyspark.sql.pandas.utils import require_minimum_pandas_version

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        require_minimum_pandas_version()
