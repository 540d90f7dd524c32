"""Chained MTP heads (llama/mtp.py): a GGUF with several MTP layers drafts position i with head i,
as llama.cpp's draft-mtp does in its `chain_heads` mode, and never drafts deeper than its heads.
On the mimo2 toy (two heads, tests/support/toy_models.py). Random weights: greedy output with its drafts
must be plain greedy output in exact mode, alone and with several conversations in lockstep."""

from __future__ import annotations

import numpy as np
import pytest

from specllama.decoding.drafters import DraftRequest
from specllama.decoding.engine import Engine, GenerationConfig, TokenEvent
from specllama.decoding.mtp_drafter import MtpDrafter
from specllama.decoding.request import Request
from specllama.llama.context import DecodeContext
from specllama.llama.model import GGUFModel
from specllama.llama.mtp import MtpContext

PROMPT = "The quick brown fox jumps over the lazy dog. The quick brown fox"


@pytest.fixture(scope="module")
def chained(toy_models):
    return GGUFModel(toy_models["mimo2"], exact=True, load_mtp=True)


def engine(model, **ctx_args):
    ctx = DecodeContext(model, n_ctx=512, n_threads=1, exact=True, **ctx_args)
    return Engine(ctx, {"mtp": MtpDrafter(MtpContext(ctx))})


def test_a_model_with_two_heads_drafts_two_deep_one_head_a_position(chained):
    eng = engine(chained)
    mtp = eng.drafters["mtp"].mtp
    assert (mtp.heads, mtp.chained, mtp.max_depth) == (2, True, 2)
    prompt = chained.tokenize(PROMPT)
    eng.target.decode(prompt[:-1], logits="none")
    proposal, = eng.drafters["mtp"].propose([DraftRequest(0, prompt, 6, GenerationConfig(), np.random.default_rng(0))])
    assert len(proposal.tokens) == 2  # six asked, one a head
    # The second position came from the second head: drafting it with the first head's layer gives
    # another distribution (random weights: the two heads disagree).
    head0 = [(0, prompt[-1], len(prompt) - 1, None)]
    (first_logits, state), = mtp.draft_step(head0)
    (second_logits, _), = mtp.draft_step([(0, proposal.tokens[0], len(prompt), state)])  # chained: head 1
    mtp.drop_drafts(0, len(prompt) - 1)
    assert int(np.argmax(first_logits)) == proposal.tokens[0] and int(np.argmax(second_logits)) == proposal.tokens[1]
    mtp.chained = False  # the single-head protocol: head 0 again for the second position
    mtp.draft_step(head0)
    (unchained, _), = mtp.draft_step([(0, proposal.tokens[0], len(prompt), state)])
    mtp.drop_drafts(0, len(prompt) - 1)
    assert not np.allclose(unchained, second_logits)


@pytest.mark.parametrize("k", [1, 2, 6])
def test_greedy_output_with_chained_drafts_is_plain_greedy_output(toy_models, chained, k):
    prompt = chained.tokenize(PROMPT)
    plain_model = GGUFModel(toy_models["mimo2"], exact=True)
    plain_ctx = DecodeContext(plain_model, n_ctx=512, n_threads=1, exact=True)
    plain = [e.id for e in Engine(plain_ctx).generate(prompt, GenerationConfig(drafter="none", max_tokens=40)).tokens()[0]]
    events, summary = engine(chained).generate(prompt, GenerationConfig(drafter="mtp", k=k, max_tokens=40)).tokens()
    assert [e.id for e in events] == plain
    assert summary.drafted_by.get("mtp", 0) > 0 and summary.steps * min(k, 2) >= summary.drafted


def test_several_conversations_draft_through_the_chained_heads_together(chained):
    prompts = [chained.tokenize(f"{PROMPT} {i}") for i in range(3)]
    config = GenerationConfig(drafter="mtp", k=2, max_tokens=20)
    alone = [[e.id for e in engine(chained).generate(p, config).tokens()[0]] for p in prompts]
    together: dict[int, list[int]] = {i: [] for i in range(3)}
    for tag, event in engine(chained, n_seq_max=3).run_many([Request(p, config, tag=i) for i, p in enumerate(prompts)],
                                                            parallel=3):
        if isinstance(event, TokenEvent):
            together[tag].append(event.id)
    assert [together[i] for i in range(3)] == alone
