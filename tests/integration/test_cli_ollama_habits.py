"""Ollama's and llm's habits: bare `specllama` says where to start, every --help starts with an
example, `pull` takes several names, `show` describes a model without loading it, `ps` asks a
running server (a real `specllama serve` on 127.0.0.1) what it has loaded, and `models list` says
what is downloaded and what it takes on disk."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from specllama.cli import cmd_ps
from specllama.cli.help_text import EXAMPLES, subcommands
from specllama.cli.main import build_parser, main
from specllama.models import store
from tests.support.live_serve import LiveServer, free_port

REPO = Path(__file__).resolve().parents[2]


def test_bare_specllama_prints_where_to_start_and_exits_0():
    done = subprocess.run([sys.executable, "-m", "specllama"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == ""
    starts = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("  specllama ")]
    assert starts == ["chat", "run", "serve"]


def test_every_commands_help_starts_with_one_example_of_itself():
    helps = list(subcommands(build_parser()))
    assert {" ".join(path) for path, _ in helps} == set(EXAMPLES)  # one each, none left over
    for path, parser in helps:
        after_usage = parser.format_help().split("\n\n", 1)[1]
        first = after_usage.splitlines()[0]
        assert first == f"example: {EXAMPLES[' '.join(path)]}", path
        assert first.removeprefix("example: specllama ").split()[:len(path)] == list(path)


@pytest.fixture
def two_small(tmp_path, monkeypatch):
    """Two registered models with local files (nothing to download) and one never fetchable."""
    files = {}
    for name in ("one", "two"):
        files[name] = tmp_path / f"{name}.gguf"
        files[name].write_bytes(b"GGUF" + bytes(60))
    user = tmp_path / "models.toml"
    user.write_text("".join(f'[models.{n}]\npath = "{p}"\n' for n, p in files.items())
                    + '[models.gone]\nfile = "gone.gguf"\nhub = { repo = "nobody/nothing", file = "gone.gguf" }\n')
    monkeypatch.setenv("SPECLLAMA_CONFIG", str(user))
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path / "cache"))
    return files


def test_pull_takes_several_names_and_checks_them_all_first(two_small, capsys, monkeypatch):
    assert main(["pull", "one", "two"]) == 0
    out = capsys.readouterr().out
    assert "one: already at" in out and "two: already at" in out
    monkeypatch.setattr(store, "ensure", lambda *a, **k: pytest.fail("nothing is fetched when a name is unknown"))
    assert main(["pull", "one", "nope"]) == 1
    assert "unknown model 'nope'" in capsys.readouterr().err


def test_pull_goes_on_after_a_failure_and_says_how_many_failed(two_small, capsys):
    assert main(["pull", "gone", "one"]) == 1  # a hub model without --from-hub cannot be fetched
    out, err = capsys.readouterr()
    assert "one: already at" in out  # the second was still done
    assert err.count("specllama: error: ") == 1 and "1 of 2 model(s) not pulled" in err


def test_show_describes_a_model_from_its_header(tiny_models, capsys):
    assert main(["show", str(tiny_models["a"])]) == 0
    out = capsys.readouterr().out
    for label in ("file", "size", "model", "quantization", "context", "tokenizer", "template"):
        assert f"  {label} " in out, label
    assert main(["show", str(tiny_models["a"]), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["context_length"] == 512 and shown["downloaded"] is True and shown["size"] > 0


def test_show_of_a_model_not_downloaded_says_how_to_get_it(two_small, capsys, monkeypatch):
    from specllama.errors import DownloadError
    from specllama.models import hub

    def offline(*a, **k):
        raise DownloadError("cannot read the header: offline")

    monkeypatch.setattr(hub, "header_copy", offline)
    assert main(["show", "gone"]) == 0
    out = capsys.readouterr().out
    assert "not downloaded: `specllama pull gone --from-hub`" in out and "header        not read: " in out


def test_models_list_says_what_is_downloaded_and_its_disk_use(tiny_models, tmp_path, monkeypatch, capsys):
    cache = tmp_path / "cache"
    user = tmp_path / "models.toml"
    user.write_text('[models.fetched]\nfile = "fetched.gguf"\nhub = { repo = "r/x", file = "fetched.gguf" }\n'
                    '[models.absent]\nfile = "absent.gguf"\nhub = { repo = "r/y", file = "absent.gguf" }\n')
    monkeypatch.setenv("SPECLLAMA_CONFIG", str(user))
    monkeypatch.setenv("SPECLLAMA_CACHE", str(cache))
    from specllama.models.registry import load_registry

    target = store.model_path(load_registry().model("fetched"))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(Path(tiny_models["a"]).read_bytes())
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    on_disk = f"{target.stat().st_size / 1e6:,.0f} MB"
    assert re.search(rf"^fetched +any +{on_disk} +yes +{on_disk} +hub ", out, re.M), out
    assert re.search(r"^absent +any +- +no +- +hub ", out, re.M), out
    assert "on disk for 1 downloaded model(s)" in out


@pytest.fixture(scope="module")
def server(tiny_models, tmp_path_factory):
    live = LiveServer(["--target", str(tiny_models["a"]), "--drafter", "suffix", "--ctx", "512", "--parallel", "2",
                       "--max-tokens", "8"], tmp_path_factory.mktemp("ps") / "serve.log", api_key="sk-ps")
    yield live
    assert live.stop() == 0, live.stderr()[-3000:]


def test_ps_shows_what_a_running_server_has_loaded_its_slots_and_speed(server, tiny_models, capsys):
    server.client().chat.completions.create(model="a", messages=[{"role": "user", "content": "hi"}], max_tokens=8)
    assert main(["ps", "--url", server.url, "--api-key", "sk-ps"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{server.url}  ok\n")
    assert f"model      {Path(tiny_models['a']).name}" in out
    assert "context    512 tokens a slot" in out and "slots      2 (0 active, 0 queued)" in out
    assert " tok/s now; " in out and "requests   1 " in out
    assert main(["ps", "--url", server.url, "--api-key", "sk-ps", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["tokens_generated"] >= 1 and shown["slots"] == 2 and shown["drafters"]


def test_ps_without_the_key_or_without_a_server_is_one_line(server, capsys, monkeypatch):
    monkeypatch.delenv("SPECLLAMA_API_KEY", raising=False)
    assert main(["ps", "--url", server.url]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "wants an API key" in err
    assert main(["ps", "--url", f"http://127.0.0.1:{free_port()}"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no server answers at" in err and "specllama serve" in err


def test_ps_reads_llama_servers_metric_names():
    seen = {"url": "u", "health": {"status": "ok"}, "props": {"total_slots": 4, "model_path": "/m/x.gguf",
            "default_generation_settings": {"n_ctx": 8192}},
            "metrics": cmd_ps.parse_metrics("# HELP x\nllamacpp:predicted_tokens_seconds 31.5\n"
                                            "llamacpp:requests_processing 1\nllamacpp:requests_deferred 0\n"
                                            "llamacpp:tokens_predicted_total 900\n")}
    shown = cmd_ps.summary(seen)
    assert (shown["n_ctx"], shown["slots"], shown["active"], shown["queued"]) == (8192, 4, 1, 0)
    assert "31.5 tok/s now; 900 tokens since start" in cmd_ps.text(shown)
