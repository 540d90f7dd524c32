"""Each draft source's bet (runtime/source_bets.py): the acceptance a draft must reach on given
costs, and the policy's own constants as what it assumes."""

from __future__ import annotations

import pytest

from specllama.decoding.cost.model import expected_tokens_uniform
from specllama.decoding.suffix_groups import COLD_FLOORS
from specllama.runtime.source_bets import NEVER, UNKNOWN, bet_lines, source_bets


def steep(n: int) -> float:
    """A 2-core CPU's shape: each extra row 0.7 of a step up to 9 rows, then prefill-like 0.3."""
    return 1.0 + 0.7 * (min(n, 9) - 1) + 0.3 * max(0, n - 9)


def test_one_free_token_breaks_even_where_its_row_is_paid_for():
    suffix = source_bets(steep)[0]
    assert suffix.source == "suffix"
    # 1 + a tokens for T(2)/T(1) = 1.7 steps: a = 0.7.
    assert suffix.needs[1] == pytest.approx(0.7, abs=1e-6)
    assert expected_tokens_uniform(8, suffix.needs[8]) == pytest.approx(steep(9), rel=1e-6)


def test_a_long_copy_needs_more_per_token_on_a_steep_machine_and_never_beyond_what_it_can_repay():
    needs = source_bets(steep)[0].needs
    assert needs[1] < needs[2] < needs[4] < needs[8]
    flat = source_bets(lambda n: 1.0 + 0.02 * (n - 1))[0].needs  # a GPU-like shape: long drafts cheap
    assert flat[63] < needs[63]
    costly = source_bets(lambda n: 1.0 + 1.0 * (n - 1), 0.5, has_draft=True)
    assert costly[2].source == "model" and costly[2].needs[1] == NEVER  # 2 tokens for 2.5 steps at best


def test_unknown_costs_say_so_instead_of_guessing():
    curve = [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 6.0, 6.5, 7.0, 7.5, 8.0, 8.5, 9.0]
    bets = source_bets(lambda n: curve[n - 1] if n <= len(curve) else None, None, has_draft=True, has_mtp=True)
    suffix, _, model, mtp = bets
    assert isinstance(suffix.needs[15], float) and suffix.needs[31] == UNKNOWN  # 32 rows were never timed
    assert set(model.needs.values()) == {UNKNOWN} and mtp.source == "mtp"
    assert max(model.needs) == 8  # a model draft never goes past K_AUTO_MAX


def test_the_printed_assumptions_are_the_policys_own_constants(monkeypatch):
    import specllama.runtime.source_bets as bets_module

    text = "\n".join(bet_lines(source_bets(steep)))
    assert f"3-7: {COLD_FLOORS[1]:.0%}" in text and "never" not in text
    monkeypatch.setattr(bets_module, "COLD_FLOORS", (0.0, 0.5, 0.6, 0.7))
    assert "3-7: 50%" in "\n".join(bet_lines(bets_module.source_bets(steep)))
    monkeypatch.setattr(bets_module, "OWN_COLD_FLOORS", (0.0, 0.1, 0.6, 0.7))
    assert "(a match in the text's own output: 3-7: 10%," in "\n".join(bet_lines(bets_module.source_bets(steep)))


def test_where_going_back_to_plain_costs_a_draft_after_plain_steps_needs_more():
    flat = lambda n: 1.0 + 0.1 * (n - 1)  # noqa: E731  (an H100-like shape once its graphs are warm)
    plain = source_bets(flat)
    assert all(bet.needs_after_plain is None for bet in plain)
    suffix = source_bets(flat, switch=1.86)[0]
    assert suffix.needs == plain[0].needs  # a draft that follows a draft: as before
    # 1 + a tokens for 1.1 + 1.86 steps: a draft of one token after plain steps never pays...
    assert suffix.needs_after_plain[1] == NEVER
    # ... and a long copy needs more per token than it would inside a run of drafts
    assert suffix.needs_after_plain[15] > suffix.needs[15]
    assert suffix.to_dict()["break_even_after_plain"]["1"] == NEVER
    text = "\n".join(bet_lines(source_bets(flat, switch=1.86), 1.86))
    assert "costs +1.86 plain steps here" in text and "after plain steps n=1: never" in text
