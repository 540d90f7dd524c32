#!/usr/bin/env python3
"""How often does a suffix draft hold, by match length and raw confidence? The evidence behind the
calibrator's cold prior (acceptance.Calibrator, suffix_groups.COLD_FLOORS).

The real target answers each prompt greedily with the suffix drafter at a fixed K (every match of
MIN_MATCH tokens or more is sent, whatever its confidence), so every kind of draft is judged; the
calibrator's table at the end is the acceptance observed per match-length class and raw-confidence
bin. Each prompt starts with a fresh drafter (no earlier text to draft from but its own prompt and
output), as in a one-shot `run`.

    .venv/bin/python scripts/measure/suffix_calibration.py bench/prompts_similar.jsonl --agent-sessions
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from specllama.decoding.engine import DoneEvent, Request  # noqa: E402
from specllama.decoding.request import GenerationConfig  # noqa: E402
from specllama.decoding.suffix_groups import group_label, suffix_calibrator  # noqa: E402
from specllama.llama.machine import cpu_model  # noqa: E402
from specllama.runtime import LoadOptions, open_runtime  # noqa: E402


def prompts(files: list[str], agent_sessions: bool) -> list[tuple[str, list[dict]]]:
    out = []
    for name in files:
        for line in Path(name).read_text().splitlines():
            if line.strip():
                item = json.loads(line)
                out.append((item["id"], [{"role": "user", "content": item["prompt"]}]))
    if agent_sessions:  # each session's first request, as an agent sends it
        sessions = json.loads((REPO / "bench" / "agent_sessions.json").read_text())
        for s in sessions["sessions"]:
            ask = f"{s['file']}:\n```python\n{s['content']}```\n\n{s['turns'][0]}"
            out.append((s["id"], [{"role": "system", "content": sessions["system"]}, {"role": "user", "content": ask}]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="prompts JSONL files (id, prompt)")
    ap.add_argument("--agent-sessions", action="store_true", help="also bench/agent_sessions.json's first requests")
    ap.add_argument("-k", type=int, default=8, help="fixed draft length (default 8)")
    ap.add_argument("-n", "--max-tokens", type=int, default=160)
    ap.add_argument("-t", "--threads", type=int, default=None)
    ap.add_argument("--json", help="write the table as JSON here too")
    args = ap.parse_args()

    runtime = open_runtime(LoadOptions(load_draft=False, threads=args.threads))
    total = suffix_calibrator()
    config = GenerationConfig(max_tokens=args.max_tokens, drafter="suffix", k=args.k)
    for name, messages in prompts(args.files, args.agent_sessions):
        runtime.reset()  # no earlier prompt's text to draft from
        runtime.suffix.calibrator = suffix_calibrator()
        for _, event in runtime.run_many([Request(runtime.chat_tokens(messages), config)], parallel=1):
            if isinstance(event, DoneEvent):
                s = event.summary
                print(f"{name}: {s.tokens} tokens, {s.accepted}/{s.drafted} drafts accepted", file=sys.stderr)
        seen = runtime.suffix.calibrator
        for g in range(total.groups):
            for b in range(total.bins):
                total.judged[g][b] += seen.judged[g][b]
                total.accepted[g][b] += seen.accepted[g][b]
    runtime.close()

    print(f"machine: {cpu_model()}; target {runtime.target_name}, threads {runtime.threads}, "
          f"fixed K = {args.k}, greedy, {args.max_tokens} tokens at most per prompt")
    print("| match | raw confidence | judged | accepted | observed |")
    print("|---|---|---|---|---|")
    rows = []
    for r in total.report():
        if r.count:
            acc = total.accepted[r.group][int(r.low * total.bins + 1e-9)]
            print(f"| {group_label(r.group)} | {r.low:.1f}-{r.high:.1f} | {r.count} | {acc} | {acc / r.count:.2f} |")
            rows.append({"match": group_label(r.group), "raw_low": r.low, "raw_high": r.high,
                         "judged": r.count, "accepted": acc})
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": cpu_model(), "platform": platform.platform(),
                                               "target": runtime.target_name, "k": args.k, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
