"""A fake draft context whose decodes cost what llama.cpp's CUDA backend charges when their shapes
change: the case decoding/catch_up.py's trial is for, which no CPU here can show.

ggml-cuda.cu's graph warm-up, per graph key: a decode whose graph properties changed since the last
decode of that key runs uncaptured; the second in a row with the same properties captures a CUDA
graph; later ones replay it. llama-context.cpp keeps one graph for decodes with outputs and one for
decodes without (gf_res_prev[n_outputs > 0]), hence two keys. Costs in replayed one-token decodes, as
measured on the lent H100 for the 1.5B target (bench/measured/lent-20261127-verify-shapes): a decode
run uncaptured 1.49 (2.955 against 1.986 ms, graphs off), captured 1.93 (3.83 ms), n rows 1 + 0.18 (n - 1)
times that (a steady 2-row decode 1.18). On a CPU (graphs=False) every decode costs its rows alone.
"""

from __future__ import annotations

from specllama.decoding.catch_up import CatchUpChoice
from specllama.decoding.drafters import ModelDrafter
from specllama.decoding.engine import Engine, GenerationConfig
from tests.support.fake_llm import FakeClock, FakeContext, counting_rule, noisy_rule

UNCAPTURED, CAPTURED = 1.49, 1.93


class GraphedContext(FakeContext):
    def __init__(self, rule, clock: FakeClock, unit_s: float, graphs: bool = True, n_seq_max: int = 1,
                 uncaptured: float = UNCAPTURED, captured: float = CAPTURED):
        super().__init__(rule, n_seq_max=n_seq_max, clock=clock, cost=lambda rows: 0.0)
        self.unit_s, self.graphs = unit_s, graphs
        self.uncaptured, self.captured = uncaptured, captured
        self._last: dict[bool, tuple[int, int]] = {}  # per key (has outputs): the last decode's properties
        self._warm: dict[bool, bool] = {}
        self._outputs = 0
        self.kinds = {"uncaptured": 0, "captured": 0, "replayed": 0}

    def decode(self, tokens, logits="last", seq: int = 0):
        self._outputs = 0 if logits == "none" else (len(tokens) if logits == "all" else 1)
        return super().decode(tokens, logits, seq)

    def decode_parts(self, parts):
        self._outputs = sum(0 if p.logits == "none" else (len(p.tokens) if p.logits in ("all", "argmax") else 1)
                            for p in parts)
        return super().decode_parts(parts)

    def _spend(self, rows: int) -> None:
        super()._spend(rows)
        self.clock.now += self.unit_s * (1 + 0.18 * (rows - 1)) * self._factor(rows)

    def _factor(self, rows: int) -> float:
        if not self.graphs:
            return 1.0
        key, props = self._outputs > 0, (rows, self._outputs)
        changed, self._last[key] = self._last.get(key) != props, props
        if not self._warm.get(key):
            if changed:
                self.kinds["uncaptured"] += 1
                return self.uncaptured
            self._warm[key] = True
            self.kinds["captured"] += 1
            return self.captured
        if changed:
            self._warm[key] = False
            self.kinds["uncaptured"] += 1
            return self.uncaptured
        self.kinds["replayed"] += 1
        return 1.0


def model_drafted(catch_up: CatchUpChoice, k: int, flip_every: int, max_tokens: int, graphs: bool = True,
                  unit_s: float = 1e-3, **costs) -> tuple[list[int], ModelDrafter, GraphedContext]:
    """One greedy answer to [5, 6, 7], drafted by a counting draft on a GraphedContext (a replayed
    one-token decode `unit_s`; `costs`: its uncaptured / captured factors) for a target that turns
    away every `flip_every`-th token: its ids, the drafter and the draft context."""
    clock = FakeClock()
    draft = GraphedContext(counting_rule(), clock, unit_s, graphs=graphs, **costs)
    drafter = ModelDrafter(draft, clock=clock, catch_up=catch_up)
    target = FakeContext(noisy_rule(4, flip_every=flip_every), clock=clock, cost=lambda rows: 3e-3 * (1 + 0.2 * (rows - 1)))
    config = GenerationConfig(drafter="model", k=k, max_tokens=max_tokens)
    tokens, _ = Engine(target, {"model": drafter}, clock=clock).generate([5, 6, 7], config).tokens()
    return [t.id for t in tokens], drafter, draft
