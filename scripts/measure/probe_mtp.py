"""Does llama-cpp-python 0.3.36 reach everything an MTP (multi-token prediction) drafter needs?
Runs llama.cpp's draft-mtp protocol (tests/support/mtp_reference.py, written out plainly on the bindings)
on a GGUF with nextn layers (default: tests/support/toy_models.py's qwen35 toy, written now) and prints the
target's next token and the MTP layer's drafts after it; `--drafter mtp` (llama/mtp.py) is checked
against the same reference by tests/integration/test_mtp_drafter.py.

    nice -n 19 python scripts/measure/probe_mtp.py --tokenizer-from QWEN.gguf [--gguf MODEL.gguf] [-k 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specllama.llama.backend import C  # noqa: E402
from tests.support.mtp_reference import reference_drafts  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer-from", type=Path)
    parser.add_argument("--gguf", type=Path, help="a GGUF with nextn layers (default: the qwen35 toy)")
    parser.add_argument("-k", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.gguf
        if path is None:
            from tests.support.toy_models import write_toy_model
            path = write_toy_model(Path(tmp) / "qwen35.gguf", "qwen35", args.tokenizer_from)
        prompt = [1000 + 37 * i % 5000 for i in range(20)]
        last, drafts = reference_drafts(path, prompt, args.k)
        print(f"{path.name}: llama_cpp {C.__version__}; the target's next token {last}, MTP drafts after it {drafts}")


if __name__ == "__main__":
    main()
