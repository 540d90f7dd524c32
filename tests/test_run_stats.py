"""`run --stats` shows what a step costs by kind and rows, and how much of it is outside
llama_decode (tiny real models: the timings come from llama.cpp itself)."""

from __future__ import annotations

from specllama.cli.main import main
from specllama.decoding.engine import GenerationConfig
from specllama.runtime import LoadOptions, Runtime


def test_stats_show_time_inside_llama_decode_and_the_learnt_step_costs(tiny_models, capsys):
    argv = ["run", "hi", "--target", str(tiny_models["a"]), "--draft", str(tiny_models["b"]), "--drafter", "model",
            "-k", "3", "--max-tokens", "12", "--ctx", "256", "--stats=full"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "inside llama_decode" in err and "outside it" in err
    assert "step costs learnt here" in err and "4 rows" in err  # K = 3 verifies [last] + 3 drafts
    assert "draft decode" in err and "c = " in err
    assert "llama_decode since loading: target" in err and "draft " in err.split("llama_decode since loading")[1]


def test_a_steps_llama_time_is_part_of_its_time(tiny_models):
    opts = LoadOptions(target=str(tiny_models["a"]), draft=str(tiny_models["b"]), n_ctx=256)
    with Runtime(opts) as rt:
        summary = rt.generate(rt.prompt_tokens("hello"), GenerationConfig(drafter="model", k=2, max_tokens=10)).drain()
        total = summary.t_draft + summary.t_verify + summary.t_python
        assert 0 < summary.t_llama <= total
        assert rt.costs.samples(3) > 0 and rt.costs.draft_ratio() > 0  # learnt from these very steps
