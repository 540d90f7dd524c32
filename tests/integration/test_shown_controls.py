"""A dialect whose markers are control tokens (Llama's <|python_tag|>, Mistral's [TOOL_CALLS],
harmony's <|channel|>): llama.cpp leaves a control token out of the text unless asked, so the
answer's text (StreamDecoder) shows the template's markers, and nothing else that is control.
The toy: Qwen's vocabulary with <tool_call> and </tool_call> made control tokens, as another
family's would be, under a Hermes template."""

from __future__ import annotations

import pytest

from specllama.llama.model import GGUFModel, StreamDecoder
from tests.support.tiny_gguf import write_tiny_model

HERMES = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
          "{% if tools %}Call as <tool_call>{...}</tool_call>{% endif %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def model(tokenizer_sources, tmp_path_factory):
    path = write_tiny_model(tmp_path_factory.mktemp("controls") / "controls.gguf", tokenizer_sources["qwen"],
                            chat_template=HERMES, control=("<tool_call>", "</tool_call>"))
    model = GGUFModel(path, vocab_only=True)
    yield model
    model.close()


def test_the_dialects_control_markers_are_shown_and_no_other_control_token(model):
    open_, close = (model.tokenize(t, add_special=False, parse_special=True) for t in ("<tool_call>", "</tool_call>"))
    assert len(open_) == len(close) == 1
    assert model.piece(open_[0]) == b""  # llama.cpp's own rendering hides them: the parser would never see a call
    assert model.shown_controls == {open_[0], close[0]}
    decoder = StreamDecoder(model)
    assert decoder.feed(open_[0]) == "<tool_call>" and decoder.feed(close[0]) == "</tool_call>"
    end_of_turn = model.tokenize("<|im_end|>", add_special=False, parse_special=True)[0]
    assert decoder.feed(end_of_turn) == ""  # a control token no dialect writes stays unseen
