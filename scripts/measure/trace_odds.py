"""Did the drafts a real run sent keep their promise? Reads trace_drafts.py's lines (its stderr) and prints
how often each draft position was right against the odds it was sent with, and what the drafts realised
against what they promised, in bins of the promise.

Why: a replay (policy_replay.py) judges a policy on recorded texts with exact costs, where the odds are
calibrated by construction of the test; a real run also pays for noisy step costs and for the texts the
tuning never saw. On twelve prompts written blind (bench/prompts_unseen4.jsonl, 2-core AMD) the sent drafts'
first tokens were stated at 0.84 and right 0.72 of the time, while the replay of the same texts read 0.85
against 0.80 (bench/measured/vm-20261128-r7-unseen4.md).

    python scripts/measure/trace_odds.py trace.txt [more traces] [--prompts bench/prompts_unseen4.jsonl]

The promise of a draft is E(tokens) / (T(n+1)/T(1)) with the odds and the step cost the trace line
shows: the cost is the estimate just after the step was timed (its own sample in), not the one it was
chosen on, so a draft sent on an optimistic estimate shows a lower promise here than it was sent with.
The odds the trace prints stop at 8 tokens; later tokens are taken at the 8th's odds.
`--prompts`: the prompt set a `bench` trace ran (one auto config), to sum the drafts' net per prompt (a
trace's first prompt is bench's warm-up).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specllama.decoding.cost.model import expected_tokens  # noqa: E402

LINE = re.compile(r"step +\d+ (?P<source>\S+) sent +(?P<sent>\d+) accepted +(?P<accepted>\d+) odds \[(?P<odds>[^\]]*)\] +"
                  r"(?P<ms>[\d.]+) ms, plain step +(?P<t1>[\d.]+) ms, T\(\d+\)/T\(1\) (?P<ratio>[\d.]+)")
PROMPT_START = "--- a prompt"
BINS = ((1.15, "< 1.15"), (1.3, "1.15-1.3"), (1.5, "1.3-1.5"), (2.0, "1.5-2"), (float("inf"), "2+"))
POSITIONS = 8  # the trace prints the first 8 tokens' odds


@dataclass(frozen=True)
class Draft:
    prompt: int  # the how-manieth prompt start of the trace it followed (-1: none seen yet)
    sent: int
    accepted: int
    odds: tuple[float, ...]  # one per token sent
    cost: float  # the step in plain steps, as timed
    ratio: float  # T(sent+1)/T(1) as the costs read after the step

    @property
    def expected(self) -> float:
        """E(tokens): the target's own token plus each draft token's chance of being reached and right."""
        return expected_tokens(self.odds)[-1]

    @property
    def promise(self) -> float:
        return self.expected / self.ratio if self.ratio > 0 else 0.0

    @property
    def realised_tokens(self) -> int:
        return 1 + self.accepted


def read(lines) -> list[Draft]:
    drafts, prompt = [], -1
    for line in lines:
        if line.startswith(PROMPT_START):
            prompt += 1
            continue
        m = LINE.match(line)
        if not m:
            continue
        sent = int(m["sent"])
        odds = [float(x) for x in m["odds"].split(",") if x]
        odds += [odds[-1]] * (sent - len(odds)) if odds else []
        t1 = float(m["t1"])
        drafts.append(Draft(prompt, sent, int(m["accepted"]), tuple(odds[:sent]), float(m["ms"]) / t1 if t1 else 0.0,
                            float(m["ratio"])))
    return drafts


def by_position(drafts: list[Draft]) -> list[tuple[int, int, float, float]]:
    """(position, judged, mean stated odds, share right) for the first POSITIONS positions: a token is judged
    when every token before it was right (the first rejected one is judged too)."""
    judged: dict[int, list[tuple[float, bool]]] = defaultdict(list)
    for d in drafts:
        for j in range(min(d.sent, d.accepted + 1, POSITIONS)):
            judged[j].append((d.odds[j], j < d.accepted))
    return [(j, len(v), sum(o for o, _ in v) / len(v), sum(h for _, h in v) / len(v)) for j, v in sorted(judged.items())]


def by_promise(drafts: list[Draft]) -> list[tuple[str, int, float, float, float]]:
    """(bin, drafts, promised tokens a plain step, realised, net plain steps) per bin of the promise: promised
    is E(tokens) over the estimated step costs, realised the tokens kept over the steps as timed."""
    rows, low = [], 0.0
    for limit, label in BINS:
        mine = [d for d in drafts if low <= d.promise < limit]
        low = limit
        if not mine:
            continue
        cost, tokens = sum(d.cost for d in mine), sum(d.realised_tokens for d in mine)
        rows.append((label, len(mine), sum(d.expected for d in mine) / sum(d.ratio for d in mine), tokens / cost,
                     tokens - cost))
    return rows


def by_prompt(traces: list[list[Draft]], ids: list[str]) -> dict[str, tuple[int, int, float]]:
    """Per prompt id: (drafts, sent tokens, net plain steps), each bench trace's prompt starts mapped onto the
    set in order (the first start is the warm-up), repeats and traces summed."""
    out: dict[str, list] = {}
    for drafts in traces:
        for d in drafts:
            if d.prompt < 1:
                continue
            row = out.setdefault(ids[(d.prompt - 1) % len(ids)], [0, 0, 0.0])
            row[0] += 1
            row[1] += d.sent
            row[2] += d.realised_tokens - d.cost
    return {k: tuple(v) for k, v in out.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("traces", nargs="+", type=Path, help="trace_drafts.py's stderr, one file a run")
    p.add_argument("--prompts", type=Path, help="the prompt set a bench trace ran: the drafts' net per prompt")
    args = p.parse_args()
    per_file = [read(path.read_text().splitlines()) for path in args.traces]
    drafts = [d for ds in per_file for d in ds]
    if not drafts:
        raise SystemExit("no drafting steps in the traces (trace_drafts.py's lines: 'step N suffix sent ...')")
    print(f"{len(drafts)} drafts in {len(args.traces)} trace(s)\n")
    print("| position | judged | stated odds | right |\n|---|---|---|---|")
    for j, n, stated, right in by_position(drafts):
        print(f"| {j + 1} | {n} | {stated:.3f} | {right:.3f} |")
    print("\n| promised | drafts | promised tokens a plain step | realised | net (plain steps) |\n|---|---|---|---|---|")
    for label, n, promised, realised, net in by_promise(drafts):
        print(f"| {label} | {n} | {promised:.2f} | {realised:.2f} | {net:+.1f} |")
    if args.prompts:
        ids = [json.loads(line)["id"] for line in args.prompts.read_text().splitlines() if line.strip()]
        print("\n| prompt | drafts | tokens sent | net (plain steps) |\n|---|---|---|---|")
        per_prompt = by_prompt(per_file, ids)
        for k in ids:
            if k in per_prompt:
                n, sent, net = per_prompt[k]
                print(f"| {k} | {n} | {sent} | {net:+.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
