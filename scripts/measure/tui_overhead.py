#!/usr/bin/env python3
"""How much does the chat app cost? tokens/s in `specllama chat` against `specllama run`.

Both sides run as fresh processes, greedy, with the same prompt, K, max tokens and threads, and are
interleaved (the order flips every round) so a busy neighbour on a shared machine hurts both alike.
The figure compared is the engine's own Summary.tokens_per_s (generation only, loading and prompt
excluded), which `run --stats` prints and the app receives at the end of the answer.

The chat side runs the real app in a pseudo-terminal by default: Textual's normal driver paints
every frame as escape sequences, which this script reads and discards like a terminal would.
`--headless` uses `App.run_test()` instead, which still lays out and renders every frame through
the compositor but writes nothing.

    .venv/bin/python scripts/measure/tui_overhead.py --rounds 3 --max-tokens 128
    # what bench/measured/ keeps: --out bench/measured/NAME writes NAME.json and NAME.md
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

# The sample prompt `specllama run` answered when given none (it now prints its usage instead).
DEFAULT_PROMPT = "Write a Python function that tells whether a number is prime, with a short docstring."


def run_side(args) -> float:
    cmd = [sys.executable, "-m", "specllama", "run", args.prompt, "--stats", "-k", str(args.k),
           "--max-tokens", str(args.max_tokens), "--drafter", args.drafter]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL)
    match = re.search(r"\d+ tokens in [\d.]+ s · ([\d.]+) tok/s", done.stderr)
    if not match:
        raise SystemExit(f"no tokens/s in `specllama run` output:\n{done.stderr}")
    return float(match.group(1))


def chat_side(args) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        cmd = [sys.executable, __file__, "--child", str(result), "--prompt", args.prompt, "-k", str(args.k),
               "--max-tokens", str(args.max_tokens), "--drafter", args.drafter]
        if args.headless:
            subprocess.run(cmd + ["--headless"], cwd=REPO, check=True, capture_output=True)
        else:
            _run_in_pty(cmd, columns=110, lines=34)
        return json.loads(result.read_text())


def _run_in_pty(cmd: list[str], columns: int, lines: int) -> None:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
    child = subprocess.Popen(cmd, cwd=REPO, stdin=slave, stdout=slave, stderr=slave, env=env,
                             start_new_session=True)
    os.close(slave)
    painted = [0]

    def drain() -> None:  # what a terminal does with the app's output: read all of it
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            painted[0] += len(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    code = child.wait(timeout=900)
    reader.join(timeout=5)
    os.close(master)
    if code != 0:
        raise SystemExit(f"the chat app exited with {code}")
    print(f"    (the app wrote {painted[0] / 1e3:.0f} kB of terminal output)", file=sys.stderr)


def thread_cpu(native_id: int | None) -> float:
    """CPU seconds of one thread of this process (Linux), 0 when there is no such thread."""
    if native_id is None:
        return 0.0
    try:
        fields = Path(f"/proc/self/task/{native_id}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def child(args) -> None:
    """Inside the measured process: the real ChatApp with the real runtime, one question."""
    from specllama.runtime import LoadOptions, open_runtime
    from specllama.tui import ChatApp, ChatSettings
    from specllama.tui.capture import screen_text

    class MeasuredChat(ChatApp):
        # Textual runs a message's handler of every class in the MRO, this one's first and then
        # ChatApp's: these only add to ChatApp's handlers (no super() calls).
        def on_runtime_ready(self, message) -> None:
            self.call_later(self._start)

        def _writer_id(self) -> int | None:
            # Textual's Linux driver hands each frame's escape sequences to a writer thread.
            writer = getattr(self._driver, "_writer_thread", None)
            return getattr(writer, "native_id", None)

        def _start(self) -> None:
            self.ui_cpu = time.thread_time()  # CPU of the UI thread alone (handlers run on it)
            self.writer_cpu = thread_cpu(self._writer_id())
            self.ask(args.prompt)

        def on_conversation_view_answer_ended(self, message) -> None:
            s = message.summary
            Path(args.child).write_text(json.dumps({
                "tokens_per_s": s.tokens_per_s, "tokens": s.tokens, "finish": s.finish_reason,
                "acceptance": s.acceptance, "t_generate": s.t_generate,
                "ui_cpu_s": time.thread_time() - self.ui_cpu,
                "writer_cpu_s": thread_cpu(self._writer_id()) - self.writer_cpu,
                "paint_gap_s": self.view.live.gap, "screen": None, "threads": self.runtime.threads,
                "target": self.runtime.target_name, "draft": self.runtime.draft_name}))
            self.call_after_refresh(self._finish)  # capture the screen once it shows the summary

        def _finish(self) -> None:
            data = json.loads(Path(args.child).read_text())
            data["screen"] = screen_text(self)
            Path(args.child).write_text(json.dumps(data))
            self.finished = True
            self.exit()

    k = args.k if args.k == "auto" else int(args.k)
    settings = ChatSettings(drafter=args.drafter, k=k, max_tokens=args.max_tokens)
    # As `specllama run` loads: the draft only for the model drafter.
    opts = LoadOptions(load_draft=args.drafter == "model")
    app = MeasuredChat(lambda progress, status: open_runtime(opts, progress=progress, status=status), settings)
    app.finished = False
    try:
        if args.headless:
            import asyncio

            async def headless() -> None:
                async with app.run_test(size=(110, 34)) as pilot:
                    while not app.finished:
                        await pilot.pause(0.1)
            asyncio.run(headless())
        else:
            app.run()
    finally:
        app.close_runtime()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--prompt", default=DEFAULT_PROMPT)
    p.add_argument("-k", default="4", help="draft length or 'auto' (default 4)")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--drafter", default="model", choices=("auto", "suffix", "model", "none", "lookup"))
    p.add_argument("--headless", action="store_true", help="App.run_test() instead of a pseudo-terminal")
    p.add_argument("--show-screen", action="store_true", help="print the app's last screen as text")
    p.add_argument("--out", help="write PREFIX.json and PREFIX.md with every round, the machine, threads and models")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)

    runs, chats, screen, ui_shares, details = [], [], "", [], {}
    for i in range(args.rounds):
        order = ("run", "chat") if i % 2 == 0 else ("chat", "run")
        for side in order:
            if side == "run":
                runs.append(run_side(args))
                print(f"round {i + 1}: run  {runs[-1]:6.2f} tokens/s", file=sys.stderr)
            else:
                result = chat_side(args)
                chats.append(result["tokens_per_s"])
                screen = result["screen"] or screen
                details = result
                ui_share = result["ui_cpu_s"] / result["t_generate"]
                ui_shares.append(ui_share)
                print(f"round {i + 1}: chat {chats[-1]:6.2f} tokens/s ({result['tokens']} tokens, "
                      f"{result['finish']}; UI thread CPU {result['ui_cpu_s']:.2f} s = {ui_share:.1%} of one core, "
                      f"writer thread {result['writer_cpu_s']:.2f} s; paints every {result['paint_gap_s']:.2f} s at the end)",
                      file=sys.stderr)
    run_median, chat_median = statistics.median(runs), statistics.median(chats)
    # Each round's two runs ran back to back, so their ratio cancels most of a neighbour's load.
    paired = [c / r for c, r in zip(chats, runs)]
    mode = "headless" if args.headless else "pty"
    print(f"run  median {run_median:.2f} tokens/s  " + " ".join(f"{x:.2f}" for x in runs))
    print(f"chat median {chat_median:.2f} tokens/s  " + " ".join(f"{x:.2f}" for x in chats) + f"  ({mode})")
    print(f"chat / run: ratio of medians {chat_median / run_median:.1%}, median of per-round ratios "
          f"{statistics.median(paired):.1%} (" + " ".join(f"{x:.0%}" for x in paired) + ")  goal >= 95%")
    print(f"UI thread: median {statistics.median(ui_shares):.1%} of one core while the answer streamed")
    if args.show_screen:
        print(screen)
    if args.out:
        write_results(args, runs, chats, paired, ui_shares, details, mode)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def write_results(args, runs, chats, paired, ui_shares, details, mode) -> None:
    """The rounds as measured, with what they ran on: JSON for scripts, Markdown for people."""
    run_median, chat_median = statistics.median(runs), statistics.median(chats)
    facts = {
        "what": "decode tokens/s of `specllama chat` (the Textual app, " + mode + ") against `specllama run`, "
                "fresh processes, interleaved (order flips every round)",
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "platform": platform.platform()},
        "threads": details.get("threads"), "target": details.get("target"), "draft": details.get("draft"),
        "drafter": args.drafter, "k": args.k, "max_tokens": args.max_tokens, "prompt": args.prompt,
        "rounds": len(runs), "run_tokens_per_s": runs, "chat_tokens_per_s": chats,
        "run_median": run_median, "chat_median": chat_median, "ratio_of_medians": chat_median / run_median,
        "per_round_ratios": paired, "median_per_round_ratio": statistics.median(paired),
        "ui_thread_share_of_a_core": ui_shares,
    }
    Path(args.out + ".json").write_text(json.dumps(facts, indent=2) + "\n")
    lines = [f"# chat vs run, drafter {args.drafter}, K {args.k}: {len(runs)} interleaved rounds", "",
             f"{facts['date_utc']} UTC · {facts['machine']['cpu']}, {facts['machine']['cores']} cores · "
             f"threads {facts['threads']} · target {facts['target']} · draft {facts['draft'] or '–'} · "
             f"{args.max_tokens} max tokens, greedy · chat in a {mode}", "",
             "| round | run tok/s | chat tok/s | chat / run | UI thread (share of a core) |", "|---|---|---|---|---|"]
    for i, (r, c, ratio, ui) in enumerate(zip(runs, chats, paired, ui_shares), 1):
        lines.append(f"| {i} | {r:.2f} | {c:.2f} | {ratio:.1%} | {ui:.1%} |")
    lines += ["", f"- run median {run_median:.2f} tokens/s, chat median {chat_median:.2f} tokens/s",
              f"- ratio of medians **{chat_median / run_median:.1%}**, median of per-round ratios "
              f"**{statistics.median(paired):.1%}** (goal ≥ 95 %)",
              f"- UI thread: median {statistics.median(ui_shares):.1%} of one core while the answer streamed", ""]
    Path(args.out + ".md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
