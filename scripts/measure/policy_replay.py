"""What the draft policy's choices cost on real texts, without running the model: each recorded (greedy or
sampled) answer is replayed through the real engine and drafters on a fake target whose next token is the
recorded one and whose decode of n rows costs the T(n) measured on this machine (virtual time).

Why: on 2 shared cores a real A/B run of the agentic replay takes ~4 minutes a round and its per-request
noise (+-5 %) is the size of the effects looked for; the engine's choices are deterministic given the
text and the costs, so a policy change can be judged on every recorded text first, and only the
promising one re-measured for real. What this cannot show: costs that move with the fill, noise,
and texts a change would alter (greedy texts do not change with drafting, so only the time does).

Input: a bench_serve.py JSON (its agentic runs keep every answer; the `none` arm's are the target's
greedy text) and the target GGUF (its tokenizer and chat template only: nothing is decoded); or a
prompt set's answers as token ids, recorded once with the real target (`--record`; greedy, or sampled
with `--temp T --seed S`: see record()), each replayed as `specllama bench` runs it (one engine, reset
between prompts: bench empties the caches and the drafters' history between runs and keeps the costs
and the suffix drafter's calibration).

    python scripts/measure/policy_replay.py bench/measured/vm-20261125-serve-replay-blocks.json
    python scripts/measure/policy_replay.py --record bench/prompts_heldout.jsonl -n 96 greedy-heldout.json
    python scripts/measure/policy_replay.py --record bench/prompts_unseen.jsonl --temp 0.7 --seed 1 unseen-s1.json
    python scripts/measure/policy_replay.py --record agentic greedy-agentic.json
    python scripts/measure/policy_replay.py --record agentic --sessions bench/agent_sessions_heldout.json greedy-held.json
    python scripts/measure/policy_replay.py greedy-heldout.json
    python scripts/measure/policy_replay.py greedy-agentic.json --fresh-costs \
        --verify-rows bench/measured/vm-20261126-verify-rows-dense.json
    python scripts/measure/policy_replay.py serve-replay.json --round 0 --texts auto --learnt --fresh-costs
    python scripts/measure/policy_replay.py greedy-agentic.json --fresh-costs --modes none,auto,steady3 \
        --shapes bench/measured/lent-20261127-shapes-graphs.json --prefill-ms 0 --propose-ms 0.1
    python scripts/measure/policy_replay.py greedy-heldout.json --fresh-costs --noise 0.1 --noise-seed 2 \
        --verify-rows bench/measured/vm-20261126-verify-rows-dense.json

With --noise the costs wander as a real machine's do, and a change is judged over several seeds
(bench/measured/vm-20261128-r14-slope-floor/noisy.sh: exact costs never showed a dip of noise mislead the cost model).
With --trace each drafting step is printed as trace_drafts.py prints a real run's, with the price its length was cut
at (bench/measured/vm-20261129-r15-extrapolation/trace-greedy-noise1-base.txt: 48 rows priced 7.50 plain steps).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench_serve import agent_ask  # noqa: E402
from report_files import repo_path  # noqa: E402

from specllama.decoding.cost.online import Prior, StepCosts  # noqa: E402
from specllama.decoding.engine import Engine, GenerationConfig, StepEvent  # noqa: E402
from specllama.decoding.policy.base import Ask  # noqa: E402
from specllama.decoding.policy.registry import register  # noqa: E402
from specllama.decoding.policy.source_choice import SourceChoice  # noqa: E402
from specllama.decoding.suffix_drafter import SuffixDrafter  # noqa: E402
from tests.support import fake_llm  # noqa: E402

# What a verify batch of n rows costs here (ms, medians; AMD EPYC, 2 spinning threads, Qwen2.5-Coder-1.5B
# Q4_K_M, logits at every row: bench/measured/vm-20261125-verify-rows), interpolated between the sizes timed.
# Its blocks matter: 16 rows cost less than 15, 64 less than 63. Until 2026-11-26 this replay used the curve
# `specllama bench` had learnt up to 16 rows (T(16)/T(1) 9.85, where the bare decode takes 7.85) and scaled
# the rest from there; it gave auto 1.197x of plain on the agentic texts where the real serve replay
# measured 1.32x, and this curve gives 1.299x.
ROWS_MS = {1: 35.0, 2: 60.4, 3: 87.1, 4: 104.5, 6: 147.7, 8: 229.4, 9: 248.2, 12: 289.9, 15: 339.0, 16: 274.6,
           17: 319.6, 24: 403.3, 31: 515.3, 32: 483.0, 33: 495.3, 48: 645.9, 63: 935.8, 64: 772.4, 65: 846.6}
T1 = ROWS_MS[1] / 1000
PREFILL_S = 1 / 80  # a prompt row (the same for every arm)
SESSIONS = REPO / "bench" / "agent_sessions.json"
TRUTH: dict = {}  # the text being replayed: its prompt, recorded answer (the oracle's hindsight) and, sampled, its odds


class SuffixOracle(SourceChoice):
    """A bound, not a policy: the suffix drafter's own draft, cut with hindsight where it pays most on the
    learnt costs given how much of it the target will accept (mode `oracle`). What auto gets of that is
    how well it foresees where a copy diverges."""

    def review(self, proposal):
        return proposal, None

    def cut(self, proposal):
        if not proposal.tokens:
            return proposal, True
        at = len(self.suffix._live(self._slot).live_tokens) - len(TRUTH["prompt"])
        truth = TRUTH["answer"][at:at + len(proposal.tokens)]
        right = next((i for i, (a, b) in enumerate(zip(truth, proposal.tokens)) if a != b), len(truth))
        return proposal.keep(max(range(right + 1), key=lambda n: (n + 1) / ratio(n + 1))), True


register("suffix-oracle")(lambda config, kit: SuffixOracle(kit.drafter("suffix"), None, kit))


class SteadyShape(SourceChoice):
    """A question, not a policy (modes `steady2`, `steady3`, ...): every step sends exactly S - 1 tokens, the
    suffix drafter's guess (a match of one token is enough) padded with the last token, so every verify batch
    has S rows and, under --shapes, replays a warm CUDA graph. What would a backend whose shape changes cost
    (the H100: a batch of a new shape and the plain steps after it run without a graph) gain by never changing
    shape? bench/measured/xeon-20261127-policy-replay-steady-shape.md."""

    rows = 2

    def ask(self, room, alone):
        return Ask(self.suffix, min(room, self.rows - 1))

    def review(self, proposal):
        k = self.rows - 1
        tokens = list(proposal.tokens[:k])
        last = self.suffix._live(self._slot).live_tokens[-1]
        while len(tokens) < k:
            tokens.append(tokens[-1] if tokens else last)
        return replace(proposal, tokens=tuple(tokens), q=None, confidence=None, certain=0,
                        raw_confidence=(), match_length=0), None

    def cut(self, proposal):
        return proposal, True


for _rows in (2, 3, 4, 5):
    register(f"steady-shape-{_rows}")(lambda config, kit, rows=_rows: type(
        "Steady", (SteadyShape,), {"rows": rows})(kit.drafter("suffix"), None, kit))


def config_for(mode: str, n: int) -> GenerationConfig:
    if mode == "oracle":
        return GenerationConfig(drafter="suffix", k="auto", policy="suffix-oracle", max_tokens=n)
    if mode.startswith("steady"):
        return GenerationConfig(drafter="suffix", k="auto", policy=f"steady-shape-{mode[6:]}", max_tokens=n)
    return GenerationConfig(drafter=mode, k="auto", max_tokens=n)


def use_curve(bench_json: Path) -> str:
    """Another machine's costs: the curve a `specllama bench --json` run learnt there (T(1) and T(n)/T(1) up to
    16 rows; beyond, the last step's slope), e.g. the lent GPU's, where T(2)/T(1) is 1.57 and not 1.7."""
    curve = json.loads(bench_json.read_text())["cost_curve"]
    global T1, PREFILL_S
    T1 = curve["t1_s"]
    PREFILL_S = 0.0  # the prompt's time is the same in every arm; bench's tokens/s leave it out, so does this
    ROWS_MS.clear()
    ROWS_MS.update({n: T1 * 1000 * r for n, r in enumerate(curve["ratios"], start=1)})
    return f"the curve learnt in {bench_json}"


def use_rows(verify_rows_json: Path) -> str:
    """A verify_rows.py timing (every row count it timed, e.g. every n to 65) as the fake target's costs."""
    global T1
    timed = json.loads(verify_rows_json.read_text())["rows"]
    ROWS_MS.clear()
    ROWS_MS.update({r["rows"]: r["ms"] for r in timed})
    T1 = ROWS_MS[1] / 1000
    return f"the verify batches timed in {verify_rows_json}"


def ratio(n: int) -> float:
    """T(n)/T(1) on ROWS_MS, straight lines between the sizes timed; past the largest, its last slope (where that
    rises; else the average slope from one row)."""
    if n in ROWS_MS:
        return ROWS_MS[n] / ROWS_MS[1]
    top = max(ROWS_MS)
    if n > top:
        below = max(p for p in ROWS_MS if p < top)
        slope = (ROWS_MS[top] - ROWS_MS[below]) / (top - below)
        if slope <= 0:  # a curve whose last point dips (timing noise: the H200's at 0.7): the average slope
            slope = max(0.0, (ROWS_MS[top] - ROWS_MS[1]) / (top - 1))  # a negative one priced big batches below zero
        return (ROWS_MS[top] + slope * (n - top)) / ROWS_MS[1]
    lo = max(p for p in ROWS_MS if p < n)
    hi = min(p for p in ROWS_MS if p > n)
    return (ROWS_MS[lo] + (ROWS_MS[hi] - ROWS_MS[lo]) * (n - lo) / (hi - lo)) / ROWS_MS[1]


def cost(rows: int, in_prompt: bool = False) -> float:
    """A decode of `rows` rows; with --aftermath, a one-row decode whose last two decodes were not both one
    row costs AFTERMATH plain steps more (llama.cpp's CUDA graphs: the first decode after a shape change runs
    without a graph, the second records one; bench/measured/lent-20261127-verify-shapes.md). With --shapes,
    every row count alike: its steady cost where the last two decodes had its rows, else its cost without a
    graph. With --noise, each decode of the answer's steps (not the prompt's: bench leaves its time out and the
    cost model does not learn from it) times jitter()."""
    noise = 1.0 if in_prompt else jitter()
    if SHAPES and rows <= 65:  # a prompt chunk: PREFILL_S a row, as without --shapes
        warm = all(r == rows for r in RECENT_ROWS)
        RECENT_ROWS.append(rows)
        ms = _between(SHAPES["steady" if warm else "cold"], rows)
        label = "one-row" if rows == 1 else "batch (drafts, short prompt chunks)"
        kind = SHAPE_COUNTS.setdefault(MODE[0], {}).setdefault(label, [0, 0, 0.0])
        kind[warm] += 1
        kind[2] += ms - _between(SHAPES["steady"], rows)
        return ms / 1000 * noise
    base = rows * PREFILL_S if rows > 65 else T1 * ratio(rows)
    extra = AFTERMATH * T1 if rows == 1 and any(r != 1 for r in RECENT_ROWS) else 0.0
    RECENT_ROWS.append(rows)
    return (base + extra) * noise


def prompt_chunk(ctx, truth: dict) -> bool:
    """Whether the decode just made was a chunk of the prompt (it ended at or before the prompt's last token)."""
    return max(map(len, ctx.held)) <= len(truth.get("prompt", ()))


def jitter() -> float:
    """With --noise SIGMA, a decode's time times a lognormal factor. A real machine's decode times wander
    (on the 2-core VM one prompt's tok/s moved by up to 30 % between repeats: bench/measured/
    vm-20261128-r13-shared-text), and a cost model that learns from a few samples of a size can read that
    noise as the curve's shape (two sizes a hair apart priced every larger one nearly free: cost/online.py's
    extrapolation), which exact costs never show. Each mode draws the same sequence (NOISE_RNG is reseeded
    as a mode starts); --noise-seed picks another, so a change is judged over several machines' luck."""
    return math.exp(NOISE_RNG.gauss(0.0, NOISE)) if NOISE else 1.0


AFTERMATH = 0.0
NOISE = 0.0  # --noise: sigma of the log of each decode's time factor
NOISE_SEED = 0
NOISE_RNG = random.Random(NOISE_SEED)
RECENT_ROWS: deque = deque([1, 1], maxlen=2)
SHAPES: dict = {}  # --shapes: "steady" and "cold" ms by rows
SHAPE_COUNTS: dict = {}  # --shapes: mode -> decode kind -> [cold decodes, warm decodes, ms beyond steady]
MODE = [""]  # the mode being replayed


def use_learnt(learnt: dict, where: str) -> str:
    """The costs a bench_serve.py run's specllama server learnt from its own steps (its JSON's learnt_costs: T(1),
    T(n)/T(1) of the row counts it timed): that sitting's costs, where a verify_rows.py curve timed another hour
    may be off (the 2-core host's T(1) measured 31.9 ms at one hour, 24.3 ms two hours later, its batches unchanged)."""
    global T1
    T1 = float(learnt["t1_s"])
    ROWS_MS.clear()
    ROWS_MS.update({int(n): T1 * 1000 * float(r) for n, r in learnt["ratios"].items()})
    ROWS_MS[1] = T1 * 1000
    return f"the costs learnt in {where}"


def use_shapes(shapes_json: Path) -> str:
    """verify_shapes.py's timings as the fake target's costs: steady-N's for a warm graph; a cold decode of N
    rows as every8-N's first (a batch among plain steps), of one row as every8's second and third (the plain
    decodes after a batch, the first without a graph, the second recording one)."""
    global T1
    ms = json.loads(shapes_json.read_text())["median_ms"]
    steady = {int(k.split("-")[1]): v[0] for k, v in ms.items() if k.startswith("steady-")}
    cold = {int(k.split("-")[1]): v[0] for k, v in ms.items() if k.startswith("every8-")}
    cold[1] = statistics.median(v for k, m in ms.items() if k.startswith("every8-") for v in m[1:3])
    SHAPES.update(steady=steady, cold=cold)
    T1 = steady[1] / 1000
    ROWS_MS.clear()
    ROWS_MS.update(cold)
    return f"the shapes timed in {shapes_json} (warm: the last two decodes had the same rows)"


def _between(points: dict, n: int) -> float:
    """points' value at n: straight lines between the row counts timed; past the largest, its last slope."""
    if n in points:
        return points[n]
    ns = sorted(points)
    lo = max((p for p in ns if p < n), default=ns[0])
    hi = min((p for p in ns if p > n), default=None)
    if hi is None:
        lo, hi = ns[-2], ns[-1]
    return points[lo] + (points[hi] - points[lo]) * (n - lo) / (hi - lo)


class Vocabulary:
    """Real token ids mapped onto the fake model's small ids (1..n; 0 ends the text): the drafters see the same
    equalities between tokens, which is all they use."""

    def __init__(self) -> None:
        self.ids: dict[int, int] = {}

    def __call__(self, tokens: list[int]) -> list[int]:
        return [self.ids.setdefault(t, len(self.ids) + 1) for t in tokens]


def agent_items(sessions: dict, tokens, reply) -> list[dict]:
    """Every turn of every session as bench_serve.py's replay sends it: turn 1 the file and the change, every next
    turn the conversation so far with the model's own answers plus the next change. `tokens(messages)` templates
    a prompt; `reply(id, prompt)` gives its answer as (text, item fields: "answer" ids and any others)."""
    items = []
    for session in sessions["sessions"]:
        messages = [{"role": "system", "content": sessions["system"]}]
        for n, change in enumerate(session["turns"]):
            messages.append({"role": "user", "content": agent_ask(session, n, change)})
            item_id, prompt = f"{session['id']}/{n}", tokens(messages)
            text, fields = reply(item_id, prompt)
            items.append({"id": item_id, "prompt": prompt, **fields})
            messages.append({"role": "assistant", "content": text})
    return items


def session_items(target, sessions: dict, texts: list[str]) -> dict:
    """A bench_serve.py run's answers as recorded items, their texts tokenized again, run on one engine in turn."""
    answers = iter(texts)

    def reply(item_id: str, prompt: list[int]) -> tuple[str, dict]:
        text = next(answers)
        return text, {"answer": target.tokenize(text, add_special=False, parse_special=False)}

    return {"items": agent_items(sessions, target.chat_tokens, reply), "one_engine": True}


class TimedSuffixDrafter(SuffixDrafter):
    """The suffix drafter whose every proposal costs PROPOSE_S of virtual time: what asking it costs
    in Python per step, which the real engine pays whether or not a draft is sent (~0.1 ms on this
    machine, scripts/measure/step_python.py; ~0.3 ms a step on the lent GPU machine, 11 % of its 2 ms
    steps: bench/measured/lent-20261126-gpu-heldout-t0)."""

    clock = None

    def propose(self, requests):
        if self.clock is not None:
            self.clock.now += PROPOSE_S * len(requests)
        return super().propose(requests)

    def observe(self, seq, outcome):
        """A sampled recording: each judged draft learnt with the odds the real verifier would report, the
        target's tempered probability of that token there (TRUTH["odds"]), not the replay's 1/0."""
        followed = self.shadows.get(seq)
        odds_at = TRUTH.get("odds")
        if odds_at and outcome.odds and followed and followed[-1].proposal.tokens[:len(outcome.sent.tokens)] == outcome.sent.tokens:
            at = followed[-1].at - len(TRUTH["prompt"])
            odds = tuple(odds_at[at + i].get(token, 0.0) if 0 <= at + i < len(odds_at) else odds
                         for i, (token, odds) in enumerate(zip(outcome.sent.tokens, outcome.odds)))
            outcome = replace(outcome, odds=odds)
        super().observe(seq, outcome)


PROPOSE_S = 0.0
CALIBRATORS: dict = {}  # mode -> its suffix drafter's calibrator after the replay (--calibration)


def prompt_runs(recorded: dict, modes: list[str], fresh: bool = False, eog: Sequence[int] = ()) -> list[dict]:
    """Each recorded prompt in each mode, on one engine a mode; `fresh`: the engine knows nothing of the costs
    at first (an empty cost cache: it learns them from its own steps), else it knows ROWS_MS from the start.
    `eog`: the target's end-of-generation ids: each answer then ends with the one that ends the prompts' turns,
    as the real one did, so a copy that runs on past an answer's end (into an earlier turn's end and the next
    turn) is judged as it is for real; without them answers end with a token no text holds."""
    vocab = Vocabulary()
    temperature = recorded.get("temperature", 0.0)
    items = [(item["id"], vocab(item["prompt"]), vocab(item["answer"]),
              sampled_odds(item["top"], temperature, vocab) if temperature > 0 else None)
             for item in recorded["items"]]
    ends = set(eog)
    held = [t for item in recorded["items"] for t in item["prompt"] if t in ends]
    end = vocab.ids[max(set(held), key=held.count)] if held else fake_llm.EOG
    size = len(vocab.ids) + 2
    fake_llm.VOCAB = fake_llm.FakeModel.n_vocab = size
    fake_llm.FakeModel.eog_ids = [fake_llm.EOG] + [vocab.ids[t] for t in eog if t in vocab.ids]
    out = []
    for mode in modes:
        MODE[0] = mode
        NOISE_RNG.seed(NOISE_SEED)
        engine = None
        for pid, prompt, answer, odds in items:
            # bench: one engine reset between prompts (caches and the drafters' history emptied; the costs and
            # the suffix drafter's calibration kept); the agentic sessions: one server, in turn (bench_serve.py)
            if engine is None:
                RECENT_ROWS.extend([1, 1])  # a fresh engine's fake CUDA graph: warm for one row, as every mode starts
                clock, truth = fake_llm.FakeClock(), {}
                target_ctx = fake_llm.FakeContext(lambda held: _next(held, truth, size), n_ctx=8192, clock=clock,
                                                  cost=lambda rows: cost(rows, prompt_chunk(target_ctx, truth)))
                costs = StepCosts() if fresh else StepCosts(Prior(ratio, T1, learned=True, known=frozenset(ROWS_MS)))
                suffix = TimedSuffixDrafter(**({"min_match": 1} if mode.startswith("steady") else {}))
                suffix.clock = clock
                CALIBRATORS[mode] = suffix.calibrator
                engine = Engine(target_ctx, {"suffix": suffix}, {}, costs, clock=clock)
            if not recorded.get("one_engine"):
                engine.reset()
            truth.clear()
            truth.update(prompt=prompt, answer=answer + [end])
            TRUTH.update(truth, odds=odds)
            start = clock.now
            events = list(engine.generate(prompt, config_for(mode, len(answer) + 1)))
            steps = [e for e in events if isinstance(e, StepEvent)]
            out.append({"mode": mode, "request": pid, "seconds": clock.now - start,
                        "tokens": events[-1].summary.tokens, "drafted": sum(s.drafted for s in steps),
                        "accepted": sum(s.accepted for s in steps)})
    return out


def end_tokens(target: Path) -> list[int]:
    """The target's end-of-generation ids (its vocabulary only is read), or none where the file is missing."""
    if not target.is_file():
        print(f"{target} is missing: answers end with a token no text holds", file=sys.stderr)
        return []
    from specllama.llama.model import GGUFModel

    return GGUFModel(target, vocab_only=True).eog_ids


def sampled_odds(tops: list, temperature: float, vocab: "Vocabulary") -> list[dict[int, float]]:
    """Per answer position, each recorded likely token's probability at `temperature` (its raw logprob / T,
    normalised over the tokens recorded there: the rest of the vocabulary is left out, a few per cent at T 0.7):
    the odds a deterministic draft of that token is accepted with, as the sampling verifier reports them."""
    out = []
    for top in tops:
        ids = vocab([t for t, _ in top])
        weights = np.exp((np.array([lp for _, lp in top]) - top[0][1]) / temperature)
        out.append(dict(zip(ids, (weights / weights.sum()).tolist())))
    return out


# Likely tokens a sampled recording keeps per position: at most TOP_RECORDED, each within TOP_NATS of the best (a
# token 1e-4 as likely as the best is accepted 1e-4^(1/T) as often: nothing at T 0.7), so a set's file stays small.
TOP_RECORDED, TOP_NATS = 8, 9.2


def kept(top: list) -> list:
    return [[t, round(lp, 3)] for t, lp in top[:TOP_RECORDED] if lp >= top[0][1] - TOP_NATS]


def record(prompts: str, n: int, out: Path, sessions_file: Path = SESSIONS, temperature: float = 0.0,
           seed: int | None = None) -> None:
    """Each prompt's answer by the real target (plain decoding), as token ids with the target's log-probability
    of each: greedy, or sampled at `temperature` with `seed`, then with the TOP_RECORDED likeliest tokens a
    position too. A sampled answer replays as a greedy one does (a draft is accepted where it equals the recorded
    token): the sampling verifier accepts a deterministic draft d with p(d) and otherwise commits a token other than
    d, so "accepted iff equal" is the same coupling the real run makes, and the top tokens give the odds it learns
    from. PROMPTS "agentic": `sessions_file`'s sessions as an agent sends them (each turn re-sends the conversation
    with the model's own answers; by default the replay's, bench_serve.py's)."""
    from specllama.batch.prompts_file import read_prompts
    from specllama.decoding.events import TokenEvent
    from specllama.decoding.sampling import SamplingParams
    from specllama.runtime.loaded import open_runtime
    from specllama.runtime.options import LoadOptions

    items, tops = [], []  # tops: each answer's likeliest tokens a position, sampled recordings only
    with open_runtime(LoadOptions(load_draft=False, n_ctx=8192)) as runtime:
        def answer(prompt: list[int], max_tokens: int) -> tuple[list[int], list[float]]:
            runtime.reset()
            config = GenerationConfig(max_tokens=max_tokens, drafter="none", k=0,
                                      logprobs=TOP_RECORDED if temperature > 0 else 0,
                                      sampling=SamplingParams(temperature=temperature, seed=seed))
            events = [e for e in runtime.generate(prompt, config) if isinstance(e, TokenEvent)]
            tops.append([kept(e.logprobs.top) for e in events])
            return [e.id for e in events], [round(e.logprobs.logprob, 4) for e in events]

        if prompts == "agentic":
            def reply(item_id: str, prompt: list[int]) -> tuple[str, dict]:
                ids, logprobs = answer(prompt, 600)  # bench_serve.py's --agent-max-tokens
                print(f"  {item_id}: {len(prompt)} + {len(ids)} tokens", flush=True)
                return runtime.detokenize(ids), {"answer": ids, "logprobs": logprobs}

            items = agent_items(json.loads(sessions_file.read_text()), runtime.chat_tokens, reply)
        else:
            for item in read_prompts(prompts).items:
                prompt = runtime.prompt_tokens(item.prompt, item.system)
                ids, logprobs = answer(prompt, n)
                items.append({"id": item.id, "prompt": prompt, "answer": ids, "logprobs": logprobs})
                print(f"  {item.id}: {len(prompt)} + {len(ids)} tokens", flush=True)
        target = runtime.describe().target.file
    if prompts == "agentic":
        prompts = f"agentic ({repo_path(sessions_file)})"
    sampled = {}
    if temperature > 0:
        items = [{**item, "top": top} for item, top in zip(items, tops)]
        sampled = {"temperature": temperature, "seed": seed}
    out.write_text(json.dumps({"prompts": prompts, "target": target, "max_tokens": n, **sampled, "items": items,
                               "one_engine": prompts.startswith("agentic")}) + "\n")


def _next(held: list[int], truth: dict, size: int) -> np.ndarray:
    """The recorded answer's next token after `held` (its prompt, then the answer so far)."""
    row = np.zeros(size, dtype=np.float32)
    at = len(held) - len(truth["prompt"])
    answer = truth["answer"]
    row[answer[at] if 0 <= at < len(answer) else fake_llm.EOG] = 10.0
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("replay", type=Path, help="a bench_serve.py --parts agentic JSON, or answers recorded with --record")
    p.add_argument("--record", metavar="PROMPTS",
                   help="record PROMPTS' answers (greedy unless --temp) into REPLAY (loads the target); "
                        "'agentic': the replay's sessions")
    p.add_argument("--sessions", type=Path, default=SESSIONS,
                   help="the edit sessions: with --record agentic those to answer, with a bench_serve.py JSON those it "
                        "replayed (default: bench/agent_sessions.json)")
    p.add_argument("-n", type=int, default=96, help="with --record: tokens an answer (bench's default)")
    p.add_argument("--temp", type=float, default=0.0,
                   help="with --record: sample the answers at this temperature (default 0: greedy)")
    p.add_argument("--seed", type=int, default=None, help="with --record --temp: the sampling seed")
    p.add_argument("--target", type=Path,
                   default=Path.home() / ".cache/specllama/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    p.add_argument("--round", type=int, default=None, help="the round whose `none` texts to replay (default: the last)")
    p.add_argument("--fresh-costs", action="store_true",
                   help="start each mode's engine with no cost prior (an empty cost cache), not the measured curve")
    p.add_argument("--modes", default="none,auto", help="none, auto, suffix, oracle (auto's bound: the suffix drafts "
                   "cut with hindsight), steady2..steady5 (a question for --shapes: every step that many rows)")
    p.add_argument("--curve", type=Path, metavar="BENCH_JSON",
                   help="the costs of another machine: a `specllama bench --json` file's learnt curve (default: ROWS_MS)")
    p.add_argument("--shapes", type=Path, metavar="JSON",
                   help="verify_shapes.py's timings (lent-20261127-shapes-graphs.json): every row count's cost warm "
                        "(the last two decodes had its rows) or cold, as llama.cpp's CUDA graphs make it")
    p.add_argument("--verify-rows", type=Path, metavar="JSON",
                   help="the costs timed by scripts/measure/verify_rows.py (--out's JSON; default: ROWS_MS)")
    p.add_argument("--learnt", action="store_true",
                   help="a bench_serve.py JSON: the costs its `auto` server learnt in the replayed round (learnt_costs)")
    p.add_argument("--texts", default="none",
                   help="a bench_serve.py JSON: the arm whose texts to replay (default none, the target's plain text; "
                        "auto: the texts the timed auto run produced, where greedy near-ties went another way)")
    p.add_argument("--calibration", action="store_true",
                   help="also print, per draft group, how often the suffix drafter's proposed tokens were right "
                        "(every proposal judged, sent or not) over the replay of each mode")
    p.add_argument("--prefill-ms", type=float, default=None,
                   help="milliseconds a prompt row costs (default: 12.5, the 2-core EPYC's; 0 with --curve, as bench counts)")
    p.add_argument("--aftermath", type=float, default=0.0,
                   help="plain steps each of the two plain decodes after another shape costs more (the H100: 0.93; default 0)")
    p.add_argument("--repeat", type=int, default=1,
                   help="recorded answers only: replay the set this many times in rounds on the same engine, as "
                        "`specllama bench --repeat` runs it (the later rounds draft on what the earlier ones calibrated)")
    p.add_argument("--noise", type=float, default=0.0, metavar="SIGMA",
                   help="each decode's time times exp(N(0, SIGMA)): a real machine's noise (0.1: about 10 %%; "
                        "default 0, exact costs)")
    p.add_argument("--noise-seed", type=int, default=0, help="with --noise: the noise's seed (the same for every mode)")
    p.add_argument("--propose-ms", type=float, default=0.0,
                   help="virtual milliseconds each suffix proposal costs (the Python a step pays to ask; default 0; "
                        "0.165 timed in the real process on the 2-core AMD, ~5x what the same code takes here)")
    p.add_argument("--trace", action="store_true",
                   help="print each drafting step on stderr as scripts/measure/trace_drafts.py does (the odds sent, "
                        "what the length was priced at and what it cost)")
    args = p.parse_args()
    if args.trace:
        from trace_drafts import wrap_observer  # this script's folder is on sys.path when run as a script

        wrap_observer()
    global PROPOSE_S, AFTERMATH, PREFILL_S, NOISE, NOISE_SEED
    PROPOSE_S = args.propose_ms / 1000
    AFTERMATH = args.aftermath
    NOISE, NOISE_SEED = args.noise, args.noise_seed
    curve = (use_curve(args.curve) if args.curve else use_rows(args.verify_rows) if args.verify_rows
             else use_shapes(args.shapes) if args.shapes else "the bare decodes timed on this machine")
    if args.prefill_ms is not None:
        PREFILL_S = args.prefill_ms / 1000
    if args.record:
        record(args.record, args.n, args.replay, args.sessions, args.temp, args.seed)
        return 0
    data = json.loads(args.replay.read_text())
    if isinstance(data, dict) and (args.learnt or args.texts != "none"):
        raise SystemExit("--learnt and --texts read a bench_serve.py JSON, not recorded answers")
    if isinstance(data, dict):  # recorded answers
        if args.repeat > 1:
            data = {**data, "items": [{**item, "id": f"{item['id']}#{n}"}
                                      for n in range(1, args.repeat + 1) for item in data["items"]]}
        rows = prompt_runs(data, args.modes.split(","), args.fresh_costs, end_tokens(args.target))
        how = (f"sampled at temperature {data['temperature']}, seed {data['seed']}" if data.get("temperature")
               else "greedy")
        source = f"{data['prompts']}, {data['max_tokens']} tokens an answer, recorded {how}"
    else:
        from specllama.llama.model import GGUFModel

        runs = [r for r in data if r.get("part") == "agentic" and r["drafter"] == args.texts]
        run = runs[-1] if args.round is None else next(r for r in runs if r["round"] == args.round)
        if args.learnt:
            auto = next((r for r in data if r.get("part") == "agentic" and r["drafter"] == "auto"
                         and r["round"] == run["round"] and r.get("learnt_costs")), None)
            if auto is None:
                raise SystemExit(f"{args.replay}: no learnt_costs of an auto run in round {run['round']} "
                                 "(bench_serve.py records them since 2026-11-28)")
            curve = use_learnt(auto["learnt_costs"], f"{args.replay} round {run['round']} by its auto server")
        sessions = json.loads(args.sessions.read_text())
        sessions["sessions"] = sessions["sessions"][:len({t["session"] for t in run["turns"]})]
        target = GGUFModel(args.target, vocab_only=True)
        rows = prompt_runs(session_items(target, sessions, run["texts"]), args.modes.split(","), args.fresh_costs,
                           target.eog_ids)
        source = f"{args.replay} round {run['round']} (the `{args.texts}` arm's texts)"
    base = {r["request"]: r["seconds"] for r in rows if r["mode"] == "none"}
    known = "learnt from its own steps (fresh costs)" if args.fresh_costs else "known from the start"
    print(f"T(1) {T1 * 1000:.1f} ms; T(n)/T(1) of {curve}, {known}; a suffix proposal costs {args.propose_ms} ms, "
          f"a plain step after another shape {AFTERMATH} plain steps more; "
          f"{f'decode times x exp(N(0, {NOISE})), seed {NOISE_SEED}' if NOISE else 'no noise'}; "
          f"replayed: {source}")
    print("| mode | request | seconds | vs none | tokens | drafted | accepted |\n|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['mode']} | {r['request']} | {r['seconds']:.2f} | "
              f"{base[r['request']] / r['seconds']:.2f}x | {r['tokens']} | {r['drafted']} | {r['accepted']} |")
    for mode in args.modes.split(","):
        mine = [r for r in rows if r["mode"] == mode]
        total = sum(r["seconds"] for r in mine)
        worst = min(base[r["request"]] / r["seconds"] for r in mine)
        print(f"{mode}: {total:.1f} s, {sum(base.values()) / total:.3f}x of none, worst request {worst:.2f}x")
    for mode, kinds in SHAPE_COUNTS.items():
        print(f"{mode}: " + "; ".join(f"{kind} decodes {cold} cold, {warm} warm, {extra:.0f} ms beyond their steady cost"
                                      for kind, (cold, warm, extra) in kinds.items()))
    if args.calibration:
        print_calibration()
    return 0


def print_calibration() -> None:
    """Each mode's calibrator, per draft group over all raw-confidence bins: proposed tokens judged and
    the share right (a lone occurrence and several alike)."""
    from specllama.decoding.suffix_groups import group_label

    for mode, calibrator in CALIBRATORS.items():
        if not any(map(sum, calibrator.judged)):
            continue
        print(f"\n{mode}: suffix proposals judged per draft group\n| group | judged | right |\n|---|---|---|")
        for group, (judged, accepted) in enumerate(zip(calibrator.judged, calibrator.accepted)):
            if sum(judged):
                print(f"| {group_label(group)} | {sum(judged)} | {sum(accepted) / sum(judged):.2f} |")


if __name__ == "__main__":
    sys.exit(main())
