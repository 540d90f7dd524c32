"""The chat's decode rate after an answer stopped with Esc and a new question sent at once: the case
where Textual's executor gave the next answer a second worker thread (llama/decode_threads.py).

Each measured process runs the real ChatApp headless (App.run_test) on the default pair's target,
`--drafter none`, greedy: answer 1 to --max-tokens; answer 2 stopped with Esc as soon as its text
shows, answer 3 asked at once and run to --max-tokens. Per answer: the engine's tokens/s and the
process's voluntary context switches while it ran (OpenMP threads asleep at barriers switch
thousands of times an answer). Arms: this tree, and with --old DIR a checkout of other code (a
worktree at an older commit), fresh processes in turn, the order flipping each round.

    flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/chat_decode_thread.py \
        [--old DIR] [--rounds 2] [--max-tokens 64] [--out bench/measured/NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts" / "measure"))

QUESTIONS = ("Write a Python function that reverses the words of a sentence.",
             "Explain what a hash map is, at length.",
             "Write a Python function that counts the vowels in a string.")


def child(out: str, max_tokens: int) -> None:
    """Inside the measured process (its specllama from PYTHONPATH): three answers, the second stopped."""
    from specllama.llama import thread_wait

    thread_wait.configure(None, None)  # as every command does, before llama.cpp loads
    import asyncio
    import resource
    import time

    from specllama.runtime import LoadOptions, open_runtime
    from specllama.tui import ChatApp, ChatSettings

    app = ChatApp(lambda progress, status: open_runtime(LoadOptions(load_draft=False), progress=progress, status=status),
                  ChatSettings(drafter="none", max_tokens=max_tokens))
    answers = []

    async def wait(pilot, condition) -> None:
        deadline = time.monotonic() + 600
        while not condition() and time.monotonic() < deadline:
            await pilot.pause(0.02)

    async def answered(pilot, question: str, stop: bool) -> None:
        switches = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
        app.ask(question)
        await wait(pilot, lambda: app.busy)
        if stop:
            reply = app.query("ChatMessage").last()
            await wait(pilot, lambda: reply.text)
            await pilot.press("escape")
        await wait(pilot, lambda: not app.busy)
        s = app.last_summary
        answers.append({"tokens": s.tokens, "tokens_per_s": round(s.tokens_per_s, 2), "finish": s.finish_reason,
                        "voluntary_switches": resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - switches})

    async def session() -> None:
        async with app.run_test(size=(110, 34)) as pilot:
            await wait(pilot, lambda: app.runtime is not None)
            for question, stop in zip(QUESTIONS, (False, True, False)):
                await answered(pilot, question, stop)

    try:
        asyncio.run(session())
    finally:
        app.close_runtime()
    Path(out).write_text(json.dumps(answers))


def measured(code: Path, max_tokens: int) -> list[dict]:
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        env = {**os.environ, "PYTHONPATH": str(code)}
        subprocess.run([sys.executable, __file__, "--child", f.name, "--max-tokens", str(max_tokens)], cwd=code, env=env,
                       check=True, capture_output=True)
        return json.loads(Path(f.name).read_text())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--old", metavar="DIR", help="another checkout to measure beside this tree")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--out", help="write OUT.md and OUT.json")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.child, args.max_tokens)
        return 0
    from report_files import show_and_write

    from specllama.llama.machine import cpu_model

    arms = [("this tree", REPO)] + ([("old", Path(args.old).resolve())] if args.old else [])
    runs = []
    for r in range(args.rounds):
        for name, code in (arms if r % 2 == 0 else arms[::-1]):
            answers = measured(code, args.max_tokens)
            runs.append({"round": r, "arm": name, "answers": answers})
            print(runs[-1], flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    old = (subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=args.old, capture_output=True, text=True).stdout.strip()
           if args.old else "-")
    head = (f"{cpu_model()}; the default pair's target, --drafter none, greedy, --max-tokens {args.max_tokens}; this tree at "
            f"{commit}, old at {old}; answer 2 stopped with Esc as soon as its text showed, answer 3 asked at once")
    lines = ["| round | code | answer 1 tok/s (switches) | answer 3 tok/s (switches) |", "|---|---|---|---|"]
    lines += [f"| {x['round']} | {x['arm']} | {x['answers'][0]['tokens_per_s']:.2f} ({x['answers'][0]['voluntary_switches']}) | "
              f"{x['answers'][2]['tokens_per_s']:.2f} ({x['answers'][2]['voluntary_switches']}) |" for x in runs]
    show_and_write(args.out, "The chat after Esc and a new question", "chat_decode_thread.py",
                   argv if argv is not None else sys.argv[1:], head, lines, {"runs": runs})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
