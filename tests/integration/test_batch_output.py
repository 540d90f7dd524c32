"""The batch's output file: one writer by any name, paths checked before any work, full disks
and torn tails, resumes that check the prompts, hostile contents, signals between records."""

from __future__ import annotations

import errno
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest

from specllama.batch import output as batch_output
from specllama.batch.output import BatchOutputError, OutputLockedError, OutputWriteError, OutputWriter, locked_output, open_output
from specllama.cli.main import main
from specllama.cli.paths import OutputPathError, check_writable
from tests.support.fake_openai_server import FakeServer
from tests.support.one_line import ENV, NEVER, REPO, one_error_line

HOLDER = """
import sys
from specllama.batch.output import locked_output
with locked_output(sys.argv[1]):
    print("locked", flush=True)
    sys.stdin.read()
"""


@contextmanager
def lock_held_by_another_process(out: Path):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], cwd=REPO, env=ENV, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == "locked"
        yield proc.pid
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_a_second_batch_on_the_same_output_is_refused_with_the_holders_pid(tmp_path, capsys):
    prompts = tmp_path / "p.txt"
    prompts.write_text("hello\n")
    out = tmp_path / "out.jsonl"
    argv = ["batch", str(prompts), "-o", str(out), "--target", str(tmp_path / "never-loaded.gguf"), "--no-draft"]
    with lock_held_by_another_process(out) as pid:
        assert main(argv) == 1  # a runtime failure, not a usage mistake (arguments.EXIT_CODES_TEXT)
        one_error_line(capsys.readouterr().err, f"pid {pid}", str(out))
        assert out.read_bytes() == b""  # the holder's (empty) file: nothing written by the refused run
    # Once the holder is gone the same command goes on (to the missing model, which proves it).
    assert main(argv) != 0
    assert "never-loaded.gguf" in capsys.readouterr().err
    assert not out.exists()  # a run that wrote nothing leaves no file behind


def test_the_lock_is_exclusive_within_one_process_too(tmp_path):
    out = tmp_path / "out.jsonl"
    with locked_output(out):
        with pytest.raises(OutputLockedError, match=f"pid {os.getpid()}"):
            with locked_output(out):
                pass
    assert not out.exists()
    with locked_output(out):  # released: taken again
        pass


def test_the_lock_of_a_killed_process_is_taken_over(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text("")
    with lock_held_by_another_process(out) as pid:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        with locked_output(out):
            pass
    assert out.exists()  # it was there before: never removed


def _batch_argv(tmp_path: Path, out: Path) -> list[str]:
    prompts = tmp_path / "p.txt"
    prompts.write_text("hello\n")
    return ["batch", str(prompts), "-o", str(out), "--target", str(tmp_path / "never-loaded.gguf"), "--no-draft"]


@pytest.mark.parametrize("where, fragment", [("missing/out.jsonl", "does not exist"), ("adir", "is a directory")])
def test_batch_output_in_a_missing_folder_or_a_directory(tmp_path, capsys, where, fragment):
    (tmp_path / "adir").mkdir()
    assert main(_batch_argv(tmp_path, tmp_path / where)) == 1
    one_error_line(capsys.readouterr().err, "-o", fragment)  # not the model's "not found": before loading


def test_a_read_only_output_file_is_refused():
    # As root, mode bits do not stop a write: check as an unprivileged user, in a folder they can reach.
    folder = Path(tempfile.mkdtemp(prefix="specllama-ro-"))
    folder.chmod(0o755)
    target = folder / "out.jsonl"
    target.write_text("")
    target.chmod(0o444)
    check_writable(folder / "new.jsonl", "-o")  # a new name in a writable folder is fine
    became_nobody = False
    try:
        if os.geteuid() == 0:
            os.seteuid(65534)
            became_nobody = True
        with pytest.raises(OutputPathError, match="-o .*out.jsonl cannot be written: Permission denied"):
            check_writable(target, "-o")
        with pytest.raises(OutputPathError, match="cannot create files in"):
            check_writable(folder / "new.jsonl", "-o")
    finally:
        if became_nobody:
            os.seteuid(0)
        target.unlink()
        folder.rmdir()


def test_a_failed_write_is_one_error_and_the_torn_tail_is_repaired(tmp_path, monkeypatch):
    out = tmp_path / "out.jsonl"
    writer = OutputWriter(out)
    writer.write({"id": 1, "text": "a", "finish_reason": "stop"})
    real_write = os.write

    def disk_fills_up(fd, data):  # half the line goes to disk, then the disk is full
        if fd == writer._fd:
            if len(data) > 10:
                return real_write(fd, bytes(data[:10]))
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(batch_output.os, "write", disk_fills_up)
    with pytest.raises(OutputWriteError, match="the disk is full"):
        writer.write({"id": 2, "text": "b" * 50, "finish_reason": "stop"})
    writer.close()  # nothing buffered to fail again
    monkeypatch.undo()
    state = open_output(out)
    assert state.done == {"1"} and "incomplete last line" in state.repaired
    assert out.read_text().count("\n") == 1


def test_a_batch_hitting_the_file_size_limit_stops_with_one_line_and_resumes(tmp_path, tiny_models):
    prompts = tmp_path / "p.txt"
    prompts.write_text("".join(f"Prompt {i}: tell me a fact about caches.\n" for i in range(3)))
    out = tmp_path / "out.jsonl"
    cmd = [sys.executable, "-m", "specllama", "batch", str(prompts), "-o", str(out), "--target",
           str(tiny_models["a"]), "--no-draft", "--max-tokens", "16", "--ctx", "256"]

    def small_files():  # writes past 150 bytes fail with EFBIG (Python ignores SIGXFSZ)
        resource.setrlimit(resource.RLIMIT_FSIZE, (150, 150))

    limited = subprocess.run(cmd, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300,
                             preexec_fn=small_files)
    assert limited.returncode == 1, limited.stderr
    assert "Traceback" not in limited.stderr
    assert limited.stderr.strip().splitlines()[-1].startswith("specllama: error: cannot write to")
    assert "file size limit" in limited.stderr
    rerun = subprocess.run(cmd, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "incomplete last line" in rerun.stderr  # the record cut at the limit is done again
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert sorted(ids) == [1, 2, 3]


def record(id_, prompt: str, text: str = "answer") -> str:
    return json.dumps({"id": id_, "prompt": prompt, "text": text, "finish_reason": "stop"}) + "\n"


@pytest.mark.parametrize("how", ["symlink", "hardlink", "relative"])  # "relative" held before: a guard
def test_the_output_lock_holds_for_every_spelling_of_the_file(tmp_path, monkeypatch, how):
    out = tmp_path / "lk.jsonl"
    out.write_text("")
    other = tmp_path / "link.jsonl"
    if how == "symlink":
        other.symlink_to(out)
    elif how == "hardlink":
        os.link(out, other)
    else:
        monkeypatch.chdir(tmp_path)
        other = Path("./lk.jsonl")
    with locked_output(out):
        with pytest.raises(OutputLockedError, match=f"pid {os.getpid()}"):
            with locked_output(other):
                pass


def test_the_lock_never_writes_to_a_file_beside_the_output(tmp_path):
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me\n")
    out = tmp_path / "out.jsonl"
    (tmp_path / "out.jsonl.lock").symlink_to(victim)
    with locked_output(out):
        pass
    assert victim.read_text() == "keep me\n"


def test_a_prompts_file_named_like_the_old_lock_sidecar_is_left_alone(tmp_path, capsys):
    prompts = tmp_path / "x.jsonl.lock"
    prompts.write_text("what is a cache?\n")
    code = main(["batch", str(prompts), "-o", str(tmp_path / "x.jsonl"), "--target", str(tmp_path / NEVER)])
    assert code != 0 and NEVER in capsys.readouterr().err
    assert prompts.read_text() == "what is a cache?\n"


@pytest.mark.parametrize("device", ["/dev/full", "/dev/null"])
def test_an_output_that_is_not_a_regular_file_is_refused(tmp_path, capsys, device):
    prompts = tmp_path / "p.txt"
    prompts.write_text("hello\n")
    assert main(["batch", str(prompts), "-o", device, "--target", str(tmp_path / NEVER)]) == 1
    one_error_line(capsys.readouterr().err, device, "not a regular file")


def test_an_output_that_is_a_pipe_does_not_hang(tmp_path):
    prompts = tmp_path / "p.txt"
    prompts.write_text("hello\n")
    cmd = [sys.executable, "-m", "specllama", "batch", str(prompts), "-o", "/dev/stdout", "--target", str(tmp_path / NEVER)]
    done = subprocess.run(cmd, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert done.returncode == 1
    one_error_line(done.stderr, "not a regular file")


def test_a_resumed_batch_whose_prompts_moved_is_refused(tmp_path, capsys):
    prompts = tmp_path / "p.txt"
    prompts.write_text("first\nsecond\n")
    out = tmp_path / "out.jsonl"
    out.write_text(record(1, "first") + record(2, "second"))
    prompts.write_text("new one\nfirst\nsecond\n")  # a line inserted at the top: ids 1-3 now other prompts
    before = out.read_bytes()
    assert main(["batch", str(prompts), "-o", str(out), "--target", str(tmp_path / NEVER)]) == 1
    one_error_line(capsys.readouterr().err, "id 1", "changed")
    assert out.read_bytes() == before


def test_a_resumed_batch_with_the_same_prompts_goes_on(tmp_path, capsys):  # a regression guard: passed before
    prompts = tmp_path / "p.txt"
    prompts.write_text("first\nsecond\n")
    out = tmp_path / "out.jsonl"
    out.write_text(record(1, "first") + record(2, "second"))
    assert main(["batch", str(prompts), "-o", str(out), "--target", str(tmp_path / NEVER)]) == 0
    assert "already in" in capsys.readouterr().err


@pytest.mark.parametrize("line", ['{"id": ' + "9" * 5000 + ', "text": "t", "finish_reason": "stop"}',
                                  "[" * 100_000 + "]" * 100_000])
def test_an_output_with_hostile_json_is_refused_not_a_traceback(tmp_path, line):
    out = tmp_path / "out.jsonl"
    out.write_text(line + "\n")
    with pytest.raises(BatchOutputError, match="not a specllama result"):
        open_output(out)


def test_a_torn_tail_that_cannot_be_cut_is_one_error(tmp_path, monkeypatch):
    out = tmp_path / "out.jsonl"
    out.write_text(record(1, "a") + '{"id": 2, "te')
    real_open = Path.open

    def append_only(self, mode="r", *args, **kwargs):
        if self == out and "+" in mode:
            raise PermissionError(1, "Operation not permitted")
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", append_only)
    with pytest.raises(BatchOutputError, match="cannot repair the end of"):
        open_output(out)


def test_a_signal_right_after_a_record_is_written_still_counts_it(tmp_path, monkeypatch):
    """A second Ctrl-C landing between a record's write and its count left the summary a line short."""
    import signal

    from specllama.batch import output
    from specllama.batch.prompts_file import PromptItem
    from specllama.batch.remote import RemoteServer, run_remote_batch
    from specllama.batch.server_pool import RetryPolicy, ServerHealth
    from specllama.decoding.request import GenerationConfig

    real_write = output.OutputWriter.write

    def write_then_signal(self, record):
        real_write(self, record)
        # To the main thread (the writer's), so it has arrived when the call returns.
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    monkeypatch.setattr(output.OutputWriter, "write", write_then_signal)
    out = tmp_path / "out.jsonl"
    items = [PromptItem(id=n, prompt=f"p{n}", line=n) for n in range(1, 4)]
    # Ctrl-C as an interactive run has it: pytest started as a shell's background job (`... &`)
    # inherits SIGINT ignored, Python then installs no handler, and the signal never arrives.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with FakeServer() as server:
            servers = [RemoteServer(server.url, 1, ServerHealth(RetryPolicy(0, 1.0)), model="m")]
            report = run_remote_batch(servers, items, GenerationConfig(), out)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert report.interrupted
    assert report.written == len(out.read_text().splitlines()) >= 1


def test_a_batch_says_when_answers_stopped_at_a_full_context(tiny_models, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path / "cache"))
    prompts = tmp_path / "p.txt"
    prompts.write_text("Tell me about caches please.\n")
    out = tmp_path / "out.jsonl"
    cmd = [sys.executable, "-m", "specllama", "batch", str(prompts), "-o", str(out), "--target", str(tiny_models["a"]),
           "--max-tokens", "400", "--ctx", "64", "--no-draft", "--parallel", "1"]
    done = subprocess.run(cmd, cwd=REPO, env={**ENV, "SPECLLAMA_CACHE": str(tmp_path / "cache")}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["finish_reason"] == "context"
    assert "1 answer(s) stopped because the context was full" in done.stderr


def test_a_huge_batch_line_fails_alone_without_tokenizing(tmp_path, tiny_models, capsys):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"id": "huge", "prompt": "word " * 400_000}) + "\n"
                       + json.dumps({"id": "small", "prompt": "hi"}) + "\n")
    out = tmp_path / "out.jsonl"
    code = main(["batch", str(prompts), "-o", str(out), "--target", str(tiny_models["a"]), "--no-draft",
                 "--max-tokens", "2", "--ctx", "256"])
    err = capsys.readouterr().err
    assert code == 1 and "prompt 'huge' (line 1) failed: the prompt is 2,000," in err and "bytes, far more than" in err
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["small"]


def test_batch_reads_prompts_from_stdin(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text(record(1, "hello") + record(2, "world"))
    cmd = [sys.executable, "-m", "specllama", "batch", "-", "-o", str(out), "--target", str(tmp_path / NEVER)]
    done = subprocess.run(cmd, cwd=REPO, env=ENV, input="hello\nworld\n", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "all 2 prompts are already in" in done.stderr


@pytest.mark.parametrize("content, says", [("", "no prompts (it is empty)"), ("\n\n  \n", "no prompts (it is empty)"),
                                           ("{not json\n", "no usable prompts (1 malformed line(s))")])
def test_an_empty_prompts_file_says_it_is_empty(tmp_path, capsys, content, says):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(content)
    out = tmp_path / "out.jsonl"
    assert main(["batch", str(prompts), "-o", str(out), "--target", str(tmp_path / "never-loaded.gguf")]) == 1
    err = capsys.readouterr().err
    assert says in err and "already in" not in err
