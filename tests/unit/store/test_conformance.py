"""Runs the shipped conformance suite (natsd.store.conformance) against every store."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from natsd.store import conformance
from natsd.store.conformance import CONSUMER_STORE_CHECKS, RANDOM_CONFIGS, STREAM_STORE_CHECKS

from .conftest import FileFactory, MemoryFactory, file_store_available


@pytest.mark.parametrize("check", STREAM_STORE_CHECKS + CONSUMER_STORE_CHECKS, ids=lambda c: c.__name__)
def test_conformance(check, store_factory):
    check(store_factory)


@pytest.mark.parametrize("limits", sorted(RANDOM_CONFIGS))
@pytest.mark.parametrize("seed", range(2))
def test_random_ops_against_model(random_factory, limits, seed):
    conformance.check_random_ops(random_factory, seed=seed, n=120, limits=limits)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=conformance.model_ops())
def test_hypothesis_ops_memory(ops):
    conformance.run_model_ops(MemoryFactory(), ops)


@pytest.mark.skipif(not file_store_available(), reason="file store not built yet")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=conformance.model_ops())
def test_hypothesis_ops_file(ops, scratch_dir):
    import os
    import tempfile

    root = tempfile.mkdtemp(dir=scratch_dir)
    conformance.run_model_ops(FileFactory(root, mode="crash", block_size=512), ops)
    assert os.path.isdir(root)
