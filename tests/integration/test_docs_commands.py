"""Docs that cannot drift: every command README.md and docs/ show is found in the text
(tests/support/docs_commands.py) and checked the way its kind allows, so a renamed option, a removed
command, a script that moved or a command that fails shows here. The test ids say per command
what was done and why (e.g. `[parse: downloads from the Hugging Face hub ...]`).

The sandbox is what a reader has after following the README, offline: the shipped registry names
(qwen2.5-coder-1.5b, -0.5b, smollm2-135m) point at tiny generated GGUF models, the files the
commands name (prompts.jsonl, question.txt, fleet.txt, bench/prompts.jsonl) exist with two short
prompts, and caches, history and costs are private. Commands run in document order, sharing it
(`chat --continue` finds the conversation `chat "..."` left). Any `http://HOST:PORT` a command
names is a tiny `specllama serve` started here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest

from specllama.cli.help_text import subcommands
from specllama.cli.main import build_parser
from tests.support.docs_commands import ADDED_NAME, REPO, DocCommand, find_commands
from tests.support.live_serve import LiveServer, free_port

COMMANDS = find_commands()
TIMEOUT = 300
PROMPTS = [{"id": "a", "prompt": "Say hi."}, {"id": "b", "prompt": "Name a colour."}]
API_KEY = "sk-docs"


@pytest.fixture(scope="module")
def sandbox(tiny_models, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("docs-sandbox")
    home = root / "work"
    (home / "bench").mkdir(parents=True)
    jsonl = "".join(json.dumps(p) + "\n" for p in PROMPTS)
    for name in ("prompts.jsonl", "bench/prompts.jsonl", "bench/prompts_similar.jsonl"):
        (home / name).write_text(jsonl)
    (home / "prompts.txt").write_text("".join(p["prompt"] + "\n" for p in PROMPTS))
    (home / "question.txt").write_text("What is a cache?\n")
    shutil.copy(tiny_models["a"], home / "tiny-target.gguf")
    registry = root / "models.toml"
    registry.write_text(
        f'[models."qwen2.5-coder-1.5b"]\npath = "{tiny_models["a"]}"\nrole = "target"\n'
        f'[models."qwen2.5-coder-0.5b"]\npath = "{tiny_models["b"]}"\nrole = "draft"\n'
        f'[models."smollm2-135m"]\npath = "{tiny_models["other"]}"\nrole = "draft"\n')
    env = {**os.environ, "SPECLLAMA_CONFIG": str(registry), "SPECLLAMA_CACHE": str(root / "cache"),
           "SPECLLAMA_DATA": str(root / "data"), "SPECLLAMA_COSTS": str(root / "costs"),
           "HF_HUB_OFFLINE": "1", "KEY": API_KEY, "PYTHONPATH": str(REPO), "TERM": "xterm-256color"}
    env.pop("SPECLLAMA_API_KEY", None)
    server = LiveServer(["--target", str(tiny_models["a"]), "--no-draft", "--ctx", "512", "--parallel", "2"],
                        root / "serve.log", env={k: env[k] for k in ("SPECLLAMA_CONFIG", "SPECLLAMA_CACHE",
                                                                     "SPECLLAMA_COSTS")})
    (home / "fleet.txt").write_text(f"# the fleet\n{server.url}\n")
    yield {"home": home, "env": env, "server": server}
    server.stop()


def concrete(c: DocCommand, sandbox: dict) -> tuple[list[str], dict]:
    """The command's arguments and environment in the sandbox: $VARS expanded, every server
    address the sandbox's server."""
    env = {**sandbox["env"], **{k: re.sub(r"\$(\w+)", lambda m: sandbox["env"].get(m.group(1), ""), v)
                                for k, v in c.env.items()}}
    if "SPECLLAMA_API_KEY" in c.env or "--api-key" in c.argv:
        env.setdefault("SPECLLAMA_API_KEY", API_KEY)
    argv = [re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), ""), a) for a in c.argv]
    argv = [sandbox["server"].url if re.fullmatch(r"https?://[^\s/]+(/\S*)?", a) else a for a in argv]
    if argv[:1] == ["ps"] and "--url" not in argv:  # the server the README just started: the sandbox's
        argv += ["--url", sandbox["server"].url]
    return argv, env


def check_run(c: DocCommand, sandbox: dict) -> None:
    argv, env = concrete(c, sandbox)
    if argv[:2] == ["models", "rm"] and argv[2:3] == [ADDED_NAME]:
        registered = subprocess.run([sys.executable, "-m", "specllama", "models", "list", "--json"], cwd=sandbox["home"],
                                    env=env, capture_output=True, text=True, timeout=TIMEOUT)
        if ADDED_NAME not in registered.stdout:  # run alone: something to remove first
            subprocess.run([sys.executable, "-m", "specllama", "models", "add", ADDED_NAME, "tiny-target.gguf"],
                           cwd=sandbox["home"], env=env, check=True, capture_output=True, timeout=TIMEOUT)
    if "-o" in argv:  # each command writes its answers afresh (a file left by the one before would be "all done")
        (sandbox["home"] / argv[argv.index("-o") + 1]).unlink(missing_ok=True)
    done = subprocess.run([sys.executable, "-m", "specllama", *argv], cwd=sandbox["home"], env=env, input=c.stdin,
                          stdin=None if c.stdin is not None else subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert done.returncode == 0, f"{c.where}: `specllama {' '.join(argv)}` exited {done.returncode}:\n{done.stderr[-3000:]}"


def check_serve(c: DocCommand, sandbox: dict) -> None:
    argv, env = concrete(c, sandbox)
    port = free_port()
    argv = _set_option(_set_option(argv, "--port", str(port)), "--host", "127.0.0.1")  # a free port, this machine only
    log = sandbox["home"].parent / f"serve-{port}.log"
    with log.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "specllama", *argv], cwd=sandbox["home"], env=env,
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, f"{c.where}: serve exited {proc.returncode}:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"{c.where}: serve never answered /health"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    assert code == 0, f"{c.where}: serve stopped with {code}:\n{log.read_text()[-3000:]}"


def _set_option(argv: list[str], option: str, value: str) -> list[str]:
    if option in argv:
        at = argv.index(option)
        return argv[:at + 1] + [value] + argv[at + 2:]
    return argv + [option, value]


def check_chat(c: DocCommand, sandbox: dict) -> None:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed: the chat commands are checked in it")
    argv, env = concrete(c, sandbox)
    session = f"docs-{uuid.uuid4().hex[:8]}"
    exports = " ".join(f"{k}={_quote(v)}" for k, v in env.items() if k.startswith(("SPECLLAMA_", "HF_")) or k == "TERM")
    shell = (f"cd {_quote(str(sandbox['home']))} && env {exports} {sys.executable} -m specllama "
             + " ".join(_quote(a) for a in argv) + "; echo EXIT=$?; sleep 30")
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "40", shell], check=True)
    try:
        wait_screen(session, lambda s: "Ask something" in s and "loading the models" not in s, c)
        if any(not a.startswith("-") for a in argv[1:]):  # a first message: its answer comes by itself
            wait_screen(session, lambda s: " tokens · " in s, c)
        subprocess.run(["tmux", "send-keys", "-t", session, "C-q"], check=True)
        shown = wait_screen(session, lambda s: "EXIT=" in s, c)
        assert "EXIT=0" in shown, f"{c.where}: {shown}"
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def wait_screen(session: str, ready, c: DocCommand, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while True:
        shown = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout
        if ready(shown):
            return shown
        assert time.monotonic() < deadline, f"{c.where}: `{c.text}` in tmux never got there:\n{shown}"
        time.sleep(0.2)


def check_parse(c: DocCommand) -> None:
    try:
        build_parser().parse_args(c.argv)
    except SystemExit as e:
        pytest.fail(f"{c.where}: `specllama {' '.join(c.argv)}` does not parse (exit {e.code})")


def check_names(c: DocCommand) -> None:
    """The command path exists and every --option named is one of its options."""
    parsers = {path: parser for path, parser in subcommands(build_parser())}
    path: tuple[str, ...] = ()
    for word in c.argv:
        if path + (word,) not in parsers:
            break
        path += (word,)
    assert path, f"{c.where}: no command `specllama {c.argv[0]}`"
    known = {s for action in parsers[path]._actions for s in action.option_strings}
    for word in c.argv:
        for option in word.split("/") if word.startswith("-") else ():
            assert option.split("=")[0] in known, f"{c.where}: `specllama {' '.join(path)}` has no option {option}"


def check_script(c: DocCommand) -> None:
    for script in re.findall(r"scripts/[\w./-]*\w", c.text):  # scripts/measure/NAME.py too
        assert (REPO / script).is_file(), f"{c.where}: {script} does not exist"


@pytest.mark.parametrize("command", COMMANDS, ids=[c.id for c in COMMANDS])
def test_every_command_in_the_docs_works(command: DocCommand, request):
    if command.mode in ("run", "serve", "chat"):
        sandbox = request.getfixturevalue("sandbox")
        {"run": check_run, "serve": check_serve, "chat": check_chat}[command.mode](command, sandbox)
    elif command.mode == "parse":
        check_parse(command)
    elif command.mode == "names":
        check_names(command)
    elif command.mode == "script":
        check_script(command)
    else:
        assert command.mode == "other", command


def test_the_docs_show_commands_of_every_kind():
    """The finder itself: if it stops finding things, the test above passes vacuously."""
    modes = {c.mode for c in COMMANDS}
    assert {"run", "serve", "chat", "parse", "names", "script"} <= modes
    assert sum(c.mode == "run" for c in COMMANDS) >= 15


def test_a_doc_command_that_fails_fails_here(sandbox):
    """The checks above can fail: a wrong option, an unknown option named in prose, a script that
    is not there, a hub command that does not parse."""
    from tests.support.docs_commands import plan

    def command(text: str, inline: bool = False) -> DocCommand:
        c = DocCommand("x.md:1", text, inline)
        plan(c)
        return c

    with pytest.raises(AssertionError, match="exited 2"):
        check_run(command('specllama run --no-such-option "hi"'), sandbox)
    with pytest.raises(AssertionError, match="has no option --no-such-option"):
        check_names(command("specllama batch --no-such-option", inline=True))
    with pytest.raises(AssertionError, match="does not exist"):
        check_script(command("python scripts/no_such_script.py"))
    with pytest.raises(pytest.fail.Exception, match="does not parse"):
        check_parse(command("specllama run -m qwen2.5-coder-7b --temp hot hi"))
