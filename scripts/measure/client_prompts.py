#!/usr/bin/env python3
"""How many tokens each captured agent request is once `serve` has templated it (the context a
client needs before the model writes a word): the request translated exactly as serve translates
it (anthropic.py / openai_responses.py / schema.py), rendered through the model's chat template
and tokenized with the real tokenizer (the GGUF's vocabulary only: no weights are loaded).

    python scripts/measure/client_prompts.py MODEL.gguf CAPTURED.json [CAPTURED.json ...]

CAPTURED: files that scripts/capture_requests.py wrote (untrimmed: the fixtures in
tests/fixtures/clients/ are cut short and would undercount).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from specllama.decoding.request import DRAFTERS, GenerationConfig
from specllama.llama.model import GGUFModel
from specllama.server.api import anthropic, openai_responses
from specllama.server.schema import ServedModel, parse_chat


class VocabTemplate:
    """schema.ChatTemplate over a vocabulary-only model."""

    def __init__(self, model: GGUFModel):
        self.model = model

    def tokens(self, messages, tools, continue_last):
        return self.model.chat_tokens(messages, tools=tools, continue_last=continue_last)

    def tool_call_format(self):
        return self.model.tool_call_format

    def grammar_token(self, text):
        return json.dumps(text)


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    model = GGUFModel(sys.argv[1], vocab_only=True)
    served = ServedModel(name="measure", aliases=frozenset(), n_ctx=1 << 20, defaults=GenerationConfig(),
                         default_max_tokens=None, drafters=DRAFTERS, n_vocab=model.n_vocab)
    template = VocabTemplate(model)
    print("| request | bytes | tools offered | prompt tokens |")
    print("|---|---|---|---|")
    for name in sys.argv[2:]:
        path = Path(name)
        record = json.loads(path.read_text())
        body = record["body"]
        route = record["path"]
        if route.endswith("/messages"):
            chat = anthropic.chat_request(body)
        elif route.endswith("/responses"):
            chat = openai_responses.chat_request(body)
        else:
            chat = body
        job = parse_chat(chat, served, template)
        tools = len(job.tools.tools) if job.tools else 0
        print(f"| {path.parent.name}/{path.name} | {len(json.dumps(body))} | {tools} | {len(job.prompt)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
