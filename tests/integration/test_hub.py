"""Hub models through huggingface_hub, against a fake hub on 127.0.0.1 (HF_ENDPOINT): hf:
references anywhere a model is named, the standard cache, HF_TOKEN, resumed downloads, headers read
without downloading, and `models add/rm`. Never the network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specllama.cli.main import main
from specllama.models import hub
from tests.support.fake_hub import FakeHub

REPO_ID = "someone/tiny-GGUF"


@pytest.fixture
def fake_hub(tiny_models, tmp_path, monkeypatch):
    served = FakeHub(repos={
        REPO_ID: {"tiny-Q4_K_M.gguf": tiny_models["a"], "tiny-Q8_0.gguf": tiny_models["b"], "README.md": tiny_models["a"]},
        "someone/other-GGUF": {"other-Q4_K_M.gguf": tiny_models["other"]},
        "someone/private-GGUF": {"p-Q4_K_M.gguf": tiny_models["a"]},
    }, tokens={"someone/private-GGUF": "hf_secret"})
    monkeypatch.setenv("HF_ENDPOINT", served.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("SPECLLAMA_CONFIG", raising=False)
    yield served
    served.close()


def hub_blobs(tmp_path: Path) -> list[Path]:
    return [p for p in (tmp_path / "hf" / "hub").rglob("*") if p.is_file() and "blobs" in p.parts]


def run_json(capsys, *argv) -> dict:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_a_quant_tag_picks_the_file_downloads_it_once_into_the_hub_cache(fake_hub, tiny_models, tmp_path, capsys):
    argv = ["run", "-m", f"hf:{REPO_ID}:Q8_0", "--no-draft", "-n", "2", "-c", "256", "--json", "hi"]
    answer = run_json(capsys, *argv)
    assert answer["target"] == "tiny-Q8_0.gguf" and answer["tokens"] >= 1
    assert [b.stat().st_size for b in hub_blobs(tmp_path)] == [tiny_models["b"].stat().st_size]
    assert fake_hub.bytes_sent("tiny-Q8_0.gguf") == tiny_models["b"].stat().st_size
    assert fake_hub.bytes_sent("tiny-Q4_K_M.gguf") == 0
    run_json(capsys, *argv)  # cached: not downloaded again
    assert fake_hub.bytes_sent("tiny-Q8_0.gguf") == tiny_models["b"].stat().st_size


def test_a_file_name_and_a_repository_with_one_gguf(fake_hub, capsys):
    assert run_json(capsys, "models", "info", f"hf:{REPO_ID}:tiny-Q4_K_M.gguf", "--json")["vocab_size"] > 1000
    assert run_json(capsys, "models", "info", "hf:someone/other-GGUF", "--json")["vocab_size"] > 1000


def test_an_ambiguous_or_unknown_reference_is_one_line(fake_hub, capsys):
    assert main(["models", "info", f"hf:{REPO_ID}"]) == 1
    err = capsys.readouterr().err
    assert "2 GGUF files match; name one" in err and f"hf:{REPO_ID}:tiny-Q8_0.gguf" in err
    assert main(["models", "info", f"hf:{REPO_ID}:Q2_K"]) == 1
    assert "no GGUF file matching 'Q2_K'" in capsys.readouterr().err
    assert main(["models", "info", "hf:nobody/nothing:Q4_K_M"]) == 1
    assert "hub repository nobody/nothing: not found" in capsys.readouterr().err
    assert main(["models", "info", "hf:no-slash"]) == 2  # a malformed reference is a usage mistake
    assert "hf:OWNER/REPO" in capsys.readouterr().err


def test_a_private_repository_needs_hf_token(fake_hub, monkeypatch, capsys):
    ref = "hf:someone/private-GGUF:Q4_K_M"
    assert main(["models", "info", ref]) == 1
    assert "private (set HF_TOKEN" in capsys.readouterr().err
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    assert main(["models", "info", ref]) == 0
    assert any(s.authorization == "Bearer hf_secret" for s in fake_hub.seen)


def test_info_and_check_read_headers_without_downloading(fake_hub, tiny_models, tmp_path, capsys):
    info = run_json(capsys, "models", "info", f"hf:{REPO_ID}:Q4_K_M", "--json")
    assert info["file_size"] == tiny_models["a"].stat().st_size and info["n_tensors"] > 0
    sent = fake_hub.bytes_sent("tiny-Q4_K_M.gguf")
    assert 0 < sent <= hub.HEADER_READS[0] < tiny_models["a"].stat().st_size  # the header's bytes, not the model
    assert all(s.range for s in fake_hub.seen if s.method == "GET" and "/resolve/" in s.path)
    assert hub_blobs(tmp_path) == []  # nothing left in the cache
    code = main(["models", "check", "hf:someone/other-GGUF", f"hf:{REPO_ID}:Q4_K_M"])
    assert code == 1 and "incompatible" in capsys.readouterr().out
    assert fake_hub.bytes_sent("other-Q4_K_M.gguf") < tiny_models["other"].stat().st_size


def test_a_registered_model_not_cached_and_only_in_packages_is_not_cached(fake_hub, capsys):
    assert main(["models", "info", "smollm2-135m"]) == 1  # SPECLLAMA_CACHE is empty here
    err = capsys.readouterr().err
    assert "not cached" in err and "specllama models pull smollm2-135m" in err
    assert fake_hub.seen == []  # its source is the package registry: the hub is not asked


def test_a_cut_download_resumes_where_it_stopped(fake_hub, tiny_models, tmp_path, capsys):
    """The connection drops after a third of the file; huggingface_hub asks for the rest from the
    last chunk it wrote (10 MB chunks) instead of starting over."""
    size = tiny_models["a"].stat().st_size
    fake_hub.cut_after["tiny-Q4_K_M.gguf"] = size // 3
    answer = run_json(capsys, "run", "-m", f"hf:{REPO_ID}:Q4_K_M", "--no-draft", "-n", "1", "-c", "256", "--json", "hi")
    assert answer["tokens"] >= 1
    gets = [s for s in fake_hub.seen if s.method == "GET" and s.path.endswith("tiny-Q4_K_M.gguf")]
    assert [s.range is None for s in gets] == [True, False], gets
    resumed_at = int(gets[1].range.removeprefix("bytes=").rstrip("-"))
    assert 0 < resumed_at <= size // 3
    assert fake_hub.bytes_sent("tiny-Q4_K_M.gguf") == size + size // 3 - resumed_at  # not all of it twice
    assert hub_blobs(tmp_path)[0].read_bytes() == tiny_models["a"].read_bytes()


def test_models_add_and_rm_for_a_hub_model_and_a_path(fake_hub, tiny_models, tmp_path, capsys):
    assert main(["models", "add", "tiny8", f"hf:{REPO_ID}:Q8_0", "--role", "draft"]) == 0
    assert "registered in" in capsys.readouterr().out
    user_file = tmp_path / "config" / "specllama" / "models.toml"
    assert 'repo = "someone/tiny-GGUF"' in user_file.read_text() and fake_hub.bytes_sent("tiny-Q8_0.gguf") == 0
    listed = {m["name"]: m for m in run_json(capsys, "models", "list", "--json")["models"]}
    assert listed["tiny8"]["cached"] is False and listed["tiny8"]["role"] == "draft"
    assert main(["models", "pull", "tiny8", "--from-hub"]) == 0  # asked for: downloaded, into the hub cache
    capsys.readouterr()
    listed = {m["name"]: m for m in run_json(capsys, "models", "list", "--json")["models"]}
    assert listed["tiny8"]["cached"] and listed["tiny8"]["disk"] == tiny_models["b"].stat().st_size
    assert main(["models", "add", "tiny8", str(tiny_models["a"])]) == 1  # taken
    capsys.readouterr()

    assert main(["models", "rm", "tiny8"]) == 0
    out = capsys.readouterr().out
    assert f"freed {tiny_models['b'].stat().st_size / 1e6:,.0f} MB" in out and "entry removed" in out
    assert hub_blobs(tmp_path) == [] and "tiny8" not in user_file.read_text()

    assert main(["models", "add", "mine", str(tiny_models["a"])]) == 0
    assert main(["models", "rm", "mine"]) == 0
    out = capsys.readouterr().out
    assert "is your file: not deleted" in out and tiny_models["a"].is_file()
    assert main(["models", "rm", "mine"]) == 1  # gone from the registry


def test_an_unreachable_hub_ends_with_one_line_and_no_retry_chatter(monkeypatch, capsys, tmp_path):
    """Issue 41: `show hf:...` printed huggingface_hub's retry warnings between its own lines."""
    import huggingface_hub.utils._http as hub_http

    monkeypatch.setattr(hub_http.time, "sleep", lambda seconds: None)  # its backoff: 23 s of waiting
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert main(["show", "hf:someone/x-GGUF:Q4_K_M"]) == 1
    err = capsys.readouterr().err
    assert "Retrying" not in err and "thrown while requesting" not in err
    assert err.strip().splitlines() == [line for line in err.strip().splitlines() if line.startswith("specllama")]
