"""Tokenizing text full of special-token texts: llama.cpp handed the whole text (what specllama did
before issue 33) against GGUFModel.tokenize (pieces cut before the special tokens, special_text.py).

For each size, `<|im_end|>x` repeated, parse_special on (a raw /v1/completions prompt, a rendered
chat), the two are timed interleaved (old, new, new, old, ...) and the medians reported; the
tokens are checked equal. The old way is skipped above --old-up-to bytes (it grows as the square).

  flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/tokenize_special.py --out bench/measured/NAME
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from specllama.llama.machine import cpu_model  # noqa: E402
from specllama.llama.model import GGUFModel  # noqa: E402
from specllama.models import store  # noqa: E402
from specllama.models.registry import load_registry  # noqa: E402


def timed(fn) -> tuple[float, list[int]]:
    started = time.perf_counter()
    tokens = fn()
    return time.perf_counter() - started, tokens


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="qwen2.5-coder-0.5b", help="whose vocabulary (a registry name or a path)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--old-up-to", type=int, default=500_000)
    p.add_argument("--out")
    args = p.parse_args()
    path = Path(args.model) if Path(args.model).exists() else store.ensure(load_registry().model(args.model))
    model = GGUFModel(path, vocab_only=True)
    model.special_texts  # read once, as the server does at start
    rows = []
    for n in (5_000, 10_000, 20_000, 40_000, 80_000, 160_000):
        text = "<|im_end|>x" * n
        data = text.encode()
        old_times, new_times = [], []
        run_old = len(data) <= args.old_up_to
        for r in range(args.repeats):
            order = ("old", "new") if r % 2 == 0 else ("new", "old")
            for which in order:
                if which == "old" and run_old:
                    seconds, old_tokens = timed(lambda: model._tokenize_bytes(data, False, True))
                    old_times.append(seconds)
                elif which == "new":
                    seconds, new_tokens = timed(lambda: model.tokenize(text, add_special=False))
                    new_times.append(seconds)
        row = {"bytes": len(data), "new_s": statistics.median(new_times), "new_runs": new_times}
        if run_old:
            assert old_tokens == new_tokens, "the pieces tokenized differently"
            row |= {"old_s": statistics.median(old_times), "old_runs": old_times,
                    "ratio": statistics.median(old_times) / statistics.median(new_times)}
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    result = {"machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "system": platform.platform()},
              "vocabulary": path.name, "repeats": args.repeats, "rows": rows}
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out + ".json").write_text(json.dumps(result, indent=2) + "\n")
        lines = ["# Tokenizing `<|im_end|>x` repeated: llama.cpp whole vs in pieces", "",
                 f"Command: `flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/tokenize_special.py "
                 f"--out {args.out}`",
                 f"Machine: {result['machine']['cpu']}, {result['machine']['cores']} cores (shared), "
                 f"{result['machine']['system']}; one thread. Vocabulary: {path.name} (Qwen2.5), parse_special on; "
                 f"medians of {args.repeats} interleaved runs; the tokens of both ways compared equal.", "",
                 "| bytes | llama.cpp whole (s) | in pieces (s) | ratio |", "|---|---|---|---|"]
        for row in rows:
            old = f"{row['old_s']:.3f}" if "old_s" in row else "not run"
            ratio = f"{row['ratio']:.0f}x" if "ratio" in row else ""
            lines.append(f"| {row['bytes']:,} | {old} | {row['new_s']:.3f} | {ratio} |")
        Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
