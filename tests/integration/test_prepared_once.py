"""Check once, prepare once (issue 40): a request's draft policy and its grammar are built exactly
once, by the check that refuses what cannot run, and the engine admits what the check built.

Counted by wrapping the constructors (tests/support/construction_count.py) for a `run`-style generation
(Runtime.generate, as cli/cmd_run.py calls it) and for one tools POST through a real
`specllama serve` on 127.0.0.1 (the subprocess counts through count_hooks/sitecustomize.py). Before,
each was built three times: by the caller's check, the scheduler's check and the admission."""

from __future__ import annotations

import json
import os
from pathlib import Path

from specllama.decoding.acceptance import PositionAcceptance
from specllama.decoding.constraint import Constraint
from specllama.decoding.cost.online import StepCosts
from specllama.decoding.drafters import ModelDrafter
from specllama.decoding.engine import DoneEvent, Engine, Request
from specllama.decoding.request import K_AUTO_MAX, GenerationConfig
from specllama.decoding.suffix_drafter import SuffixDrafter
from specllama.runtime import LoadOptions, open_runtime
from tests.support.construction_count import install
from tests.support.fake_llm import FakeContext, counting_rule, noisy_rule
from tests.support.live_serve import REPO, LiveServer

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["n"],
          "additionalProperties": False}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                             "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                            "required": ["city"]}}}


def _counts(lines: list[tuple[str, str, str]]) -> dict[str, int]:
    return {what: sum(1 for w, _, _ in lines if w == what) for what in ("policy", "guide")}


def test_a_run_builds_its_policy_and_grammar_once(tiny_models, monkeypatch):
    built: list[tuple[str, str, str]] = []
    with open_runtime(LoadOptions(target=str(tiny_models["a"]), draft=str(tiny_models["b"]), n_ctx=256)) as rt:
        install(lambda *line: built.append(line), monkeypatch.setattr)
        config = GenerationConfig(max_tokens=8, drafter="auto", k="auto",
                                  constraint=Constraint("json_schema", schema=SCHEMA))
        generation = rt.generate(rt.prompt_tokens("Give a number as JSON."), config)
        text = "".join(getattr(event, "text", "") for event in generation)
        assert generation.summary.tokens > 0, text
    assert _counts(built) == {"policy": 1, "guide": 1}, built
    assert built[0][1] == "SourceChoice"  # --drafter auto -k auto: the policy this request runs with


def test_a_served_tools_request_builds_its_policy_and_grammar_once_off_the_engine_thread(tiny_models, tmp_path):
    log = tmp_path / "built.log"
    hooks = str(Path(__file__).resolve().parents[1] / "support" / "count_hooks")
    live = LiveServer(["--target", str(tiny_models["a"]), "--drafter", "suffix", "--ctx", "512", "--parallel", "2",
                       "--max-tokens", "16", "--temp", "0"], tmp_path / "serve.log",
                      env={"PYTHONPATH": os.pathsep.join([hooks, str(REPO)]), "SPECLLAMA_COUNT_LOG": str(log)})
    try:
        body = {"model": "a", "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [WEATHER],
                "tool_choice": "required", "max_tokens": 16}
        status, _, raw = live.request("POST", "/v1/chat/completions", json.dumps(body).encode())
        assert status == 200, raw
    finally:
        assert live.stop() == 0, live.stderr()[-3000:]
    built = [tuple(line.split(" ", 2)) for line in log.read_text().splitlines()]
    assert _counts(built) == {"policy": 1, "guide": 1}, built
    # Built where the request was checked (a preparing thread), never again on the engine's.
    assert all(thread.startswith("specllama-prepare") for _, _, thread in built), built


def test_checking_reads_no_acceptance_record_and_admitting_takes_the_texts_view(monkeypatch):
    """A server checks on its preparing threads while the engine thread updates the acceptance
    records: building the policy there must not read them (prepared.LateRecord); the text's view
    of the record is taken at admission, on the engine thread, as it was before."""
    costs = StepCosts()
    engine = Engine(FakeContext(noisy_rule(1)), {"model": ModelDrafter(FakeContext(counting_rule())),
                                                 "suffix": SuffixDrafter()},
                    {"model": PositionAcceptance(costs.ratio, costs.draft_ratio, k_max=K_AUTO_MAX)}, costs)
    taken: list[str] = []
    for_text = PositionAcceptance.for_text
    monkeypatch.setattr(PositionAcceptance, "for_text", lambda self: taken.append("view") or for_text(self))
    checked = [engine.check(Request([5, 6, 7], GenerationConfig(drafter=d, k="auto", max_tokens=6)))
               for d in ("model", "auto")]
    assert taken == []
    assert {type(p.policy).__name__ for p in checked} == {"ModelAuto", "SourceChoice"}
    events = list(engine.run_many(checked, parallel=1))
    assert taken == ["view", "view"]
    assert sum(isinstance(e, DoneEvent) for _, e in events) == 2
