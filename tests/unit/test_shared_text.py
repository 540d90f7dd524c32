"""bench's speed over the text a run shares with plain decoding (specllama/bench/shared_text.py): which
tokens are compared, whose times, and which runs are left out."""

from __future__ import annotations

import pytest

from specllama.bench.aggregate import config_summaries, prompt_results
from specllama.bench.configs import parse_configs
from specllama.bench.report import shared_text_lines
from specllama.bench.runner import RunRecord
from specllama.bench.shared_text import MIN_SHARED_TOKENS, shared_speeds
from specllama.decoding.engine import Summary

PLAIN, AUTO = parse_configs("none;auto:k=auto")
TEXT = list(range(100, 140))  # 40 tokens


def _run(config, prompt, ids, step_tokens, step_seconds) -> RunRecord:
    """A run whose steps emitted `step_tokens` tokens each, taking `step_seconds` each: per token, the
    seconds through its step (as runner.run_once records them)."""
    clock, seconds = 0.0, []
    for n, s in zip(step_tokens, step_seconds):
        clock += s
        seconds += [clock] * n
    assert len(seconds) == len(ids)
    return RunRecord(config, prompt, 0, Summary(tokens=len(ids)), list(ids), token_seconds=seconds)


def _plain(prompt="p", ids=TEXT, step=0.030) -> RunRecord:
    return _run(PLAIN, prompt, ids, [1] * len(ids), [step] * len(ids))


def test_a_run_with_plain_decodings_text_is_timed_over_all_of_it():
    # 40 tokens: 20 plain steps of 30 ms, then 5 drafting steps of 4 tokens at 60 ms: 0.9 s against 1.2 s
    auto = _run(AUTO, "p", TEXT, [1] * 20 + [4] * 5, [0.030] * 20 + [0.060] * 5)
    plain, speed = shared_speeds([_plain(), auto])
    assert plain is None  # plain decoding is not compared with itself
    assert speed.tokens == 40 and speed.whole
    assert speed.ratio == pytest.approx(1.2 / 0.9)


def test_a_parted_run_is_timed_up_to_where_it_parted_and_charged_its_whole_last_step():
    parted = TEXT[:25] + [7] * 15  # parts at token 25, then a text that would draft anything
    # 24 plain steps, then one step of 4 tokens (the 25th and three past the parting) at 80 ms, then fast steps
    auto = _run(AUTO, "p", parted, [1] * 24 + [4] + [12], [0.030] * 24 + [0.080, 0.001])
    speed = shared_speeds([_plain(), auto])[1]
    assert speed.tokens == 25 and not speed.whole
    # plain wrote 25 tokens in 0.75 s; the run needed 0.72 + 0.08 s: its fast tail after the parting is not counted
    assert speed.ratio == pytest.approx(0.75 / 0.80)


def test_a_run_that_parts_early_is_left_out_and_counted_as_such():
    early = TEXT[:MIN_SHARED_TOKENS - 1] + [7] * (40 - MIN_SHARED_TOKENS + 1)
    speed = shared_speeds([_plain(), _run(AUTO, "p", early, [1] * 40, [0.01] * 40)])[1]
    assert speed.tokens == MIN_SHARED_TOKENS - 1 and speed.ratio is None


def test_plain_decodings_time_is_the_median_of_its_runs_that_wrote_those_tokens():
    slow, fast, middle = _plain(step=0.040), _plain(step=0.020), _plain(step=0.030)
    other = _plain(ids=TEXT[:10] + [9] * 30, step=0.001)  # a plain run with another text (no seed) is not a yardstick
    auto = _run(AUTO, "p", TEXT, [1] * 40, [0.025] * 40)
    speed = shared_speeds([slow, other, fast, middle, auto])[-1]
    assert speed.ratio == pytest.approx(0.030 / 0.025)


def test_a_prompt_without_plain_runs_has_nothing_to_compare():
    assert shared_speeds([_plain("p"), _run(AUTO, "q", TEXT, [1] * 40, [0.03] * 40)])[1] is None


def test_a_run_that_stops_where_plain_goes_on_is_timed_over_its_own_text_but_is_not_whole():
    auto = _run(AUTO, "p", TEXT[:30], [1] * 30, [0.030] * 30)
    speed = shared_speeds([_plain(), auto])[1]
    assert speed.tokens == 30 and not speed.whole and speed.ratio == pytest.approx(1.0)


def test_the_summary_and_its_line_report_the_geometric_mean_the_worst_prompt_and_the_runs_left_out():
    runs = [_plain("p"), _plain("q"), _plain("r"),
            _run(AUTO, "p", TEXT, [1] * 40, [0.025] * 40),  # 1.2x
            _run(AUTO, "q", TEXT[:20] + [1] * 20, [1] * 40, [0.0375] * 40),  # 0.8x over 20 tokens
            _run(AUTO, "r", [1] * 40, [1] * 40, [0.01] * 40)]  # parted at once: left out
    shared = shared_speeds(runs)
    results = prompt_results(runs, [None] * len(runs), shared)
    by_prompt = {(r.config, r.prompt_id): r for r in results}
    assert by_prompt[("auto:k=auto", "q")].shared_tokens == 20
    assert by_prompt[("auto:k=auto", "r")].shared_speedup is None and by_prompt[("none", "p")].shared_speedup is None
    plain, auto = config_summaries([PLAIN, AUTO], runs, [None] * len(runs), results, None, {}, shared)
    assert plain.shared_runs is None
    assert auto.shared_geomean == pytest.approx((1.2 * 0.8) ** 0.5)
    assert auto.shared_min == pytest.approx(0.8) and auto.shared_min_prompt == "q"
    assert auto.shared_runs == {"whole": 1, "prefix": 1, "left_out": 1}
    assert shared_text_lines([plain, auto]) == [
        "over the text shared with plain decoding, auto:k=auto: 0.98x, worst prompt 0.80x (q); runs timed over "
        f"their whole text 1, up to where they parted 1, left out 1 (parted before token {MIN_SHARED_TOKENS})"]


def test_the_shared_text_is_the_common_prefix():
    def shared(plain, run):
        return shared_speeds([_run(PLAIN, "p", plain, [1] * len(plain), [0.01] * len(plain)),
                              _run(AUTO, "p", run, [1] * len(run), [0.01] * len(run))])[1].tokens

    assert shared([1, 2, 3], [1, 2, 4]) == 2 and shared([1], [1, 2]) == 1 and shared([], [1]) == 0
