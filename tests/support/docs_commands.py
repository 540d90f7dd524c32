"""The commands README.md and docs/*.md show, found in the text itself, and how each is checked.

Found: every line of a fenced code block that runs `specllama` (after `VAR=value` prefixes, in a
pipe, inside `$(...)`, continued with a trailing backslash) or a repository script, and every
inline code span that starts with `specllama ` or names `scripts/`. Synopsis lines are made
concrete the way a reader would: `[optional parts]` left out, placeholders (NAME, MODEL, FILE...)
replaced by PLACEHOLDERS, `# comments` and `> redirections` dropped (stdout is captured).

How each is checked (`plan`), with the reason shown in the test id:
  run    executed in a sandbox whose registry maps the shipped model names to tiny GGUF models, so
         every command runs for real, offline, in seconds; it must exit 0
  serve  started on a free port, checked on /health, stopped with SIGTERM: must exit 0
  chat   started in tmux, waits for the models (and a first message's answer), ctrl+q: exit 0
  parse  only parsed by specllama's own parser (a hub download: there is no network in tests)
  names  an inline mention: its command and every --option it names must exist
  script a repository script: the file must exist (measurements and setup are not tests)
  other  another program (llama-server, vllm, git): shown for completeness, not run

`python tests/support/docs_commands.py` prints the plan: what every command in the docs gets.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# What a synopsis placeholder stands for in the sandbox (tests/integration/test_docs_commands.py builds it):
# the registry names are the shipped ones, mapped to tiny models there.
PLACEHOLDERS = {
    "NAME": "qwen2.5-coder-1.5b",
    "MODEL": "qwen2.5-coder-1.5b",
    "TARGET": "qwen2.5-coder-1.5b",
    "DRAFT": "qwen2.5-coder-0.5b",
    "PATH|hf:...": "tiny-target.gguf",
    "FILE": "prompts.jsonl",
    "OUT.jsonl": "out.jsonl",
    "URL": "http://127.0.0.1:8080",
    "ID": "1",
}
# `models add NAME` registers a new name; `models rm NAME` removes the one added.
ADDED_NAME = "my-model"
HUB_MODELS = ("qwen2.5-coder-7b", "qwen2.5-coder-14b", "qwen2.5-coder-32b")
OTHER_PROGRAMS = ("llama-server", "vllm", "python -m llama_cpp.server", "git ", "curl ")


@dataclass
class DocCommand:
    where: str  # README.md:62
    text: str  # as written (continuations joined)
    inline: bool
    argv: list[str] = field(default_factory=list)  # specllama's arguments, made concrete
    env: dict[str, str] = field(default_factory=dict)  # VAR=value prefixes
    stdin: str | None = None  # the command left of a pipe, standing for its output
    mode: str = ""
    why: str = ""

    @property
    def id(self) -> str:
        return f"{self.where} [{self.mode}: {self.why}] {self.text}"


def _fences(lines: list[str]):
    """(line number, line, in a fence) for every line, continuations joined inside fences."""
    fenced, pending, start = False, "", 0
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            if pending:
                pending += " " + line.strip()
            else:
                pending, start = line.rstrip(), number
            if pending.endswith("\\"):
                pending = pending[:-1].rstrip()
                continue
            yield start, pending, True
            pending = ""
        else:
            yield number, line, False


def find_commands() -> list[DocCommand]:
    found = []
    for doc in DOCS:
        name = doc.relative_to(REPO).as_posix()
        for number, line, fenced in _fences(doc.read_text().splitlines()):
            if fenced:
                code = _without_comment(line).strip()
                if code and ("specllama" in code.split("#")[0] or "scripts/" in code) and not code.startswith("#"):
                    found.append(DocCommand(f"{name}:{number}", code, inline=False))
                elif code and any(code.startswith(p) for p in OTHER_PROGRAMS):
                    found.append(DocCommand(f"{name}:{number}", code, inline=False))
            else:
                for span in re.findall(r"`([^`]+)`", line):
                    if span.startswith("specllama ") or re.search(r"(^|[\s/])scripts/\w", span):
                        found.append(DocCommand(f"{name}:{number}", span.strip(), inline=True))
    for command in found:
        plan(command)
    return found


def _without_comment(line: str) -> str:
    """The line without a trailing `# comment` (a # inside quotes or a word is kept)."""
    quote = None
    for i, ch in enumerate(line):
        if ch in "'\"" and quote in (None, ch):
            quote = None if quote else ch
        elif ch == "#" and quote is None and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _drop_optional(text: str) -> str:
    """A synopsis without its [optional parts] (nested ones too)."""
    while True:
        shorter = re.sub(r"\s*\[[^\[\]]*\]", "", text)
        if shorter == text:
            return text
        text = shorter


def plan(c: DocCommand) -> None:
    text = c.text
    if "specllama" not in text or text.startswith(("flock ", "./scripts", "scripts/", "python scripts/", ".venv/")):
        if "scripts/" in text:
            c.mode, c.why = "script", "a repository script: it must exist"
        else:
            c.mode, c.why = "other", "another program: not specllama's, not run"
        return
    inner = re.search(r"\$\((specllama[^)]*)\)", text)  # eval "$(specllama completion bash)"
    if inner:
        text = inner.group(1)
    text = re.sub(r"\s\d?>\s*\S+", "", text)  # > redirections: stdout is captured instead
    text = _drop_optional(text)
    if " | " in text and not c.inline:  # a pipe: what comes in stands for the left command's output
        left, _, right = text.partition(" | ")
        c.stdin = f"{left}: stands for its output\n" + "+ a changed line\n" * 3
        text = right
    words = shlex.split(text)
    while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
        key, _, value = words.pop(0).partition("=")
        c.env[key] = value
    if not words or words[0] != "specllama":
        c.mode, c.why = "other", "not a specllama command after all"
        return
    args = words[1:]
    command = " ".join(args[:2])
    if command in ("models add", "models rm") and len(args) > 2 and args[2] == "NAME":
        args[2] = ADDED_NAME
    c.argv = [PLACEHOLDERS.get(a, a) for a in args]
    if c.inline:
        c.mode, c.why = "names", "mentioned in prose: its command and options must exist"
    elif "--from-hub" in c.argv or any(a.startswith("hf:") or a in HUB_MODELS for a in c.argv):
        c.mode, c.why = "parse", "downloads from the Hugging Face hub: no network in tests"
    elif args and args[0] == "chat":
        c.mode, c.why = "chat", "the terminal UI, in tmux on the tiny models"
    elif args and args[0] == "serve":
        c.mode, c.why = "serve", "started on a free port on the tiny models, /health, SIGTERM"
    else:
        c.mode, c.why = "run", "run on the tiny models"


if __name__ == "__main__":
    for command in find_commands():
        print(f"{command.where:32} {command.mode:6} {command.text}    ({command.why})")
