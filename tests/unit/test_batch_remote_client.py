"""The server batch's client logic without a server: backoff schedule, rotation, response parsing."""

from __future__ import annotations

import json
from email.utils import formatdate

import pytest

from specllama.batch.server_client import (
    ServerError,
    ServerUrlError,
    base_url,
    chat_body,
    parse_chat_reply,
    retry_after,
)
from specllama.batch.server_pool import RetryPolicy, ServerHealth, backoff_delay
from specllama.decoding.request import GenerationConfig
from specllama.decoding.sampling import SamplingParams

POLICY = RetryPolicy(retries=3, base=1.0, cap=8.0)


def test_backoff_doubles_up_to_the_cap_with_the_upper_half_random():
    lows = [backoff_delay(n, POLICY, rng=lambda: 0.0) for n in range(1, 7)]
    highs = [backoff_delay(n, POLICY, rng=lambda: 1.0) for n in range(1, 7)]
    assert highs == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert lows == [h / 2 for h in highs]
    assert backoff_delay(1000, POLICY, rng=lambda: 1.0) == 8.0  # no overflow after a long outage


def test_a_failing_server_leaves_the_rotation_and_one_probe_brings_it_back():
    health = ServerHealth(POLICY, rng=lambda: 1.0)
    assert health.acquire(0.0) == (0.0, False)
    assert health.failed(started=0.0, now=1.0) == 1.0
    assert not health.in_rotation
    wait, probe = health.acquire(1.5)
    assert wait == pytest.approx(0.5) and not probe
    assert health.acquire(2.0) == (0.0, True)  # the cool-down is over: one worker probes...
    assert health.acquire(2.0)[0] > 0  # ...and the others wait for its answer
    assert health.succeeded(started=2.0) is True
    assert health.in_rotation and health.failures == 0
    assert health.acquire(2.1) == (0.0, False)


def test_a_failed_probe_doubles_the_cool_down():
    health = ServerHealth(POLICY, rng=lambda: 1.0)
    health.failed(0.0, 1.0)
    assert health.acquire(2.0) == (0.0, True)
    assert health.failed(started=2.0, now=2.5) == 2.0
    assert health.acquire(3.0)[0] == pytest.approx(1.5)
    health.abandon(False)


def test_requests_in_flight_when_the_server_went_down_count_once():
    health = ServerHealth(POLICY, rng=lambda: 1.0)
    assert health.failed(started=0.0, now=1.0) == 1.0
    assert health.failed(started=0.5, now=1.1) is None  # four connections broke together: one failure
    assert health.failed(started=0.2, now=1.2) is None
    assert health.failures == 1
    assert health.succeeded(started=0.9) is False  # a slow answer begun earlier does not end the cool-down
    assert not health.in_rotation


def test_retry_after_lengthens_the_cool_down_and_an_abandoned_probe_frees_the_slot():
    health = ServerHealth(POLICY, rng=lambda: 0.0)
    assert health.failed(0.0, 0.0, retry_after=30.0) == 30.0
    assert health.acquire(29.0)[0] == pytest.approx(1.0)
    assert health.acquire(30.0) == (0.0, True)
    health.abandon(True)  # nothing was left to send
    assert health.acquire(30.0) == (0.0, True)


def test_a_server_that_keeps_failing_is_given_up_after_the_retry_budget():
    health = ServerHealth(RetryPolicy(retries=2, base=0.01), rng=lambda: 0.0)
    for n in range(3):
        assert not health.given_up()
        health.failed(started=float(n), now=float(n))
    assert health.given_up()


def _reply(obj, status=200, headers=None, seconds=2.0):
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return parse_chat_reply(status, headers or {}, data, seconds)


CHOICE = {"message": {"role": "assistant", "content": "hi"}, "finish_reason": "length"}


def test_llama_server_timings_give_speed_and_draft_counts():
    reply = _reply({"choices": [CHOICE], "usage": {"prompt_tokens": 9, "completion_tokens": 16},
                    "timings": {"predicted_per_second": 40.5, "draft_n": 12, "draft_n_accepted": 9}})
    assert (reply.text, reply.finish_reason, reply.tokens, reply.prompt_tokens) == ("hi", "length", 16, 9)
    assert reply.tokens_per_s == 40.5
    assert (reply.drafted, reply.accepted) == (12, 9)


def test_without_timings_speed_is_tokens_over_wall_time_and_draft_counts_are_unknown():
    reply = _reply({"choices": [CHOICE], "usage": {"prompt_tokens": 9, "completion_tokens": 10}}, seconds=4.0)
    assert reply.tokens_per_s == 2.5
    assert reply.drafted is None and reply.accepted is None


@pytest.mark.parametrize("body", [b"<html>502 Bad Gateway</html>", b'{"choices": []}', b'{"object": "x"}',
                                  b'{"choices": [{"message": {"content": null}}]}', b'{"choices": [{"mes'])
def test_a_200_that_is_not_a_chat_completion_is_a_retryable_server_fault(body):
    with pytest.raises(ServerError, match="malformed response") as e:
        _reply(body)
    assert e.value.retryable and e.value.server_fault


@pytest.mark.parametrize("status,retryable,server_fault", [(429, True, True), (500, True, True), (503, True, True),
                                                           (401, False, True), (404, True, True), (400, False, False),
                                                           (413, False, False)])
def test_http_errors_are_classified(status, retryable, server_fault):
    with pytest.raises(ServerError, match=f"HTTP {status}") as e:
        _reply(b'{"error": "no"}', status=status, headers={"retry-after": "3"})
    assert (e.value.retryable, e.value.server_fault) == (retryable, server_fault)
    assert e.value.refused_key == (status == 401)  # the batch takes the server out at once (issue 33)
    if status in (429, 503):
        assert e.value.retry_after == 3.0


def test_retry_after_as_seconds_or_date():
    assert retry_after("2.5") == 2.5
    assert retry_after(None) is None and retry_after("soon") is None
    in_a_minute = retry_after(formatdate(timeval=__import__("time").time() + 60, usegmt=True))
    assert 55 <= in_a_minute <= 61


def test_server_addresses():
    assert base_url("http://h:8000/v1") == ("http", "h", 8000, "")
    assert base_url("h:8080/") == ("http", "h", 8080, "")
    assert base_url("https://proxy/llama/v1/") == ("https", "proxy", 443, "/llama")
    for bad in ("ftp://h", "http://", "http://h:port"):
        with pytest.raises(ServerUrlError):
            base_url(bad)


def test_sampling_options_become_request_fields_and_extensions_only_when_set():
    plain = chat_body("p", None, "m", GenerationConfig())
    assert plain["messages"] == [{"role": "user", "content": "p"}]
    assert plain["temperature"] == 0.0 and plain["stream"] is False
    assert not {"top_k", "min_p", "seed", "stop"} & plain.keys()
    sampling = SamplingParams(temperature=0.7, top_p=0.9, top_k=40, min_p=0.05, seed=3)
    full = chat_body("p", "be brief", "m", GenerationConfig(max_tokens=9, sampling=sampling, stop=("\n\n",)))
    assert full["messages"][0] == {"role": "system", "content": "be brief"}
    assert (full["max_tokens"], full["top_k"], full["min_p"], full["seed"], full["stop"]) == (9, 40, 0.05, 3, ["\n\n"])
