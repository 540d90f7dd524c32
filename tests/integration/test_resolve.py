"""Options resolved once: argparse gives a frozen Intent, `resolve(intent, registry, cache)` decides
models, drafter, seed and limits and returns what it wants said; no command writes to its namespace."""

from __future__ import annotations

import random

import pytest

from specllama.cli.intent import Intent
from specllama.cli.main import build_parser, main
from specllama.cli.resolve import resolve
from specllama.errors import UsageError
from specllama.models.registry import load_registry


def parse(*argv):
    return build_parser().parse_args(list(argv))


class Cache:
    """The model cache as resolve sees it: asked only for a target named alone with the model drafter."""

    def __init__(self, draft: str | None = None):
        self.draft, self.asked = draft, []

    def draft_for(self, target, registry):
        self.asked.append(target)
        return self.draft


@pytest.fixture(scope="module")
def registry():
    return load_registry()


def resolved(registry, *argv, cache=None, **kw):
    args = parse(*argv)
    before = vars(args).copy()
    out = resolve(Intent.from_args(args), registry, cache or Cache(), **kw)
    assert vars(args) == before  # the namespace is never written to
    return out


def test_resolving_prints_nothing_and_opens_no_header_unless_it_must(registry, capsys):
    cache = Cache()
    r = resolved(registry, "run", "hi", "--temp", "0.5", "-k", "3", cache=cache)
    assert capsys.readouterr() == ("", "") and cache.asked == []
    assert (r.config().k, r.config().sampling.temperature, r.settings.drafter) == (3, 0.5, "auto")
    assert r.load.draft_if_pays and not r.messages


def test_more_threads_than_cores_is_a_message_not_a_print(registry, capsys):
    r = resolved(registry, "run", "--threads", "999", "--threads-batch", "998", "x", cores=4)
    assert capsys.readouterr().err == ""
    texts = [m.text for m in r.messages]
    assert any("999 threads on 4 available core(s)" in t for t in texts) and any("998 threads" in t for t in texts)
    assert not resolved(registry, "run", "--threads", "1", "x", cores=4).messages


def test_seed_minus_one_picks_a_concrete_seed_and_says_it_was_random(registry):
    seeds = {resolved(registry, "run", "--seed", "-1", "--temp", "0.8", "x", rng=random.Random(n)).config().sampling.seed
             for n in range(3)}
    assert len(seeds) == 3 and all(0 <= s < 2**32 for s in seeds)
    assert resolved(registry, "run", "--seed", "-1", "x").seed_was_random
    r = resolved(registry, "run", "--seed", "7", "x")
    assert r.config().sampling.seed == 7 and not r.seed_was_random


def test_a_target_alone_with_the_model_drafter_takes_a_cached_draft_or_decodes_plainly(registry):
    picked = resolved(registry, "run", "--target", "t.gguf", "--drafter", "model", "x", cache=Cache("tiny-draft"))
    assert picked.settings.drafter == "model" and picked.load.draft == "tiny-draft" and "drafting with tiny-draft" in \
        picked.messages[0].text
    plain = resolved(registry, "run", "--target", "t.gguf", "--drafter", "model", "x")
    assert plain.settings.drafter == "none" and "decoding plainly" in plain.messages[0].text
    auto = resolved(registry, "run", "--target", "t.gguf", "x")
    assert auto.settings.drafter == "auto" and not auto.messages  # the suffix drafter needs no draft model


def test_chat_and_serve_load_for_every_drafter_a_request_may_name(registry):
    chat = resolved(registry, "chat", "--seed", "-1", "--temp", "0.7", "--target", "t.gguf", "--drafter", "model")
    # The chat says it itself:
    assert chat.settings.sampling.seed is not None and chat.settings.drafter == "none" and not chat.messages
    assert resolved(registry, "chat", "--target", "t.gguf", "--draft", "d.gguf").load.draft_if_pays is False
    assert resolved(registry, "serve", "--drafter", "model").load.load_draft
    served = resolved(registry, "serve")
    assert served.max_tokens is None and served.config(max_tokens=4096).max_tokens == 4096  # until the context is full
    with pytest.raises(ValueError):
        served.config()


def test_a_bad_sampling_value_or_pair_fails_before_anything_loads(registry):
    from specllama.errors import SpecllamaError

    with pytest.raises(UsageError):
        resolved(registry, "run", "--temp", "-1", "x")
    with pytest.raises(SpecllamaError, match="no-such-pair"):
        resolved(registry, "run", "--pair", "no-such-pair", "x")


def test_the_intent_records_which_options_were_typed():
    assert Intent.from_args(parse("chat", "--drafter", "auto", "-n", "9")).given >= {"drafter", "max_tokens"}
    assert Intent.from_args(parse("chat")).given == frozenset()


def test_target_alone_decodes_plainly_and_says_so_once(tiny_models, capsys):
    argv = ["run", "hi", "--target", str(tiny_models["a"]), "--max-tokens", "4", "--ctx", "256", "--stats=full"]
    assert main(argv + ["--drafter", "model"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() and err.count("decoding plainly") == 1 and "drafter none" in err
    assert main(argv) == 0  # the default, auto: the suffix drafter needs no draft model, nothing to say
    err = capsys.readouterr().err
    assert "decoding plainly" not in err and "drafter auto" in err
    assert main(argv + ["--drafter", "model", "-q"]) == 0
    assert "decoding plainly" not in capsys.readouterr().err  # -q: no status lines


def test_fixed_shape_draft_decodes_are_a_command_line_switch(registry):
    # Was the environment variable SPECLLAMA_DRAFT_ONE_TOKEN: a device session sets it per command now.
    assert not resolved(registry, "run", "hi").load.draft_one_token_decodes
    assert resolved(registry, "bench", "--prompts", "p.jsonl", "--draft-one-token-decodes").load.draft_one_token_decodes
    assert resolved(registry, "serve", "--draft-one-token-decodes").load.draft_one_token_decodes


def test_a_policy_is_chosen_by_name_and_an_unknown_name_fails_before_loading(registry, monkeypatch):
    from specllama.decoding.policy import registry as policies

    monkeypatch.setitem(policies.POLICIES, "toy", lambda config, kit: None)
    assert resolved(registry, "run", "--policy", "toy", "hi").config().policy == "toy"
    assert resolved(registry, "run", "hi").config().policy == ""
    with pytest.raises(UsageError, match="--policy nope: no draft policy of that name"):
        resolved(registry, "run", "--policy", "nope", "hi")
