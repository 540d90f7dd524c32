"""The store pulling a real registry model (SmolLM2 135M) into a private cache: checked, assembled
once, and nothing left behind by a bad checksum or an interrupted pull."""

from __future__ import annotations

import dataclasses

import pytest

from specllama.errors import DownloadError
from specllama.models import store
from specllama.models.registry import load_registry
from tests.support import store_cache
from tests.support.store_cache import leftovers

pytestmark = pytest.mark.real_models
private_cache = store_cache.private_cache  # the fixture


@pytest.mark.real_models
def test_pull_assembles_verifies_and_is_a_no_op_the_second_time(private_cache):
    spec = load_registry().model("smollm2-135m")
    seen = []
    path = store.ensure(spec, lambda done, total, what: seen.append((done, total)))
    assert path == private_cache / spec.file and path.stat().st_size == spec.registry.size
    assert store.sha256_of(path) == spec.registry.sha256
    assert seen[-1] == (spec.registry.size, spec.registry.size)
    assert leftovers(private_cache) == []
    mtime = path.stat().st_mtime_ns
    assert store.ensure(spec, lambda *a: pytest.fail("pulled again")) == path
    assert path.stat().st_mtime_ns == mtime


@pytest.mark.real_models
def test_a_checksum_mismatch_never_reaches_the_final_name(private_cache):
    spec = load_registry().model("smollm2-135m")
    wrong = dataclasses.replace(spec, registry=dataclasses.replace(spec.registry, sha256="0" * 64))
    with pytest.raises(DownloadError, match="does not match"):
        store.ensure(wrong)
    assert not (private_cache / spec.file).exists()
    assert leftovers(private_cache) == []


@pytest.mark.real_models
def test_an_interrupted_pull_leaves_nothing_behind(private_cache):
    spec = load_registry().model("smollm2-135m")

    def interrupt(done, total, what):
        if done > 10_000_000:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store.ensure(spec, interrupt)
    assert not (private_cache / spec.file).exists()
    assert leftovers(private_cache) == []
