"""Hybrid and recurrent models through every front door: a long chat through the session, a
re-sent conversation through `specllama serve`, and `specllama run` (the toys of
tests/support/toy_models.py; their rollback itself is tested in test_hybrid_rollback.py)."""

from __future__ import annotations

import json

import pytest

from specllama.cli.main import main
from specllama.decoding.engine import GenerationConfig
from specllama.runtime import LoadOptions, Runtime, open_runtime
from tests.support.live_serve import LiveServer

TURNS = 20


def chat(rt: Runtime, drafter: str, turns: int) -> list:
    """A conversation of `turns` user messages, each answer added to the history as text (what a
    chat client sends back); returns each answer's summary."""
    messages, answers = [], []
    for turn in range(turns):
        # Earlier answers are quoted back, so the suffix drafter finds text to draft from.
        quote = answers[-1].text[:40] if answers else "the cat sat on the mat"
        messages.append({"role": "user", "content": f"Turn {turn}: say again '{quote}'"})
        summary = rt.generate(rt.chat_tokens(messages), GenerationConfig(drafter=drafter, k=3, max_tokens=12)).drain()
        answers.append(summary)
        messages.append({"role": "assistant", "content": summary.text})
    return answers


@pytest.mark.parametrize("arch", ["qwen35", "mamba"])
def test_a_long_chat_drafts_and_gives_plain_decodings_answers(toy_models, arch):
    opts = LoadOptions(target=str(toy_models[arch]), load_draft=False, n_ctx=2048, exact=True, threads=1)
    with open_runtime(opts) as rt:
        drafted = chat(rt, "suffix", TURNS)
        replayed = rt.target_ctx.replayed_tokens
    with open_runtime(opts) as rt:
        plain = chat(rt, "none", TURNS)
    assert [s.text for s in drafted] == [s.text for s in plain]
    assert 0 <= sum(s.accepted for s in drafted) < sum(s.drafted for s in drafted)  # drafts were rejected
    # Every later turn found the conversation so far in the cache: at least the turn before (but
    # its last token, which the answer's re-tokenized text may merge with), and part of the answer,
    # whose re-tokenized text differs from the tokens generated: the cache went back into it.
    assert all(s.reused_tokens >= p.prompt_tokens - 1 for s, p in zip(drafted[1:], drafted))
    assert replayed > 0


@pytest.fixture(scope="module")
def hybrid_server(toy_models, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve-hybrid") / "serve.log"
    live = LiveServer(["--target", str(toy_models["qwen35"]), "--no-draft", "--drafter", "suffix", "-k", "3",
                       "--ctx", "1024", "--parallel", "2", "--max-tokens", "16", "--exact"], log)
    yield live
    assert live.stop() == 0, live.stderr()[-3000:]
    assert "Traceback" not in live.stderr()


def test_a_resent_conversation_through_serve_reuses_the_hybrid_cache(hybrid_server):
    """An agent's requests: each re-sends the whole conversation. On a hybrid model the cached
    tail may differ from what comes back (the answer's re-tokenized text): no error, the answers
    plain decoding gives, and the shared turns come from the cache."""
    client = hybrid_server.client()
    messages = [{"role": "user", "content": "List three colours, then list them again."}]
    for turn in range(3):
        spec = client.chat.completions.create(model="toy", messages=messages, max_tokens=16, temperature=0)
        plain = client.chat.completions.create(model="toy", messages=messages, max_tokens=16, temperature=0,
                                               extra_body={"drafter": "none"})
        assert spec.choices[0].message.content == plain.choices[0].message.content
        if turn:
            assert spec.usage.prompt_tokens_details.cached_tokens > 0
        messages += [{"role": "assistant", "content": spec.choices[0].message.content},
                     {"role": "user", "content": f"And once more, turn {turn}."}]


@pytest.mark.parametrize("arch", ["qwen35", "lfm2", "mamba"])
def test_run_with_the_suffix_drafter_on_a_hybrid_or_recurrent_model(toy_models, arch, tmp_path, capsys):
    """`specllama run --drafter suffix` drafts, has drafts rejected, and prints plain decoding's
    text. A random model never repeats itself, so the drafts come from a corpus holding its plain
    answer with words inserted every few words (where drafts go wrong)."""
    common = ["alpha beta gamma", "--target", str(toy_models[arch]), "--max-tokens", "48", "--ctx", "512", "--exact",
              "--json"]
    assert main(["run", *common, "--drafter", "none"]) == 0
    plain = json.loads(capsys.readouterr().out)
    words = plain["text"].split(" ")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(" ".join(w + (" and then" if i % 6 == 5 else "") for i, w in enumerate(words)))
    assert main(["run", *common, "--drafter", "suffix", "-k", "3", "--draft-corpus", str(corpus)]) == 0
    out, err = capsys.readouterr()
    spec = json.loads(out)
    assert "Traceback" not in err
    assert spec["text"] == plain["text"]
    assert 0 < spec["accepted"] < spec["drafted"]


@pytest.mark.parametrize("arch,said,depth", [("qwen35", False, 6), ("mamba", True, 0), ("llama", None, 0)])
def test_loading_says_how_a_model_takes_drafts_back(toy_models, arch, said, depth):
    """One line where drafts cost more than usual (checkpoints); a verbose one for snapshots, which
    exact mode sizes to the longest draft it verifies (7 rows: 6 drafts); nothing for attention."""
    notices = []
    with open_runtime(LoadOptions(target=str(toy_models[arch]), load_draft=False, n_ctx=256, exact=True, threads=1),
                 status=notices.append) as rt:
        assert rt.target_ctx.snapshot_depth == depth
    rollback = [n for n in notices if n.fact == "rollback"]
    if said is None:
        assert not rollback
    else:
        assert len(rollback) == 1 and rollback[0].verbose_only is not said and arch in rollback[0].text
