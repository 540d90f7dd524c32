"""One load path: a command reads the registry once, plans once, and loads what the plan says (tiny models)."""

from __future__ import annotations

import json

from specllama.cli.main import main


def test_run_reads_the_registry_once(tiny_models, monkeypatch, capsys):
    """Options, the prompt's model-name hint and the load all use the registry the command read."""
    from specllama.models import registry

    reads: list[int] = []
    real = registry.load_registry

    def counted(*args, **kwargs):
        reads.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(registry, "load_registry", counted)
    # One word: the prompt is also checked against the registry's model names (cmd_run.model_name_hint).
    code = main(["run", "hello", "--target", str(tiny_models["a"]), "--draft", str(tiny_models["b"]),
                 "--max-tokens", "3", "--ctx", "256", "--json"])
    out = capsys.readouterr().out
    assert code == 0 and json.loads(out)["tokens"] == 3
    assert len(reads) == 1
