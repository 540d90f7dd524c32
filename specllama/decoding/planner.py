"""The decisions of a step: where each sequence's drafts come from and how many it sends.

Before drafting, `caps` bounds each sequence (its context, its max tokens, its K or the -k auto
ceiling, exact mode, a plain-decoding probe, sources benched by the realised check); `lengths`
chooses the -k auto lengths of drafters without their own confidence (the draft model), jointly
for every sequence on the live costs (cost/model.py). Drafters that give a confidence per token
(suffix, auto) report instead of deciding: the suffix drafter sends all it matched up to its cap,
and auto asks `choose_source` which of its sources to use. After drafting, `cut` is the one cut:
a free draft is cut where it pays (`free_length`), then, when several sequences share the decode
(a draft row delays every other sequence's token), every confident draft jointly on the batch's
costs, within exact mode's row limit. The rows a draft costs are always the verifier's own
(`batch_tokens`).

Checked against what it achieves: every PROBE_EVERY steps without a plain step, a lone -k auto
sequence decodes one step plainly, so T(1), the yardstick of every decision, stays current on a
drifting machine; a draft model that the estimates never let draft is tried now and then until
one draft has been verified (`trying`), so a prior that says batches are dear is put to the test;
and each sequence's realised speed per source (realised.py) benches a source that, on this text,
does worse than plain decoding, whatever the estimates say.
"""

from __future__ import annotations

from typing import AbstractSet, Sequence

from specllama.decoding.acceptance import PositionAcceptance
from specllama.decoding.cost.model import (
    LengthChoice,
    Ratio,
    Rows,
    best_length,
    causal_rows,
    choose_lengths,
    expected_tokens,
    fit_rows,
    rate,
)
from specllama.decoding.cost.online import StepCosts
from specllama.decoding.drafters import Proposal
from specllama.decoding.request import AUTO, K_AUTO_MAX
from specllama.decoding.sequence import SequenceState

PROBE_EVERY = 48  # a plain step at most this often costs < 1 % at 2x, and keeps T(1) fresh
TRY_DRAFT = 2  # the draft length of a try (Planner.trying): 3 rows, the smallest batch most drafts use
# A free draft is sent under -k auto only when it promises this much over plain decoding. Both
# sides of the promise are uncertain: T(2)/T(1) measured on this shared 2-core machine came out
# 1.31, 1.46, 1.54 and 1.67 on different runs, and a text's acceptance is known from a few drafts.
# On bench/prompts.jsonl the one-token guesses (match of 1-3 tokens, 25-45 % accepted) lost 5-13 %
# on the prose and SQL prompts at a 5 % margin; the copies that pay promise 1.2x and more.
MIN_GAIN = 1.15


def free_length(confidence: Sequence[float], ratio: Ratio, rows: Rows = causal_rows) -> int:
    """How much of a free draft (it cost no decode: the suffix drafter's) to send: the length where
    expected tokens per unit of verify time peak, if that promises MIN_GAIN; else 0."""
    return best_length(confidence, ratio, min_gain=MIN_GAIN, rows=rows)


def cut_free(proposal: Proposal, ratio: Ratio, rows: Rows = causal_rows) -> None:
    """Trim a free draft to its free_length, on the confidence its tokens came with."""
    known = (proposal.confidence or [])[:len(proposal.tokens)]
    proposal.tokens = proposal.tokens[:free_length(known, ratio, rows)]


def free_rate(confidence: Sequence[float], ratio: Ratio, rows: Rows = causal_rows) -> float:
    """Tokens per plain step of a free draft sent at its free_length; 1.0 (plain decoding) when
    none of it is worth sending."""
    n = free_length(confidence, ratio, rows)
    return (rate(expected_tokens(confidence[:n])[n], ratio, n, 0.0, rows(n)) or 1.0) if n else 1.0


def choose_source(suffix: Proposal, model: PositionAcceptance | None, cap: int, avoid: AbstractSet[str],
                  ratio: Ratio) -> tuple[str, int]:
    """`--drafter auto -k auto`'s choice for one sequence this step: ("suffix" | "model" | "none",
    the model's K). The source with the better expected rate, if it beats plain decoding (rate 1):
        suffix rate = E(n) / (T(n+1)/T(1))           its proposal at free_length (costs nothing)
        model rate  = E(K) / (K*c + T(K+1)/T(1))     the model's best K on this text (0: cannot pay)
    skipping sources the realised check benched for this text (`avoid`); `model` is the draft
    model's acceptance on this text, None without one."""
    model = model if "model" not in avoid else None
    model_k = min(model.choose(), cap) if model is not None else 0
    model_rate = (model.rate(model_k) or 1.0) if model_k else 1.0
    offered = (suffix.confidence or [])[:len(suffix.tokens)] if "suffix" not in avoid else []
    suffix_rate = free_rate(offered, ratio)
    if suffix_rate > max(1.0, model_rate):
        return "suffix", 0
    if model_rate > 1.0:
        return "model", model_k
    return "none", 0


class Planner:
    def __init__(self, costs: StepCosts, exact_rows: int | None = None):
        self.costs = costs
        self.exact_rows = exact_rows  # the most rows one decode may hold in exact mode
        self.drafted = False  # whether any step of this engine has verified a draft (see trying)

    def probing(self, running: Sequence[SequenceState]) -> bool:
        """Whether this step decodes plainly to measure T(1) again (one -k auto sequence alone,
        T(1) unobserved for PROBE_EVERY steps)."""
        if len(running) != 1 or running[0].config.k != AUTO:
            return False
        costs = self.costs
        return costs.steps > 0 and costs.steps - max(costs.last_t1_step, 0) >= PROBE_EVERY

    def trying(self, running: Sequence[SequenceState]) -> bool:
        """Whether this step drafts TRY_DRAFT tokens with the draft model although the estimates say
        no length pays: only while this engine has verified no draft at all and its costs were not
        learnt here before, at most once every PROBE_EVERY steps. Until then what a batch costs is
        the prior's word alone, and a prior that says batches are dear (a startup benchmark on a
        busy machine, or the 16-core machine's, which predicted 0.87x where auto ran at 1.27x) would
        never be put to the test: a fake backend with those costs drafted nothing with the model
        (tests/test_closed_loop.py). A try costs a step or two of every PROBE_EVERY at worst."""
        if self.drafted or len(running) != 1 or running[0].config.k != AUTO or running[0].acceptance is None:
            return False
        costs = self.costs
        return not costs.prior.learned and costs.steps % PROBE_EVERY == PROBE_EVERY // 2

    def caps(self, running: Sequence[SequenceState], target) -> list[int]:
        probe = self.probing(running)
        caps = []
        for seq in running:
            cap = 0
            benched = seq.config.k == AUTO and seq.drafter.name in seq.realised.avoid()
            if seq.may_draft and not probe and not benched:
                room = min(seq.verifier.max_k(target, seq.slot), seq.config.max_tokens - seq.summary.tokens - 1)
                most = seq.acceptance.k_max if seq.acceptance else K_AUTO_MAX if seq.config.k == AUTO else int(seq.config.k)
                cap = max(0, min(room, most))
            caps.append(cap)
        return caps

    def lengths(self, running: Sequence[SequenceState], caps: list[int]) -> list[int]:
        """Each sequence's draft length within its cap: a fixed K, a confident drafter's cap (its
        draft is cut after, in `cut`), or, for the draft model under -k auto, the best on its
        acceptance."""
        if not any(seq.acceptance for seq in running):
            return fit_rows(caps, self.exact_rows)
        if len(running) == 1:
            seq = running[0]
            k = seq.acceptance.choose() or (TRY_DRAFT if self.trying(running) else 0)
            return [min(k, caps[0])]
        choices = [LengthChoice(seq.acceptance.fast if seq.acceptance else [1.0] * cap,
                                seq.acceptance.c if seq.acceptance else 0.0, cap)
                   for seq, cap in zip(running, caps)]
        ks = choose_lengths(choices, self.costs.ratio, max_rows=self.exact_rows)
        # A fixed-K request keeps its K: the plan only sizes the -k auto ones around it.
        return fit_rows([cap if seq.acceptance is None else k for seq, cap, k in zip(running, caps, ks)],
                        self.exact_rows)

    def cut(self, running: Sequence[SequenceState], proposals: dict[int, Proposal]) -> None:
        """The one cut after drafting, under -k auto. A free draft comes as long as it matched (up
        to its cap) and is cut where it pays, on the sequence's own verifier's rows. In a batch,
        confident drafts are then cut jointly on the batch's costs, by the confidence each token
        came with (measured on bench/prompts_similar.jsonl at --parallel auto before this: drafts
        sized as if each sequence were alone made the job 0.89-1.05x of plain decoding's). Other
        drafts (a fixed K, the draft model under `--drafter model`) keep their planned length."""
        ratio = self.costs.ratio
        for seq in running:
            proposal = proposals[seq.slot]
            if proposal.free and proposal.tokens and seq.config.k == AUTO:
                cut_free(proposal, ratio, seq.verifier.batch_tokens)
        if len(running) < 2:
            return
        choices, fixed = [], []
        for seq in running:
            proposal = proposals[seq.slot]
            n = len(proposal.tokens)
            known = list(proposal.confidence or (seq.acceptance.fast if seq.acceptance else []))[:n]
            trimmable = seq.config.k == AUTO and getattr(seq.drafter, "confident", False) and len(known) == n > 0
            # A fixed draft's tokens count with what is known of them (an unknown one: not at all).
            choices.append(LengthChoice(known + [0.0] * (n - len(known)), 0.0, n))
            fixed.append(None if trimmable else n)
        if all(f is not None for f in fixed):
            return
        for seq, k in zip(running, choose_lengths(choices, ratio, max_rows=self.exact_rows, fixed=fixed)):
            proposals[seq.slot].tokens = proposals[seq.slot].tokens[:k]

    def judge_step(self, running: Sequence[SequenceState], sources: Sequence[str], emitted: Sequence[int],
                   seconds: float) -> None:
        """After a step: each lone -k auto sequence's realised speed with the source it used
        (a batch's step time is shared, so the check reads single-sequence steps only)."""
        self.drafted = self.drafted or any(sources)
        for seq in running:
            seq.realised.tick()
        if len(running) == 1 and running[0].config.k == AUTO:
            running[0].realised.observe(sources[0], emitted[0], seconds, self.costs.t1())
