"""Position-keyed sampling (decoding/position_streams.py): each position's draws come from its own
stream, deterministic drafts are judged by the target's own draw, the emitted tokens follow the target's
distribution exactly, and with a seed drafting leaves the sampled text as plain decoding writes it."""

from __future__ import annotations

import numpy as np
import pytest

from specllama.decoding.position_streams import PositionStreams
from specllama.decoding.sampling import SamplingParams
from specllama.decoding.suffix_drafter import SuffixDrafter
from specllama.decoding.target_rows import GivenProbabilities
from specllama.decoding.verify import verify_sampling
from tests.support.chi_square import follows
from tests.support.engines import generate
from tests.support.fake_llm import EOG, VOCAB, FakeContext

DRAWS = 40_000


def test_a_position_draws_the_same_whatever_was_drawn_before():
    streams = PositionStreams(7)
    g = streams.at(5)
    first = [g.random() for _ in range(6)] + [int(g.integers(1000))]
    streams.at(9).random()
    streams.at(2).integers(50, size=20)
    g = streams.at(5)
    assert [g.random() for _ in range(6)] + [int(g.integers(1000))] == first
    again = PositionStreams(7).at(5)
    assert again.random() == first[0]
    assert PositionStreams(8).at(5).random() != first[0]  # another seed
    assert PositionStreams(7).at(6).random() != first[0]  # another position


def test_without_a_seed_each_request_draws_afresh():
    assert PositionStreams(None).at(0).random() != PositionStreams(None).at(0).random()


def test_a_deterministic_draft_is_judged_by_the_draws_plain_decoding_makes():
    """The verdict is what plain decoding would draw at each position, the drafts kept up to the first
    token that is not what it draws: the same text, drafted or not."""
    rng = np.random.default_rng(1)
    for trial in range(300):
        p = GivenProbabilities(rng.dirichlet(np.full(6, 0.3), size=4))
        streams, start = PositionStreams(trial), int(rng.integers(0, 500))
        plain = [p.draw(i, streams.at(start + i)) for i in range(4)]
        draft = [plain[i] if rng.random() < 0.7 else int(rng.integers(6)) for i in range(3)]
        verdict = verify_sampling(draft, None, p, streams, start)
        kept = next((i for i, (x, y) in enumerate(zip(draft, plain)) if x != y), 3)
        assert (verdict.n_accepted, verdict.token, verdict.bonus) == (kept, plain[kept], kept == 3)
        assert verdict.odds == pytest.approx([p.prob(i, draft[i]) for i in range(min(kept + 1, 3))])


@pytest.mark.parametrize("fixed_draft", [0, 5, 7])  # likely, unlikely and impossible under p
def test_judged_by_draws_the_first_and_second_tokens_follow_p(fixed_draft):
    """Exactness: over many positions' streams, the first emitted token follows p's first row and the
    second (after an accepted first) its second row, whatever the deterministic draft proposes."""
    p = np.array([[0.40, 0.20, 0.15, 0.10, 0.08, 0.05, 0.02, 0.00],
                  [0.05, 0.10, 0.30, 0.25, 0.10, 0.10, 0.10, 0.00],
                  [0.125] * 8])
    streams = PositionStreams(11 + fixed_draft)
    first, second = np.zeros(8, np.int64), np.zeros(8, np.int64)
    for trial in range(DRAWS):
        verdict = verify_sampling([fixed_draft, 2], None, p, streams, 3 * trial)  # positions no trial shares
        emitted = [fixed_draft, 2][:verdict.n_accepted] + [verdict.token]
        first[emitted[0]] += 1
        if len(emitted) > 1:
            second[emitted[1]] += 1
    ok, statistic, df = follows(first, p[0])
    assert ok, f"first token: chi2={statistic:.1f} df={df}"
    if fixed_draft != 7:
        ok, statistic, df = follows(second, p[1])
        assert ok, f"second token: chi2={statistic:.1f} df={df}"


class SharedStreams(PositionStreams):
    """A wrong stream keying: the three positions a trial judges all draw from the first one's stream."""

    def at(self, position: int) -> np.random.Generator:
        return super().at(position - position % 3)


def test_the_check_fails_where_positions_share_their_draws():
    """The chi-square above can fail: a second position drawing with the first one's uniforms, given
    the first draft accepted (a draw in p's first half), lands in the first half of its own row."""
    p = np.array([[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5], [0.25] * 4])
    streams, second = SharedStreams(3), np.zeros(4, np.int64)
    for trial in range(4000):
        verdict = verify_sampling([0, 2], None, p, streams, 3 * trial)
        emitted = [0, 2][:verdict.n_accepted] + [verdict.token]
        if len(emitted) > 1:
            second[emitted[1]] += 1
    ok, _, _ = follows(second, p[1])
    assert not ok


def periodic_rule(tokens):
    """Peaked on a period of 4 tokens with room to stray: sampled at 0.7 the text mostly repeats itself
    (the suffix drafter drafts it) and now and then leaves the period (a draft is rejected)."""
    row = np.random.default_rng(len(tokens)).normal(0.0, 1.0, VOCAB).astype(np.float32)
    row[[3, 4, 5, 6][len(tokens) % 4]] += 3.0
    row[EOG] = -30.0  # no end: the whole answer is judged
    return row


def test_with_a_seed_suffix_drafts_leave_the_sampled_text_as_plain_decoding_writes_it():
    sampling = SamplingParams(temperature=0.7, seed=5)
    plain, _, _ = generate(FakeContext(periodic_rule), k=0, max_tokens=80, sampling=sampling)
    fixed, _, s = generate(FakeContext(periodic_rule), SuffixDrafter(), k=4, max_tokens=80, sampling=sampling)
    assert fixed == plain
    assert 0 < s.accepted < s.drafted  # drafts were kept and drafts were turned away
    auto, _, _ = generate(FakeContext(periodic_rule), SuffixDrafter(), k="auto", max_tokens=80, sampling=sampling)
    assert auto == plain
    other, _, _ = generate(FakeContext(periodic_rule), k=0, max_tokens=80,
                           sampling=SamplingParams(temperature=0.7, seed=6))
    assert other != plain  # the seed does decide the text

