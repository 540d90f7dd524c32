"""canitoolcall's offline suite (469 fixtures, 9 families; the version pinned in pyproject's dev
extra) replayed through our serving layer (canitoolcall_adapter.py): per family, the streamed
answer equals the whole one for every chunking strategy, character splits included, and the
fixtures that fail are exactly the ones listed here, each with why. A new failure, or a listed one
that starts passing, fails the test (update the list and docs/serve.md's table:
`python scripts/canitoolcall_table.py`)."""

from __future__ import annotations

import pytest

pytest.importorskip("canitoolcall", reason="canitoolcall (pyproject's dev extra) is not installed")

from tests.support.canitoolcall_replay import replay_families  # noqa: E402

FAMILIES = ("qwen3-hermes", "qwen3-xml", "gpt-oss", "deepseek", "kimi", "glm", "llama", "mistral", "gemma4")

KNOWN_FAILS = {
    "glm/glm47-missing-last-close-arg-value":
        "the model left out the last </arg_value>: taken as text (a lenient read would also end a value "
        "at a </tool_call> written inside another value)",
    "gpt-oss/harmony-marker-in-reasoning":
        "the reasoning holds <|call|> as text; in our text stream it reads as the real marker (a tokenizer "
        "tells them apart, a character stream cannot)",
    "mistral/vllm-v11-think-text":
        "a Mistral v11 answer thinking in <think> tags: only [THINK]...[/THINK] is Mistral's thinking here",
    "qwen3-xml/q38-marker-in-arguments":
        "a value holds '</parameter> and </function>' inline, then the real closings: read as a call "
        "ending early, so the region is given back as text",
    "qwen3-xml/coder-marker-in-arguments":
        "a value holds '</function> then </tool_call>; open with <tool_call>': the call ends at the first "
        "closing that decodes",
}


@pytest.fixture(scope="module")
def results():
    return replay_families(list(FAMILIES))


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_streams_as_it_answers_whole_and_fails_only_where_listed(results, family):
    result = results[family]
    assert result.supported, f"no fixture of {family} is supported: {result.unsupported_reasons()}"
    assert result.stream_differences() == []
    expected = {fid for fid in KNOWN_FAILS if fid.startswith(family + "/")}
    assert result.failing() == expected


def test_only_kimi_k3_is_unsupported_and_says_why(results):
    reasons = {family: r.unsupported_reasons() for family, r in results.items() if r.unsupported_reasons()}
    assert list(reasons) == ["kimi"] and all("K3" in why for why in reasons["kimi"])
