"""The suffix drafter on the engine's protocol, in the engine, and its CLI wiring. Pure Python: the
engine runs on tests/support/fake_llm.py's FakeContext. (What its policies do with its drafts, and
`--drafter auto`'s choice: tests/unit/test_policies.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from specllama.decoding.acceptance import Calibrator, PositionAcceptance
from specllama.decoding.cost.online import Prior, StepCosts
from specllama.decoding.drafters import DraftRequest, ModelDrafter
from specllama.decoding.engine import Engine, GenerationConfig, Request
from specllama.decoding.events import DoneEvent, TokenEvent
from specllama.decoding.policy.free_drafts import CERTAIN_FLOOR, cut_free
from specllama.decoding.request import drafter_name
from specllama.decoding.sampling import SamplingParams
from specllama.decoding.suffix_drafter import SuffixDrafter
from specllama.decoding.suffix_groups import DRAFT_GROUPS
from tests.support.fake_llm import VOCAB, FakeClock, FakeContext, counting_rule, judged, noisy_rule

FLAT = lambda n: 1.0 if 1 <= n <= 16 else None  # noqa: E731  verifying is free: any likely draft pays
STEEP = lambda n: 1 + 0.8 * (n - 1) if 1 <= n <= 16 else None  # noqa: E731  each extra verified token: 0.8


def ask(seq, committed, k=8, kk="auto"):
    return DraftRequest(seq, list(committed), k, GenerationConfig(k=kk), np.random.default_rng(0))


def sent(proposal, ratio):
    """What -k auto sends of a lone sequence's suffix proposal (policy/confident_auto.py's cut)."""
    return cut_free(proposal, ratio)


# ---- the suffix drafter -------------------------------------------------------------------

def test_each_sequence_drafts_from_its_own_text_only():
    d = SuffixDrafter()
    a = [1, 2, 3, 4, 5, 9, 1, 2, 3]
    b = [1, 2, 3, 7, 8, 9, 1, 2, 3]
    d.prefill(0, a)
    d.prefill(1, b)
    pa, pb = d.propose([ask(0, a, 2), ask(1, b, 2)])
    assert list(pa.tokens) == [4, 5] and list(pb.tokens) == [7, 8]
    assert pa.source == pb.source == "suffix" and pa.q is None
    assert len(pa.confidence) == 2 and all(0 < c < 1 for c in pa.confidence)


def test_a_finished_sequence_is_drafted_from_by_later_prompts():
    d = SuffixDrafter()
    answer = [40, 41, 42, 43, 44, 45]
    first = [20, 21, 22] + [30, 31] + answer
    d.prefill(0, first[:5])
    d.propose([ask(0, first)])
    d.finish(0, first)
    later = [25, 26, 30, 31]  # another prompt in another slot, same lead-in
    p = d.propose([ask(1, later, 5)])[0]
    assert list(p.tokens) == answer[:5] and p.where == "history"
    d.reset()  # the engine's "forget everything" (between benchmark runs): no history any more
    assert d.propose([ask(1, later, 5)])[0].tokens == ()


def test_history_is_bounded_and_drops_the_oldest_first():
    d = SuffixDrafter(history_tokens=300)
    for i in range(10):
        d.finish(0, [100 + i] * 3 + list(range(i * 50, i * 50 + 50)))
    assert d.history.retained_tokens <= 300
    assert d.propose([ask(1, [100, 0, 1, 2], 3)])[0].tokens == ()  # the first job is gone
    assert d.propose([ask(1, [100, 450, 451], 3)])[0].tokens == (452, 453, 454)  # the last is kept


def test_observe_feeds_the_calibrator_and_raises_the_draft_length():
    cal = Calibrator(groups=DRAFT_GROUPS, prior_weight=1.0)
    d = SuffixDrafter(calibrator=cal)
    text = list(range(10, 30)) + list(range(10, 14))  # one earlier occurrence: raw confidence 0.5
    assert sent(d.propose([ask(0, text)])[0], STEEP).tokens == ()  # at 0.5 nothing pays at 0.8 a token
    flat = SuffixDrafter(calibrator=cal)
    for _ in range(30):
        p = sent(flat.propose([ask(0, text)])[0], FLAT)
        assert p.tokens
        flat.observe(0, judged(p, (1.0,) * len(p.tokens)))  # all accepted
    assert sum(r.count for r in cal.report()) >= 30
    assert sent(d.propose([ask(0, text)])[0], STEEP).tokens  # now the calibrated confidence says it pays


def test_a_cold_drafter_trusts_a_long_lone_match_and_not_a_short_one():
    """Before any draft was judged, a lone earlier occurrence (raw 0.5) is priced by how much of it
    matched: an agent's re-sent file, matched 18 tokens deep, is a copy in progress (observed 0.95
    accepted); two matched tokens are a guess. Without the floors both were 0.55 and neither drafted."""
    half = lambda n: 1 + 0.5 * (n - 1) if 1 <= n <= 16 else None  # noqa: E731  T(2)/T(1) = 1.5
    body = list(range(100, 140))
    long_copy = body + body[:18]
    short = body + body[:2]
    assert sent(SuffixDrafter().propose([ask(0, long_copy)])[0], half).tokens[:2] == tuple(body[18:20])
    assert sent(SuffixDrafter().propose([ask(0, short)])[0], half).tokens == ()
    unfloored = SuffixDrafter(calibrator=Calibrator(groups=DRAFT_GROUPS))
    assert sent(unfloored.propose([ask(0, long_copy)])[0], half).tokens == ()  # what the floors change


def test_a_long_copy_is_sent_whatever_the_costs_say_and_loses_the_claim_when_the_text_fails_it():
    """A 16+ token match is a copy in progress (Proposal.certain): even where the step costs say no
    batch pays (one noisy step can make them look so, and then no draft would ever correct them),
    it is sent; a short match is not; a text whose drafts keep failing loses the claim (its own
    record, acceptance.TextRecord)."""
    dear = lambda n: float(n) if 1 <= n <= 16 else None  # noqa: E731  T(n) = n * T(1): nothing pays
    body = list(range(100, 140))
    long_copy, short = body + body[:18], body + body[:9]
    proposal = SuffixDrafter().propose([ask(0, long_copy)])[0]
    assert proposal.certain == len(proposal.tokens) == 8
    assert list(sent(proposal, dear).tokens) == body[18:18 + CERTAIN_FLOOR]  # the first ones, whatever the costs
    medium = SuffixDrafter().propose([ask(0, short)])[0]
    assert medium.certain == 0 and sent(medium, dear).tokens == ()
    failing = SuffixDrafter()
    proposal = failing.propose([ask(0, long_copy)])[0]
    for _ in range(10):
        failing.observe(0, judged(proposal.keep(1), (0.0,)))  # rejected, step after step
    assert failing.propose([ask(0, long_copy)])[0].certain == 0


def test_a_corpus_is_drafted_from_and_survives_reset(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("alpha beta gamma delta\n" * 3, encoding="utf-8")
    words: dict[str, int] = {}
    d = SuffixDrafter()
    assert d.load_corpus(path, lambda s: [words.setdefault(w, len(words)) for w in s.split()]) == 12
    d.reset()
    p = d.propose([ask(0, [99, words["alpha"], words["beta"]], 2)])[0]
    assert list(p.tokens) == [words["gamma"], words["delta"]] and p.where == "corpus"


def test_an_unreadable_corpus_is_one_clear_line(tmp_path):
    from specllama.decoding.suffix_drafter import DraftCorpusError
    with pytest.raises(DraftCorpusError, match=r"cannot read draft corpus .*missing\.txt") as e:
        SuffixDrafter().load_corpus(tmp_path / "missing.txt", str.split)
    assert "\n" not in str(e.value)
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(DraftCorpusError, match="not UTF-8"):
        SuffixDrafter().load_corpus(binary, str.split)


# ---- in the engine: output unchanged --------------------------------------------------------

def periodic_rule(period=(3, 9, 4, 17, 5, 11, 8)):
    """Greedy next token: the one after the last in a fixed cycle, so the text repeats itself."""
    def rule(tokens):
        row = np.zeros(VOCAB, dtype=np.float32)
        last = tokens[-1]
        row[period[(period.index(last) + 1) % len(period)] if last in period else period[0]] = 5.0
        return row
    return rule


def run(rule, drafter_name_, drafters, prompt, k="auto", max_tokens=40, acceptance=None):
    """On virtual time where a decode costs 1 s whatever its rows (verifying is free), so what the
    planner sends does not depend on this machine's load."""
    clock = FakeClock()
    engine = Engine(FakeContext(rule, clock=clock, cost=lambda rows: 1.0), drafters, acceptance, clock=clock)
    events = list(engine.generate(prompt, GenerationConfig(drafter=drafter_name_, k=k, max_tokens=max_tokens)))
    return [e.id for e in events if isinstance(e, TokenEvent)], events[-1].summary, events


@pytest.mark.parametrize("rule", [periodic_rule(), noisy_rule(3), counting_rule()])
@pytest.mark.parametrize("name", ["suffix", "auto"])
def test_greedy_text_is_plain_decodings(rule, name):
    prompt = [3, 9, 4, 17, 5, 11, 8, 3, 9]
    plain, _, _ = run(rule, "none", {}, prompt, k=0)
    ids, summary, events = run(rule, name, {"suffix": SuffixDrafter()}, prompt)
    assert ids == plain
    if rule.__qualname__.startswith("periodic"):  # the text repeats: the suffix drafter pays
        assert summary.drafted_by.get("suffix", 0) > 0 and summary.accepted_by["suffix"] > 10
        assert {e.source for e in events if isinstance(e, TokenEvent) and e.origin == "draft"} == {"suffix"}
        assert summary.steps < len(ids)


def test_several_sequences_at_once_keep_plain_text_and_share_history():
    rule = periodic_rule()
    prompts = [[3, 9, 4], [17, 5, 11], [8, 3, 9], [4, 17, 5]]
    plain = [run(rule, "none", {}, p, k=0, max_tokens=20)[0] for p in prompts]
    suffix = SuffixDrafter()
    engine = Engine(FakeContext(rule, n_seq_max=2), {"suffix": suffix})
    config = GenerationConfig(drafter="suffix", max_tokens=20)
    got: dict[int, list[int]] = {i: [] for i in range(len(prompts))}
    for tag, event in engine.run_many([Request(p, config, i) for i, p in enumerate(prompts)], parallel=2):
        if isinstance(event, TokenEvent):
            got[tag].append(event.id)
    assert [got[i] for i in range(len(prompts))] == plain
    assert len(suffix.history.documents) - 1 == len(prompts)  # each finished text joined the history


def test_sampled_text_under_auto_follows_the_target_distribution():
    """Sampling stays exact with suffix drafts (deterministic proposals, q = None): over many seeds
    the first three tokens' joint frequencies match the target's own Markov chain (chi-square at
    alpha = 1e-3, as tests/unit/test_verify.py), while most tokens come from accepted drafts."""
    from tests.support.chi_square import follows
    cycle = {1: 2, 2: 3, 3: 1}

    def markov(tokens):  # next token: the cycle's with p ~ 0.79, the two others ~ 0.105 each
        row = np.full(VOCAB, -np.inf, dtype=np.float32)
        row[[1, 2, 3]] = 0.0
        row[cycle.get(tokens[-1], 1)] = 2.0
        return row
    p_next = {t: np.exp(markov([t])[[1, 2, 3]]) / np.exp(markov([t])[[1, 2, 3]]).sum() for t in (1, 2, 3)}
    prompt = [1, 2, 3] * 4  # the cycle, so the suffix drafter drafts it
    suffix = SuffixDrafter()
    clock, costs = FakeClock(), StepCosts(Prior(FLAT, 1.0, learned=True))
    # Verifying is free (a decode costs 1 s of virtual time, whatever its rows): suffix drafts pay.
    engine = Engine(FakeContext(markov, clock=clock, cost=lambda rows: 1.0), {"suffix": suffix}, costs=costs, clock=clock)
    counts, drafted, accepted = np.zeros(27, np.int64), 0, 0
    for seed in range(1500):
        config = GenerationConfig(drafter="auto", k="auto", max_tokens=3,
                                  sampling=SamplingParams(temperature=1.0, seed=seed))
        events = list(engine.generate(prompt, config))
        a, b, c = [e.id - 1 for e in events if isinstance(e, TokenEvent)][:3]
        counts[a * 9 + b * 3 + c] += 1
        drafted, accepted = drafted + events[-1].summary.drafted, accepted + events[-1].summary.accepted
    expected = [p_next[3][a] * p_next[a + 1][b] * p_next[b + 1][c] for a in range(3) for b in range(3) for c in range(3)]
    ok, statistic, df = follows(counts, expected)
    assert ok, (statistic, df)
    assert accepted > 1500 and drafted > accepted  # drafts were made, accepted and rejected


def test_auto_with_a_real_model_drafter_keeps_greedy_text():
    rule = noisy_rule(5)
    prompt = [5, 6, 7]
    plain, _, _ = run(rule, "none", {}, prompt, k=0)
    drafters = {"suffix": SuffixDrafter(), "model": ModelDrafter(FakeContext(counting_rule()))}
    ids, summary, _ = run(rule, "auto", drafters, prompt, acceptance={"model": PositionAcceptance(FLAT, 0.05, k_max=4)})
    assert ids == plain and summary.drafted_by.get("model", 0) > 0


# ---- the command line ----------------------------------------------------------------------

def parse(*argv):
    from specllama.cli.main import build_parser
    return build_parser().parse_args(list(argv))


def test_cli_drafter_names_and_the_lookup_alias():
    assert parse("run", "x").drafter == "auto"
    assert parse("batch", "f", "-o", "o.jsonl").drafter == "auto"
    assert parse("run", "--drafter", "suffix", "x").drafter == "suffix"
    assert parse("run", "--drafter", "lookup", "x").drafter == "suffix"
    assert drafter_name("lookup") == "suffix" and GenerationConfig(drafter="lookup").drafter == "suffix"
    with pytest.raises(SystemExit):
        parse("run", "--drafter", "ngram", "x")


def test_cli_load_options_for_auto_and_corpus(tmp_path):
    from specllama.cli.options import resolved_for
    from specllama.decoding.suffix_drafter import DraftCorpusError
    corpus = tmp_path / "c.txt"
    corpus.write_text("some code\n", encoding="utf-8")
    opts = resolved_for(parse("run", "--draft-corpus", str(corpus), "x")).load
    assert opts.load_draft and opts.draft_if_pays and opts.draft_corpus == str(corpus)
    with pytest.raises(DraftCorpusError):  # before any model is loaded
        resolved_for(parse("batch", "f", "-o", "o", "--draft-corpus", str(tmp_path / "none.txt")))
    assert parse("bench", "--prompts", "p", "--draft-corpus", "c").draft_corpus == "c"
    opts = resolved_for(parse("run", "--drafter", "model", "x")).load
    assert opts.load_draft and not opts.draft_if_pays
    assert not resolved_for(parse("run", "--drafter", "suffix", "x")).load.load_draft


def test_help_says_lookup_is_an_alias(capsys):
    with pytest.raises(SystemExit):
        parse("run", "--help")
    out = " ".join(capsys.readouterr().out.split())
    assert "'lookup' is an alias" in out and "--draft-corpus" in out


def test_a_missing_corpus_is_one_error_line_before_any_model(tmp_path, capsys, monkeypatch):
    """The corpus is checked before the models load; the CLI says what is wrong in one line."""
    from specllama.cli import main as cli_main
    from specllama.runtime.loaded import Runtime

    def load(self, *a):  # must not be reached: the corpus is checked first
        raise AssertionError("models loaded before the corpus was checked")

    monkeypatch.setattr(Runtime, "_load", load)
    code = cli_main.main(["run", "--draft-corpus", str(tmp_path / "nope.txt"), "hi"])
    err = capsys.readouterr().err
    assert code != 0 and err.startswith("specllama: error: cannot read draft corpus") and err.count("\n") == 1


def test_the_tui_colours_suffix_and_model_drafts_differently():
    from specllama.tui.streaming import token_origin
    from specllama.tui.widgets.chat_message import ORIGIN_LABELS, ORIGIN_STYLES

    suffix, model = token_origin("draft", "suffix"), token_origin("draft", "model")
    assert ORIGIN_STYLES[suffix] != ORIGIN_STYLES[model]
    assert token_origin("target", "") == "target" and token_origin("draft", "other") == "draft"
    assert {"suffix", "model"} <= ORIGIN_LABELS.keys() and ORIGIN_LABELS.keys() <= ORIGIN_STYLES.keys()


def test_stats_show_tokens_per_source_and_the_calibration():
    from types import SimpleNamespace

    from specllama.decoding.events import Summary
    from specllama.runtime.stats import format_summary

    suffix = SuffixDrafter()
    text = list(range(10, 30)) + list(range(10, 14))
    p = suffix.propose([ask(0, text, 4)])[0]
    suffix.observe(0, judged(p, (1.0, 1.0, 0.0)))
    s = Summary(drafter="auto", tokens=10, steps=4, drafted=6, accepted=4,
                drafted_by={"suffix": 4, "model": 2}, accepted_by={"suffix": 2, "model": 2})
    info = SimpleNamespace(line=lambda config: "target t", load_s=1.5)
    session = SimpleNamespace(describe=lambda: info, suffix_calibration=suffix.calibrator.report, costs=StepCosts(),
                              llama_decode_time=dict, drafter_note=lambda summary: None)
    text_out = format_summary(s, session, GenerationConfig(), full=True)
    assert "4/6 drafts accepted (model 2/2, suffix 2/4)" in text_out.splitlines()[0]
    assert text_out.splitlines()[1].startswith("load 1.5 s · prompt 0 tokens")
    assert "k auto (mean drafted 1.50 a step)" in text_out  # not the cap the engine offered
    # one judged token per draft group: the 1st and 2nd right, the 3rd wrong (a 4-token match)
    assert "suffix calibration" in text_out and "match 3-7, 2nd token raw 0.5-0.6" in text_out
    assert "match 3-7, 3-4th token raw 0.5-0.6: predicted 0.60 / observed 0.00 (n=1)" in text_out


def test_a_batch_drafts_later_prompts_from_earlier_answers():
    """Every answer is the same (as extraction prompts over similar records are): the first is
    decoded plainly, the later ones are drafted from it (cross-request drafting)."""
    def rule(tokens):
        row = np.zeros(VOCAB, dtype=np.float32)
        last = tokens[-1]
        row[0 if last == 28 else last + 1 if 20 <= last < 28 else 20] = 5.0  # 20..28, then the end
        return row
    from specllama.decoding.policy.draft_ramp import FIRST
    suffix = SuffixDrafter()
    clock = FakeClock()  # a decode costs 1 s of virtual time, whatever its rows: verifying is free
    engine = Engine(FakeContext(rule, n_seq_max=1, clock=clock, cost=lambda rows: 1.0), {"suffix": suffix},
                    costs=StepCosts(Prior(FLAT, 1.0, learned=True)), clock=clock)
    config = GenerationConfig(drafter="suffix", max_tokens=20)
    prompts = [[1, 2], [3, 4], [5, 6]]
    done = {tag: e.summary for tag, e in engine.run_many([Request(p, config, i) for i, p in enumerate(prompts)], 1)
            if isinstance(e, DoneEvent)}
    assert [done[i].text for i in range(3)] == ["".join(f"<{t}>" for t in range(20, 29))] * 3
    assert done[0].drafted == 0 and done[0].steps == 10  # nothing to draft from yet
    # the first answer, drafted once two of its tokens match (MIN_MATCH): all but its first two, less
    # the one the target adds after the text's first draft, which the ramp holds to FIRST tokens
    assert FIRST == 4 and done[1].accepted_by["suffix"] == 6 and done[1].steps < 5
