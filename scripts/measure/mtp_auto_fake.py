"""`--drafter auto` with an MTP head on the fake backend's cost curves (tests/unit/test_mtp_auto.py:
llama.cpp #23752's Metal run, #22673's Vulkan run, a winning Strix Halo curve): its speed against
plain decoding on the same file (whose every decode feeds the head) and on a file without the head,
in virtual seconds, so the numbers are exact and the same on any machine.

    nice -n 19 python scripts/measure/mtp_auto_fake.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.unit.test_mtp_auto import (  # noqa: E402
    HEADS,
    HEADS_MADE,
    METAL_23752,
    STRIX_VLLM,
    VULKAN_22673,
    mtp_tokens,
    run,
)

CASES = [("metal-23752", METAL_23752, "always-right"), ("metal-23752", METAL_23752, "wrong-every-5"),
         ("vulkan-22673", VULKAN_22673, "wrong-every-5"), ("vulkan-22673", VULKAN_22673, "always-right"),
         ("strix-vllm", STRIX_VLLM, "always-right"), ("strix-vllm", STRIX_VLLM, "wrong-every-5")]


def main() -> None:
    print("| curve | head | auto vs plain, same file | auto vs plain, no head | steps with mtp drafts | rows fed to the head |")
    print("|---|---|---|---|---|---|")
    for name, curve, head in CASES:
        same_file, _, _ = run("none", curve, head=True)
        plain, _, _ = run("none", curve)
        auto, steps, _ = run("auto", curve, HEADS[head])
        mtp_steps = sum(s.source == "mtp" for s in steps)
        print(f"| {name} | {head} | {same_file / auto:.3f}x | {plain / auto:.3f}x | {mtp_steps}/{len(steps)} "
              f"({mtp_tokens(steps)} tokens) | {HEADS_MADE[-1].fed_rows} |")


if __name__ == "__main__":
    main()
