"""Issue 41: what a web page may do with a live `specllama serve` (tiny model, 127.0.0.1). A page of
another site could start generations with a `text/plain` POST (a "simple request", no preflight),
and any Host was answered, so DNS rebinding could read answers: both are now 403, in the route's
API shape, while local pages, --cors origins, --allow-host names and /health keep working."""

from __future__ import annotations

import json

import pytest

from tests.support.live_serve import LiveServer, chat_body


@pytest.fixture(scope="module")
def server(tiny_models, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    live = LiveServer(["--target", str(tiny_models["a"]), "--no-draft", "--ctx", "512", "--max-tokens", "2",
                       "--cors", "https://app.example.org", "--allow-host", "box.lan"], log)
    yield live
    assert live.stop() == 0, live.stderr()[-3000:]


def _requests(live: LiveServer) -> float:
    return sum(v for k, v in live.metrics().items() if k.startswith("specllama_requests_total{"))


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "application/json"])
def test_a_page_of_another_site_cannot_start_a_generation_whatever_its_content_type(server, content_type):
    before = _requests(server)
    status, _, data = server.request("POST", "/v1/chat/completions", chat_body("a", "hi"),
                                     headers={"Origin": "https://evil.example.com", "Content-Type": content_type})
    assert status == 403 and "evil.example.com" in json.loads(data)["error"]["message"]
    status, _, data = server.request("POST", "/v1/messages", json.dumps(
        {"model": "a", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}).encode(),
        headers={"Origin": "https://evil.example.com", "Content-Type": content_type})
    assert status == 403 and json.loads(data)["type"] == "error"
    assert _requests(server) == before  # nothing ran


@pytest.mark.parametrize("origin", ["http://localhost:5173", "http://127.0.0.1:3000", "https://app.example.org"])
def test_local_pages_and_named_origins_still_may(server, origin):
    status, headers, _ = server.request("POST", "/v1/chat/completions", chat_body("a", "hi"),
                                        headers={"Origin": origin, "Content-Type": "text/plain"})
    assert status == 200 and headers["access-control-allow-origin"] == origin


@pytest.mark.parametrize("host, allowed", [("evil.example.com", False), (None, True), ("localhost", True),
                                           ("127.0.0.1", True), ("[::1]", True), ("box.lan", True),
                                           ("box.lan.evil.example.com", False)])
def test_the_host_header_must_name_this_machine_or_an_allowed_name(server, host, allowed):
    headers = {"Host": f"{host}:{server.port}"} if host else {}
    status, _, data = server.request("POST", "/v1/chat/completions", chat_body("a", "hi"), headers=headers)
    assert status == (200 if allowed else 403), data
    if not allowed:
        assert "--allow-host" in json.loads(data)["error"]["message"]
        status, _, _ = server.request("GET", "/v1/models", headers=headers)
        assert status == 403
    status, _, _ = server.request("GET", "/health", headers=headers)  # load balancers probe it under any name
    assert status == 200
