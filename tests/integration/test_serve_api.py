"""`specllama serve` through the official `openai` client: every endpoint, streamed and not, usage and
speculation numbers, per-request drafter, cache reuse and the suffix drafter's shared history, and
every error a client can cause. One live server (tiny models, 127.0.0.1) for the module."""

from __future__ import annotations

import json

import openai
import pytest

from tests.support.live_serve import LiveServer, chat_body

KEY = "sk-test-0123456789"


@pytest.fixture(scope="module")
def server(tiny_models, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    live = LiveServer(["--target", str(tiny_models["a"]), "--draft", str(tiny_models["a"]), "--drafter", "suffix",
                       "-k", "3", "--ctx", "512", "--parallel", "4", "--max-tokens", "24"], log, api_key=KEY)
    yield live
    assert live.stop() == 0, live.stderr()[-3000:]
    assert "Traceback" not in live.stderr()


def test_models_health_and_props(server):
    models = server.client().models.list()
    assert [m.id for m in models.data] == ["a"]
    assert server.client().models.retrieve("a").id == "a"
    assert server.client().models.retrieve("b").id == "a"  # one model served: any id is that model
    status, _, data = server.request("GET", "/health", auth=False)  # open without the key
    assert status == 200 and json.loads(data)["status"] == "ok" and json.loads(data)["slots"] == 4
    status, _, data = server.get("/props")
    assert status == 200 and json.loads(data)["total_slots"] == 4


def test_chat_completion_whole_with_usage_and_speculation(server):
    reply = server.client().chat.completions.create(
        model="a", messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi."}],
        max_tokens=16, temperature=0)
    choice = reply.choices[0]
    assert reply.object == "chat.completion" and choice.message.role == "assistant"
    assert isinstance(choice.message.content, str) and choice.finish_reason in ("stop", "length")
    assert reply.usage.completion_tokens <= 16 and reply.usage.prompt_tokens > 5
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    extra = reply.model_extra
    assert extra["timings"]["predicted_n"] == reply.usage.completion_tokens
    assert extra["speculation"]["drafter"] == "suffix"
    assert extra["timings"]["draft_n"] == extra["speculation"]["drafted"]


def test_stream_gives_the_same_text_as_whole(server):
    client = server.client()
    kwargs = dict(model="a", messages=[{"role": "user", "content": "Count to ten."}], max_tokens=20, temperature=0)
    whole = client.chat.completions.create(**kwargs)
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finals] == [whole.choices[0].finish_reason]
    assert finals[0].model_extra["timings"]["predicted_n"] == whole.usage.completion_tokens
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


def test_completions_endpoint_streamed_and_not(server):
    client = server.client()
    whole = client.completions.create(model="a", prompt="def add(a, b):", max_tokens=12, temperature=0)
    assert whole.object == "text_completion" and whole.usage.completion_tokens <= 12
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model="a", prompt="def add(a, b):", max_tokens=12, temperature=0, stream=True))
    assert streamed == whole.choices[0].text


def test_stop_strings_and_seeded_sampling(server):
    client = server.client()
    base = client.chat.completions.create(model="a", messages=[{"role": "user", "content": "List words."}],
                                          max_tokens=24, temperature=0).choices[0].message.content
    assert len(base) > 4
    stop = base[2:4]
    cut = client.chat.completions.create(model="a", messages=[{"role": "user", "content": "List words."}],
                                         max_tokens=24, temperature=0, stop=[stop])
    assert cut.choices[0].finish_reason == "stop" and stop not in cut.choices[0].message.content
    assert base.startswith(cut.choices[0].message.content)
    # Plain decoding: a seed fixes the draws. (Drafting keeps the distribution, not the draw: the
    # suffix drafter's drafts depend on the answers before, so the same seed may sample another text.)
    sampled = [client.chat.completions.create(model="a", messages=[{"role": "user", "content": "Pick."}],
                                              max_tokens=16, temperature=1.0, top_p=0.9, seed=s,
                                              extra_body={"top_k": 50, "min_p": 0.01, "drafter": "none"}
                                              ).choices[0].message.content
               for s in (7, 7, 8)]
    assert sampled[0] == sampled[1] != sampled[2]


def test_per_request_drafter(server):
    client = server.client()
    messages = [{"role": "user", "content": "Repeat: alpha beta gamma delta alpha beta gamma delta"}]
    plain = client.chat.completions.create(model="a", messages=messages, max_tokens=16, temperature=0,
                                           extra_body={"drafter": "none"})
    model = client.chat.completions.create(model="a", messages=messages, max_tokens=16, temperature=0,
                                           extra_body={"drafter": "model", "k": 2})
    assert plain.model_extra["speculation"]["drafter"] == "none" and plain.model_extra["timings"]["draft_n"] == 0
    assert model.model_extra["speculation"]["drafted_by"].get("model", 0) > 0
    assert model.choices[0].message.content == plain.choices[0].message.content  # greedy: drafting changes no text


def test_a_resent_conversation_reuses_the_cache_and_drafts_from_history(server):
    """An agent's second turn re-sends the first: its prompt is found in a slot's cache, and the
    answer it asks for again is drafted from the shared history of earlier answers."""
    client = server.client()
    messages = [{"role": "user", "content": "Write the word list for test forty-two, please."}]
    first = client.chat.completions.create(model="a", messages=messages, max_tokens=24, temperature=0)
    again = client.chat.completions.create(model="a", messages=messages, max_tokens=24, temperature=0)
    assert again.choices[0].message.content == first.choices[0].message.content
    cached = again.usage.prompt_tokens_details.cached_tokens
    assert cached == again.usage.prompt_tokens - 1  # all but the last token, which is decoded for logits
    spec = again.model_extra["speculation"]
    assert first.usage.completion_tokens > 4
    # Every step drafts k = 3 from the first answer and keeps them all: 3 of every 4 tokens were drafts.
    assert spec["accepted_by"].get("suffix", 0) >= first.usage.completion_tokens // 2
    assert spec["accepted"] > first.model_extra["speculation"]["accepted"]
    follow = messages + [{"role": "assistant", "content": first.choices[0].message.content},
                         {"role": "user", "content": "Now once more."}]
    third = client.chat.completions.create(model="a", messages=follow, max_tokens=8, temperature=0)
    assert third.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 1


def test_metrics_count_requests_tokens_and_drafts(server):
    server.client().chat.completions.create(model="a", messages=[{"role": "user", "content": "x"}], max_tokens=4)
    m = server.metrics()
    assert m["specllama_generated_tokens_total"] > 0 and m["specllama_slots"] == 4
    assert m["specllama_requests_active"] == 0 and m["specllama_requests_queued"] == 0
    assert sum(v for k, v in m.items() if k.startswith("specllama_requests_total")) >= 1
    assert m['specllama_draft_tokens_total{source="suffix"}'] >= m['specllama_draft_tokens_accepted_total{source="suffix"}']
    assert "specllama_tokens_per_second" in m and "specllama_acceptance_ratio" in m


# --- errors: OpenAI-style JSON, the right status, never a traceback ------------------------------------

def _error(status_body):
    status, headers, data = status_body
    body = json.loads(data)
    assert set(body["error"]) >= {"message", "type", "code", "param"}, body
    assert "Traceback" not in data.decode()
    return status, body["error"], headers


@pytest.mark.parametrize("body, param", [
    (b"{not json", None),
    (b"[1, 2]", None),
    (chat_body("a", "hi", max_tokens="ten"), "max_tokens"),
    (chat_body("a", "hi", temperature=-1), "temperature"),
    (chat_body("a", "hi", top_p=1.5), "top_p"),  # 0 is accepted, as OpenAI does: the most likely token
    (chat_body("a", "hi", stop=[1, 2]), "stop"),
    (chat_body("a", "hi", n=3), "n"),
    (chat_body("a", "hi", stream="yes"), "stream"),
    (chat_body("a", "hi", drafter="telepathy"), "drafter"),
    (chat_body("a", "hi", k=99), "k"),
    (json.dumps({"model": "a"}).encode(), "messages"),
    (json.dumps({"model": "a", "messages": [{"role": "wizard", "content": "hi"}]}).encode(), "messages[0].role"),
    (json.dumps({"model": "a", "messages": [{"role": "user", "content": 5}]}).encode(), "messages[0].content"),
    (json.dumps({"model": 5, "messages": [{"role": "user", "content": "hi"}]}).encode(), "model"),
])
def test_malformed_requests_get_400(server, body, param):
    status, error, _ = _error(server.request("POST", "/v1/chat/completions", body))
    assert status == 400 and error["type"] == "invalid_request_error"
    assert error["param"] == param


def test_any_model_id_is_answered_by_the_one_model_served_and_the_answer_says_which(server):
    reply = server.client().chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}],
                                                    max_tokens=2)
    assert reply.model == "a"
    status, _, data = server.request("POST", "/v1/chat/completions",
                                     json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}).encode())
    assert status == 200 and json.loads(data)["model"] == "a"  # llama-server needs no model either


def test_a_prompt_longer_than_the_context_is_400(server):
    with pytest.raises(openai.BadRequestError) as e:
        server.client().chat.completions.create(model="a", messages=[{"role": "user", "content": "word " * 2000}])
    assert e.value.body["code"] == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError):
        server.client().completions.create(model="a", prompt="word " * 2000)


def test_completions_take_token_ids_within_the_vocabulary(server):
    client = server.client()
    ids = client.completions.create(model="a", prompt=[9707, 11, 1879], max_tokens=4, temperature=0)
    assert ids.usage.prompt_tokens == 3
    for bad in ([10**9], [-1], [], [[1, 2]]):
        with pytest.raises(openai.BadRequestError) as e:
            client.completions.create(model="a", prompt=bad, max_tokens=4)
        assert e.value.body["param"] == "prompt"


def test_wrong_or_missing_api_key_is_401(server):
    status, error, _ = _error(server.request("GET", "/v1/models", auth=False))
    assert status == 401 and error["code"] == "invalid_api_key"
    status, _, _ = _error(server.request("GET", "/metrics", headers={"Authorization": "Bearer sk-test-012345678X"},
                                         auth=False))
    assert status == 401
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0).models.list()


def test_a_body_over_the_limit_is_413(tiny_models, tmp_path):
    live = LiveServer(["--target", str(tiny_models["a"]), "--no-draft", "--ctx", "256", "--parallel", "1",
                       "--max-body", "1000"], tmp_path / "serve.log")
    try:
        status, error, _ = _error(live.request("POST", "/v1/chat/completions", chat_body("a", "x" * 2000)))
        assert status == 413
        ok, _, _ = live.request("POST", "/v1/chat/completions", chat_body("a", "hi", max_tokens=2))
        assert ok == 200
    finally:
        assert live.stop() == 0


def test_unknown_route_and_method_are_openai_errors(server):
    assert _error(server.request("GET", "/v1/nothing"))[0] == 404
    assert _error(server.request("GET", "/v1/chat/completions"))[0] == 405
