"""`--drafter mtp`: the target's own MTP layer drafts (llama/mtp.py, decoding/mtp_drafter.py), on
the qwen35 toy, which carries one. Its drafts are llama.cpp's draft-mtp protocol's
(tests/support/mtp_reference.py); whatever they are, greedy output is plain greedy output in exact mode,
through the engine, a chat of several turns and serve. Random weights: its drafts are rarely
accepted, every rejection is a rollback of the hybrid cache and of the MTP cache beside it."""

from __future__ import annotations

import numpy as np
import pytest

from specllama.cli.main import main
from specllama.decoding.drafters import DraftRequest
from specllama.decoding.engine import Engine, GenerationConfig
from specllama.decoding.mtp_drafter import MtpDrafter
from specllama.llama.context import DecodeContext
from specllama.llama.model import GGUFModel
from specllama.llama.mtp import MtpContext
from specllama.runtime import LoadOptions, open_runtime
from tests.support.live_serve import LiveServer
from tests.support.mtp_reference import reference_drafts

PROMPT = "The quick brown fox jumps over the lazy dog. The quick brown fox"


@pytest.fixture(scope="module")
def mtp_model(toy_models):
    return GGUFModel(toy_models["qwen35"], exact=True, load_mtp=True)


def engine(model, **ctx_args):
    ctx = DecodeContext(model, n_ctx=512, n_threads=1, exact=True, **ctx_args)
    return Engine(ctx, {"mtp": MtpDrafter(MtpContext(ctx))})


def test_its_drafts_are_llama_cpps_draft_mtp_drafts(toy_models, mtp_model):
    prompt = mtp_model.tokenize(PROMPT)
    last, expected = reference_drafts(toy_models["qwen35"], prompt, 4)
    eng = engine(mtp_model)
    committed = prompt + [last]
    eng.target.decode(prompt, logits="none")  # as the engine leaves it: everything but the last token decoded
    drafter = eng.drafters["mtp"]
    proposal, = drafter.propose([DraftRequest(0, committed, 4, GenerationConfig(), np.random.default_rng(0))])
    assert list(proposal.tokens) == expected


@pytest.mark.parametrize("k", [1, 3, 6])
def test_greedy_output_with_mtp_drafts_is_plain_greedy_output(toy_models, mtp_model, k):
    prompt = mtp_model.tokenize(PROMPT)
    plain_model = GGUFModel(toy_models["qwen35"], exact=True)  # no MTP layers loaded, no MTP context
    plain_ctx = DecodeContext(plain_model, n_ctx=512, n_threads=1, exact=True)
    plain = [e.id for e in Engine(plain_ctx).generate(prompt, GenerationConfig(drafter="none", max_tokens=40)).tokens()[0]]
    events, summary = engine(mtp_model).generate(prompt, GenerationConfig(drafter="mtp", k=k, max_tokens=40)).tokens()
    assert [e.id for e in events] == plain
    assert summary.drafted_by.get("mtp", 0) > summary.accepted


def test_several_conversations_draft_from_the_mtp_layer_together(mtp_model):
    from specllama.decoding.engine import TokenEvent
    from specllama.decoding.request import Request

    prompts = [mtp_model.tokenize(f"{PROMPT} {i}") for i in range(3)]
    config = GenerationConfig(drafter="mtp", k=3, max_tokens=20)
    alone = [[e.id for e in engine(mtp_model).generate(p, config).tokens()[0]] for p in prompts]
    together: dict[int, list[int]] = {i: [] for i in range(3)}
    for tag, event in engine(mtp_model, n_seq_max=3).run_many([Request(p, config, tag=i) for i, p in enumerate(prompts)],
                                                               parallel=3):
        if isinstance(event, TokenEvent):
            together[tag].append(event.id)
    assert [together[i] for i in range(3)] == alone


def test_a_chat_of_several_turns_with_mtp_drafts(toy_models):
    def chat(drafter: str) -> list[str]:
        opts = LoadOptions(target=str(toy_models["qwen35"]), load_draft=False, load_mtp=drafter == "mtp", n_ctx=1024,
                           exact=True, threads=1)
        with open_runtime(opts) as rt:
            messages, answers = [], []
            for turn in range(4):
                messages.append({"role": "user", "content": f"Turn {turn}: tell me more."})
                summary = rt.generate(rt.chat_tokens(messages), GenerationConfig(drafter=drafter, k=3, max_tokens=12)).drain()
                answers.append(summary.text)
                messages.append({"role": "assistant", "content": summary.text})
            return answers

    assert chat("mtp") == chat("none")


def test_run_says_clearly_when_the_model_has_no_mtp_layers(toy_models, capsys):
    assert main(["run", "hi", "--target", str(toy_models["llama"]), "--drafter", "mtp", "-n", "4", "--ctx", "256"]) == 1
    err = capsys.readouterr().err
    assert "has no MTP (nextn) layers" in err and "the mtp drafter is not available" in err and "Traceback" not in err


def test_serve_drafts_with_mtp_and_answers_as_plain_decoding(toy_models, tmp_path):
    live = LiveServer(["--target", str(toy_models["qwen35"]), "--drafter", "mtp", "-k", "3", "--ctx", "1024",
                       "--parallel", "2", "--max-tokens", "16", "--exact"], tmp_path / "serve.log")
    try:
        client = live.client()
        messages = [{"role": "user", "content": "Say something."}]
        for turn in range(3):
            spec = client.chat.completions.create(model="toy", messages=messages, max_tokens=16, temperature=0)
            plain = client.chat.completions.create(model="toy", messages=messages, max_tokens=16, temperature=0,
                                                   extra_body={"drafter": "none"})
            assert spec.choices[0].message.content == plain.choices[0].message.content
            assert spec.model_extra["speculation"]["drafted_by"].get("mtp", 0) > 0
            messages += [{"role": "assistant", "content": spec.choices[0].message.content},
                         {"role": "user", "content": f"More, turn {turn}."}]
    finally:
        assert live.stop() == 0
    assert "Traceback" not in live.stderr()


def test_a_head_not_followed_catches_up_to_llama_cpps_drafts(toy_models, mtp_model):
    """Not followed (auto found it not paying), the head is fed nothing; asked to draft again, it
    feeds what it missed in one batch first, and drafts what llama.cpp's always-fed head drafts."""
    prompt = mtp_model.tokenize(PROMPT)
    last, expected = reference_drafts(toy_models["qwen35"], prompt, 4)
    eng = engine(mtp_model)
    drafter = eng.drafters["mtp"]
    drafter.follow(0, False)
    eng.target.decode(prompt, logits="none")
    assert drafter.mtp.feed_rows == 0
    drafter.follow(0, True)
    proposal, = drafter.propose([DraftRequest(0, prompt + [last], 4, GenerationConfig(), np.random.default_rng(0))])
    assert list(proposal.tokens) == expected and drafter.mtp.feed_rows == len(prompt)


def test_a_head_paused_longer_than_the_states_it_keeps_drafts_on_and_output_stays_plain(toy_models, mtp_model):
    from specllama.llama.mtp import KEEP_STATES

    prompt = mtp_model.tokenize(PROMPT * 12)
    assert len(prompt) > 2 * KEEP_STATES
    plain_model = GGUFModel(toy_models["qwen35"], exact=True)
    plain_ctx = DecodeContext(plain_model, n_ctx=512, n_threads=1, exact=True)
    plain = [e.id for e in Engine(plain_ctx).generate(prompt, GenerationConfig(drafter="none", max_tokens=24)).tokens()[0]]
    eng = engine(mtp_model)
    eng.drafters["mtp"].follow(0, False)  # the prompt is decoded unfollowed: its first states are gone by the draft
    events, summary = eng.generate(prompt, GenerationConfig(drafter="mtp", k=3, max_tokens=24)).tokens()
    assert [e.id for e in events] == plain
    assert summary.drafted_by.get("mtp", 0) > 0 and eng.drafters["mtp"].mtp.feed_rows < len(prompt)
