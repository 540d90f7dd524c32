"""K's range is checked in one place (decoding/limits.py): the command line, the chat's settings and
every API refuse an out-of-range K with the same limit and words, each in its own way (argparse's
line, a SpecllamaError, a 400 in the API's own error shape)."""

from __future__ import annotations

import json

import pytest

from specllama.cli.main import main
from specllama.errors import SpecllamaError
from specllama.tui.settings import ChatSettings
from tests.support.live_serve import LiveServer

SAID = "k must be 'auto' or a whole number from 0 to 16, got 17"


def test_the_command_line_says_the_limit(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["run", "-k", "17", "hi"])
    assert exit.value.code == 2 and SAID in capsys.readouterr().err


def test_the_chat_settings_say_the_limit():
    for make in (lambda: ChatSettings(k=17), lambda: ChatSettings.from_dict({"k": 17})):
        with pytest.raises(SpecllamaError) as error:
            make()
        assert str(error.value) == SAID
    assert ChatSettings(k=0).k == 0  # the same range as everywhere: 0 drafts nothing


@pytest.fixture(scope="module")
def server(tiny_models, tmp_path_factory):
    live = LiveServer(["--target", str(tiny_models["a"]), "--drafter", "suffix", "--ctx", "512"],
                      tmp_path_factory.mktemp("serve") / "serve.log")
    yield live
    assert live.stop() == 0, live.stderr()[-3000:]


def _post(live: LiveServer, path: str, body: dict) -> tuple[int, dict]:
    status, _, data = live.request("POST", path, json.dumps(body).encode())
    return status, json.loads(data)


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/completions", {"prompt": "hi"}),
])
def test_the_openai_apis_say_the_limit_in_their_error_shape(server, path, body):
    status, reply = _post(server, path, {"model": "a", "max_tokens": 4, "k": 17, **body})
    assert status == 400 and reply["error"]["message"] == SAID and reply["error"]["param"] == "k", reply


def test_the_responses_api_says_the_limit_in_its_error_shape(server):
    status, reply = _post(server, "/v1/responses", {"model": "a", "input": "hi", "max_output_tokens": 4, "k": 17})
    assert status == 400 and reply["error"]["message"] == SAID, reply


def test_the_anthropic_api_says_the_limit_in_its_error_shape(server):
    status, reply = _post(server, "/v1/messages", {"model": "a", "max_tokens": 4, "k": 17,
                                                   "messages": [{"role": "user", "content": "hi"}]})
    assert status == 400 and reply["type"] == "error", reply
    assert reply["error"]["type"] == "invalid_request_error" and reply["error"]["message"] == SAID, reply


def test_a_sampling_value_of_the_wrong_type_is_refused_alike_by_the_chat_and_the_api(server):
    """The settings types check types too (a chat.toml or a JSON body can hold anything): one message."""
    said = "temperature must be a number, got 'hot'"
    with pytest.raises(SpecllamaError) as error:
        ChatSettings.from_dict({"temperature": "hot"})
    assert str(error.value) == said
    status, reply = _post(server, "/v1/chat/completions", {"model": "a", "max_tokens": 4, "temperature": "hot",
                                                           "messages": [{"role": "user", "content": "hi"}]})
    assert status == 400 and reply["error"]["message"] == said and reply["error"]["param"] == "temperature", reply


def test_fixed_or_auto_k_is_said_in_one_place():
    from specllama.bench.configs import parse_config
    from specllama.decoding.request import GenerationConfig

    assert GenerationConfig(k="auto").fixed_k is None and GenerationConfig(k=4).fixed_k == 4
    assert parse_config("suffix:k=auto").generation().fixed_k is None
    assert parse_config("model:k=3").generation(64).fixed_k == 3
