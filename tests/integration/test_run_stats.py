"""`run --stats` shows what a step costs by kind and rows, and how much of it is outside
llama_decode (tiny real models: the timings come from llama.cpp itself)."""

from __future__ import annotations

from specllama.cli.main import main
from specllama.decoding.engine import GenerationConfig
from specllama.runtime import LoadOptions, open_runtime


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
    with open_runtime(opts) as rt:
        summary = rt.generate(rt.prompt_tokens("hello"), GenerationConfig(drafter="model", k=2, max_tokens=10)).drain()
        total = summary.t_draft + summary.t_verify + summary.t_python
        assert 0 < summary.t_llama <= total
        assert rt.costs.samples(3) > 0 and rt.costs.draft_ratio() > 0  # learnt from these very steps


def test_the_headline_reads_as_a_user_reads_it():
    from specllama.decoding.cost.online import StepCosts
    from specllama.decoding.events import Summary
    from specllama.runtime.stats import headline, load_line

    costs = StepCosts()
    for _ in range(8):
        costs.record_step(1, 0.05)  # plain steps of this run: T(1) = 50 ms
    spec = Summary(drafter="auto", tokens=15, steps=10, drafted=8, accepted=5, t_generate=0.6, t_verify=0.45,
                   t_python=0.05, drafted_by={"suffix": 8}, accepted_by={"suffix": 5})
    # 10 steps made 15 tokens in 0.5 s of step time; plain decoding: 15 x 50 ms = 0.75 s.
    assert headline(spec, costs) == ("15 tokens in 0.6 s · 25.0 tok/s · 1.50x vs plain (estimated from this run's own "
                                     "costs) · 5/8 drafts accepted (suffix)")
    plain_like = Summary(drafter="auto", tokens=11, steps=10, t_generate=0.55, t_verify=0.45, t_python=0.05)
    assert "1.00x vs plain" in headline(plain_like, costs) and headline(plain_like, costs).endswith("no drafts")
    assert "vs plain" not in headline(Summary(drafter="none", tokens=3, steps=3, t_generate=0.1), costs)
    prompt = Summary(prompt_tokens=45, reused_tokens=5, t_prompt=0.8)
    assert load_line(2.34, prompt) == "load 2.3 s · prompt 45 tokens (5 reused) in 0.80 s, 50.0 tok/s"


def test_a_headline_before_any_plain_step_says_where_t1_came_from():
    from specllama.decoding.cost.online import Prior, StepCosts
    from specllama.decoding.events import Summary
    from specllama.runtime.stats import headline

    costs = StepCosts(Prior(t1_s=0.05, learned=True))
    costs.record_step(3, 0.08)
    s = Summary(drafter="suffix", tokens=6, steps=2, drafted=4, accepted=4, t_generate=0.2, t_verify=0.16,
                drafted_by={"suffix": 4}, accepted_by={"suffix": 4})
    assert "vs plain (estimated from earlier runs' costs here)" in headline(s, costs)
