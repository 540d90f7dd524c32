"""Write docs/serve.md's conformance table: canitoolcall's offline fixtures replayed through
specllama's serving layer (tests/support/canitoolcall_replay.py), per family, next to the totals
canitoolcall publishes for other engines.

    python scripts/canitoolcall_table.py          # rewrites the table between its markers in docs/serve.md
    python scripts/canitoolcall_table.py --print  # prints it instead
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from canitoolcall import __version__  # noqa: E402
from canitoolcall.results import Status  # noqa: E402

from tests.support.canitoolcall_replay import STRATEGIES, replay_families  # noqa: E402

DOC = REPO / "docs" / "serve.md"
BEGIN, END = "<!-- canitoolcall table: begin -->", "<!-- canitoolcall table: end -->"
# canitoolcall 0.1.1's README (its 2026-09-25 snapshot): supported fixtures, pass, soft pass, fail.
PUBLISHED = (("vLLM 0.30.0", 469, 268, 86, 115), ("SGLang 0.5.20", 448, 189, 62, 197),
             ("llama.cpp a25c9865", 438, 278, 46, 114), ("Ollama 7af39318", 261, 224, 10, 27))


def table() -> str:
    results = replay_families()
    lines = [f"canitoolcall {__version__}, strategies {', '.join(STRATEGIES)} (char:* checked for stream = whole, "
             "not counted in a case's status); `python scripts/canitoolcall_table.py` writes this table.", "",
             "| family | fixtures | supported | pass | soft pass | fail | stream != whole |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    total = [0] * 6
    for family in sorted(results):
        r = results[family]
        row = [len(r.cases), r.supported, r.count(Status.PASS), r.count(Status.SOFT_PASS),
               r.count(Status.FAIL) + r.count(Status.ERROR), len(r.stream_differences())]
        total = [a + b for a, b in zip(total, row)]
        lines.append(f"| {family} | " + " | ".join(map(str, row)) + " |")
    lines.append("| **specllama, all** | " + " | ".join(f"**{n}**" for n in total) + " |")
    lines += ["", "Unsupported: " + "; ".join(f"{family}: {n} fixtures ({why})" for family, r in sorted(results.items())
                                             for why, n in r.unsupported_reasons().items()) + ".", "",
              "The other engines, as canitoolcall publishes them (all families together; its per-family matrix is on "
              "its site, not in the package):", "",
              "| engine | supported | pass | soft pass | fail |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {name} | {n} | {p} | {s} | {f} |" for name, n, p, s, f in PUBLISHED]
    return "\n".join(lines)


def main() -> None:
    text = table()
    if "--print" in sys.argv:
        print(text)
        return
    doc = DOC.read_text()
    head, _, rest = doc.partition(BEGIN)
    _, _, tail = rest.partition(END)
    DOC.write_text(head + BEGIN + "\n" + text + "\n" + END + tail)


if __name__ == "__main__":
    main()
