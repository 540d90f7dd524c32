"""`--queue N` counts only requests beyond the slots: with `--parallel 2 --queue 2`, four requests
at once all run or wait, the fifth is refused (issue 33: 1-2 of 4 concurrent requests got 503
"every slot is taken" while a slot was free, and of 10 only 3 got through, since requests the
engine had not yet taken between two steps counted against the queue). Live server, real clients.
"""

from __future__ import annotations

import http.client
import threading

import pytest

from tests.support.live_serve import LiveServer, chat_body
from tests.support.tiny_gguf import write_tiny_model


@pytest.fixture(scope="module")
def model_32k(tmp_path_factory, tokenizer_sources):
    return write_tiny_model(tmp_path_factory.mktemp("tiny32k") / "a32k.gguf", tokenizer_sources["qwen"], seed=0,
                            n_ctx=32768)


def concurrent_streams(live: LiveServer, n: int) -> tuple[list[int], list[http.client.HTTPConnection]]:
    """n long streams sent at once; their statuses, and the connections (open: they hold the slots)."""
    statuses: list[int] = []
    conns: list[http.client.HTTPConnection] = []
    lock = threading.Lock()
    go = threading.Barrier(n)

    def send() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", live.port, timeout=60)
        body = chat_body("a32k", "Talk for a long time.", max_tokens=20000, stream=True)
        go.wait()
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        if response.status != 200:
            response.read()
        with lock:
            statuses.append(response.status)
            conns.append(conn)

    threads = [threading.Thread(target=send) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return statuses, conns


@pytest.mark.parametrize("n, accepted", [(4, 4), (10, 4)])
def test_requests_wait_for_a_slot_before_they_count_against_the_queue(model_32k, tmp_path, n, accepted):
    live = LiveServer(["--target", str(model_32k), "--no-draft", "--ctx", "32768", "--parallel", "2",
                       "--queue", "2"], tmp_path / "serve.log")
    try:
        statuses, conns = concurrent_streams(live, n)
        assert sorted(statuses) == [200] * accepted + [503] * (n - accepted)
        counts = live.get("/health")
        for conn in conns:
            conn.close()
        assert counts[0] == 200
    finally:
        assert live.stop() == 0
