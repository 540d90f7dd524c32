"""What the suffix drafter costs in Python per step: index update + lookup, at a 4k-token context,
without and with a 1 MB corpus. No model: the "output" is the real continuation of a text, so the
drafter sees realistic repetition and each step commits its accepted prefix + one token, as the
engine would under greedy verification.

Text: Python stdlib sources split into words, spaces and punctuation (a stand-in for a tokenizer).

    PYTHONPATH=. python scripts/measure/suffix_drafter.py [--k 8] [--steps 400] [--corpus-bytes N]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from specllama.decoding.drafters import DraftRequest
from specllama.decoding.planner import cut_free
from specllama.decoding.request import GenerationConfig
from specllama.decoding.suffix_drafter import SuffixDrafter
from specllama.decoding.suffix_groups import suffix_calibrator

# T(n)/T(1) as measured for the 1.5B target on the 2-core machine (llama-bench, 1.5B Q4_K_M: 1.61 at n = 3)
TWO_CORE_RATIOS = [1.0, 1.3, 1.61, 1.9, 2.2, 2.5, 2.8, 3.1, 3.4]

TOKEN_RE = re.compile(r"\w+|[ \t]+|\n|[^\w\s]")


def stdlib_files() -> list[Path]:
    root = Path(re.__file__).parent.parent  # .../lib/python3.X
    return sorted(p for p in root.glob("*.py") if p.stat().st_size > 20_000)


class Vocab:
    def __init__(self):
        self.ids: dict[str, int] = {}

    def tokenize(self, text: str) -> list[int]:
        return [self.ids.setdefault(w, len(self.ids)) for w in TOKEN_RE.findall(text)]


def run(drafter, text: list[int], prompt_len: int, steps: int, k: int, cut: bool = False):
    """`cut`: -k auto (the planner cuts the draft by confidence on the 2-core curve), else a fixed K."""
    committed = list(text[:prompt_len])
    config = GenerationConfig(k="auto" if cut else k)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    drafter.prefill(0, committed)
    prefill_ms = (time.perf_counter() - t0) * 1e3
    times, produced, drafted, verify_cost = [], 0, 0, 0.0
    for _ in range(steps):
        pos = len(committed)
        if pos + k + 1 > len(text):
            break
        t0 = time.perf_counter()
        proposal = drafter.propose([DraftRequest(0, committed, k, config, rng)])[0]
        if cut:  # the planner's one cut of a free draft (Planner.cut), on the 2-core curve
            cut_free(proposal, two_core_ratio)
        times.append((time.perf_counter() - t0) * 1e3)
        truth = text[pos:pos + k + 1]
        n = 0
        while n < len(proposal.tokens) and proposal.tokens[n] == truth[n]:
            n += 1
        drafter.observe(0, proposal, n)
        committed.extend(truth[:n + 1])
        produced += n + 1
        drafted += len(proposal.tokens)
        verify_cost += two_core_ratio(len(proposal.tokens) + 1) or float("nan")
    return prefill_ms, times, produced, drafted, verify_cost


def two_core_ratio(n: int) -> float | None:
    return TWO_CORE_RATIOS[n - 1] if 1 <= n <= len(TWO_CORE_RATIOS) else None


def report(label, prefill_ms, times, produced, drafted, verify_cost, drafter):
    times_sorted = sorted(times)
    p95 = times_sorted[int(0.95 * (len(times) - 1))]
    print(f"{label}: prefill {prefill_ms:.1f} ms; per step mean {statistics.mean(times):.3f} ms, "
          f"median {statistics.median(times):.3f} ms, p95 {p95:.3f} ms over {len(times)} steps; "
          f"{produced / len(times):.2f} tokens/step, {drafted / len(times):.2f} drafted/step, "
          f"speedup on the 2-core curve {produced / verify_cost:.2f}x; "
          f"indexes {index_tokens(drafter)} tokens, {index_bytes(drafter) / 2**20:.1f} MiB")


def _indexes(drafter: SuffixDrafter):
    return [drafter.history, drafter.corpus, *drafter.live.values()]


def index_tokens(drafter: SuffixDrafter) -> int:
    return sum(i.retained_tokens for i in _indexes(drafter))


def index_bytes(drafter: SuffixDrafter) -> int:
    return sum(i.nbytes() for i in _indexes(drafter))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--corpus-bytes", type=int, default=1 << 20)
    args = ap.parse_args(argv)

    files = stdlib_files()
    vocab = Vocab()
    # The "document" being generated: a module the corpus does not contain.
    target = next(p for p in files if p.name == "typing.py") if any(p.name == "typing.py" for p in files) else files[0]
    text = vocab.tokenize(target.read_text(encoding="utf-8"))
    prompt_len = 4000  # a 4k-token context, growing from here
    print(f"python {sys.version.split()[0]}; text {target.name}: {len(text)} tokens; k = {args.k}")

    # (Prompt lookup, which the suffix drafter replaced, measured here before it went: 0.248 ms a
    # step, 1.74 tokens/step at K = 8, 0.60x on the 2-core curve.)
    drafter = SuffixDrafter()
    report("4k context, no corpus", *run(drafter, text, prompt_len, args.steps, args.k), drafter)

    drafter = SuffixDrafter(calibrator=suffix_calibrator())
    report("  ... calibrated, draft cut by the 2-core curve",
           *run(drafter, text, prompt_len, args.steps, args.k, cut=True), drafter)

    corpus_path = Path("/tmp/specllama_suffix_corpus.txt")
    pieces, size = [], 0
    for p in files:
        if p == target:
            continue
        s = p.read_text(encoding="utf-8", errors="replace")
        pieces.append(s)
        size += len(s.encode())
        if size >= args.corpus_bytes:
            break
    corpus_path.write_text("".join(pieces)[:args.corpus_bytes], encoding="utf-8")
    drafter = SuffixDrafter()
    t0 = time.perf_counter()
    n_corpus = drafter.load_corpus(corpus_path, vocab.tokenize)
    load_s = time.perf_counter() - t0
    print(f"corpus {corpus_path.stat().st_size / 2**20:.2f} MB, {n_corpus} tokens: loaded in {load_s:.2f} s "
          f"(tokenizing included)")
    report("4k context + 1 MB corpus", *run(drafter, text, prompt_len, args.steps, args.k), drafter)

    # The same, with the draft cut to its best length by calibrated confidence and a 2-core curve.
    # The same text from the same point, so the rows compare like with like.
    drafter = SuffixDrafter(calibrator=suffix_calibrator())
    drafter.load_corpus(corpus_path, vocab.tokenize)
    report("  ... calibrated, draft cut by the 2-core curve",
           *run(drafter, text, prompt_len, args.steps, args.k, cut=True), drafter)
    print("  calibration (raw range -> predicted / observed, count), bins with data:")
    for row in drafter.calibrator.report():
        if row.count:
            print(f"    group {row.group} [{row.low:.1f}, {row.high:.1f}) -> {row.predicted:.2f} / "
                  f"{row.observed:.2f}, {row.count}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
