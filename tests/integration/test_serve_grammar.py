"""`response_format` through a live `specllama serve` (tiny models, 127.0.0.1) and the official
`openai` client: json_object and json_schema answers parse and validate, `parse` with a pydantic
model fills the model, the grammar's forced tokens are counted as their own source, and what cannot
be enforced is a 400 naming it. The tiny models' weights are random: every schema here bounds its
strings, numbers and arrays so that a random model can finish an answer within max_tokens."""

from __future__ import annotations

import json
from typing import Literal

import jsonschema
import openai
import pytest
from pydantic import BaseModel, Field

from tests.support.live_serve import LiveServer, chat_body

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["city", "rank", "tags"],
          "properties": {"city": {"type": "string", "maxLength": 10},
                         "rank": {"type": "integer", "minimum": 0, "maximum": 99},
                         "tags": {"type": "array", "maxItems": 2, "items": {"enum": ["old", "new", "big"]}}}}


class Weather(BaseModel):
    place: str = Field(max_length=12)
    sky: Literal["sunny", "cloudy", "rain"]
    degrees: int = Field(ge=-40, le=50)


@pytest.fixture(scope="module")
def server(tiny_models, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    live = LiveServer(["--target", str(tiny_models["a"]), "--drafter", "suffix", "--ctx", "1024",
                       "--parallel", "2", "--max-tokens", "160"], log)
    yield live
    assert live.stop() == 0, live.stderr()[-3000:]
    assert "Traceback" not in live.stderr()


def _schema_format(schema: dict, strict: bool = True) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": strict}}


@pytest.mark.parametrize("temperature", [0, 0.9])
def test_a_json_schema_answer_parses_and_validates(server, temperature):
    client = server.client()
    reply = client.chat.completions.create(model="a", messages=[{"role": "user", "content": "A city, as JSON."}],
                                           temperature=temperature, seed=7, response_format=_schema_format(SCHEMA))
    assert reply.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(reply.choices[0].message.content), SCHEMA)
    spec = reply.model_extra["speculation"]
    assert spec["drafted_by"].get("grammar", 0) > 0 and spec["accepted_by"]["grammar"] > 0


def test_json_object_in_both_routes_streamed_and_not(server):
    client = server.client()
    fmt = {"type": "json_object"}
    kwargs = dict(model="a", max_tokens=160, temperature=0, response_format=fmt)
    # A random model asked for any object may nest forever; the answer must then be cut by length,
    # never be malformed JSON when it stops on its own.
    whole = client.chat.completions.create(messages=[{"role": "user", "content": "JSON please"}], **kwargs)
    streamed = client.chat.completions.create(messages=[{"role": "user", "content": "JSON please"}], stream=True, **kwargs)
    text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
    assert text == whole.choices[0].message.content
    # The legacy route's client has no response_format parameter: it travels as an extra field.
    completion = client.completions.create(prompt="{'a': 1} as JSON:", model="a", max_tokens=160, temperature=0,
                                           extra_body={"response_format": fmt})
    answers = [(text, whole.choices[0].finish_reason), (completion.choices[0].text, completion.choices[0].finish_reason)]
    for answer, finish in answers:
        assert answer.startswith("{")
        if finish == "stop":
            assert isinstance(json.loads(answer), dict)
        else:
            assert finish == "length"


def test_the_openai_parse_helper_fills_a_pydantic_model(server):
    client = server.client()
    parse = getattr(client.chat.completions, "parse", None) or client.beta.chat.completions.parse
    completion = parse(model="a", messages=[{"role": "user", "content": "The weather in Oslo."}],
                       response_format=Weather, temperature=0)
    weather = completion.choices[0].message.parsed
    assert isinstance(weather, Weather) and weather.sky in ("sunny", "cloudy", "rain") and -40 <= weather.degrees <= 50


@pytest.mark.parametrize("response_format, named", [
    ({"type": "xml"}, "xml"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array", "uniqueItems": True},
                                             "strict": True}}, "uniqueItems"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {"not": {"type": "string"}}, "strict": True}}, "not"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": "an object please"}}, "schema"),
    ({"type": "json_schema"}, "json_schema"),
    ("json", "response_format"),
])
def test_what_cannot_be_enforced_is_a_400_naming_it(server, response_format, named):
    status, _, data = server.request("POST", "/v1/chat/completions",
                                     chat_body("a", "hi", max_tokens=4, response_format=response_format))
    error = json.loads(data)["error"]
    assert status == 400 and named in error["message"] and error["param"].startswith("response_format")
    status, _, data = server.request("POST", "/v1/completions", json.dumps(
        {"model": "a", "prompt": "hi", "max_tokens": 4, "response_format": response_format}).encode())
    assert status == 400 and named in json.loads(data)["error"]["message"]


def test_text_format_is_free_text(server):
    reply = server.client().chat.completions.create(model="a", messages=[{"role": "user", "content": "hi"}],
                                                    max_tokens=8, temperature=0, response_format={"type": "text"})
    plain = server.client().chat.completions.create(model="a", messages=[{"role": "user", "content": "hi"}],
                                                    max_tokens=8, temperature=0)
    assert reply.choices[0].message.content == plain.choices[0].message.content


def test_a_lenient_schema_ignores_what_strict_refuses(server):
    schema = {"type": "array", "uniqueItems": True, "maxItems": 2, "items": {"enum": [1, 2, 3]}}
    reply = server.client().chat.completions.create(model="a", messages=[{"role": "user", "content": "numbers"}],
                                                    temperature=0, response_format=_schema_format(schema, strict=False))
    answer = json.loads(reply.choices[0].message.content)
    assert isinstance(answer, list) and len(answer) <= 2 and set(answer) <= {1, 2, 3}
    with pytest.raises(openai.BadRequestError, match="uniqueItems"):
        server.client().chat.completions.create(model="a", messages=[{"role": "user", "content": "numbers"}],
                                                response_format=_schema_format(schema, strict=True))
