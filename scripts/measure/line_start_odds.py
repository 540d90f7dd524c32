"""Is a suffix draft's token at the start of a line the riskier one? Every answer recorded in
bench/measured/vm-20261126-greedy-answers (the target's greedy text, as token ids) is walked token by
token; at each position the suffix drafter (fresh for each answer, its prompt prefilled) proposes up to
16 tokens, judged against the answer until the first miss. Each judged token is counted by whether it
starts a line (the token before it, committed or drafted, ends with a newline), where its match lies
(the prompt, or the answer's own output) and the match-length class (suffix_groups.MATCH_LABELS).

Why: edit-js-async lost 8 % to two 8-token copies of a prompt line that the answer re-indented, sent at
0.96-0.99 odds (bench/measured/vm-20261127-r4-trace-unseen.txt); if line starts were where copies break,
they would want a calibration group of their own. Nothing is decoded: the vocabulary is read from the GGUF.

    python scripts/measure/line_start_odds.py [SET ...]    # default: every recorded set
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from specllama.decoding.drafters import DraftRequest  # noqa: E402
from specllama.decoding.suffix_drafter import SuffixDrafter  # noqa: E402
from specllama.decoding.suffix_groups import MATCH_LABELS, match_group  # noqa: E402

ANSWERS = REPO / "bench" / "measured" / "vm-20261126-greedy-answers"
TARGET = Path.home() / ".cache" / "specllama" / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


def newline_ends(target: Path) -> list[bool]:
    """Per token id: its text ends with a newline (byte-level BPE writes it as 'Ċ')."""
    from gguf import GGUFReader

    field = GGUFReader(str(target)).fields["tokenizer.ggml.tokens"]
    return [bytes(field.parts[i]).decode("utf-8", "replace").endswith("Ċ") for i in field.data]


def judged_tokens(item: dict, ends_line: list[bool], k: int = 16):
    """(starts a line, own output, match class, accepted) for every judged token of every proposal."""
    drafter = SuffixDrafter()
    prompt, answer = list(item["prompt"]), list(item["answer"])
    drafter.prefill(0, prompt)
    for i in range(len(answer)):
        committed = prompt + answer[:i]
        proposal = drafter.propose([DraftRequest(0, committed, k, None, None)])[0]
        before = committed[-1]
        for j, token in enumerate(proposal.tokens[:len(answer) - i]):
            hit = token == answer[i + j]
            yield ends_line[before], proposal.own, match_group(proposal.match_length), hit
            if not hit:
                break
            before = token


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="*", help="recorded sets by name (default: all in vm-20261126-greedy-answers)")
    ap.add_argument("--target", type=Path, default=TARGET, help="the GGUF whose vocabulary the answers use")
    args = ap.parse_args()
    names = args.sets or sorted(p.stem for p in ANSWERS.glob("*.json"))
    ends_line = newline_ends(args.target)
    counts: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for name in names:
        for item in json.loads((ANSWERS / f"{name}.json").read_text())["items"]:
            for line_start, own, group, hit in judged_tokens(item, ends_line):
                counts[(own, group, line_start)][0] += hit
                counts[(own, group, line_start)][1] += 1
    print(f"sets: {', '.join(names)}; every position's proposal (up to 16 tokens) judged to its first miss")
    print("| match | in | line start: accepted | elsewhere: accepted |")
    print("|---|---|---|---|")
    for own in (False, True):
        for group in range(len(MATCH_LABELS)):
            cells = []
            for line_start in (True, False):
                hits, n = counts.get((own, group, line_start), (0, 0))
                cells.append(f"{hits / n:.2f} of {n}" if n else "-")
            print(f"| {MATCH_LABELS[group]} | {'own output' if own else 'prompt'} | {cells[0]} | {cells[1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
