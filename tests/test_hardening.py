"""Issue 14: output locks, output paths checked before any work, full disks, options, caches."""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

from specllama.batch import output as batch_output
from specllama.batch.output import OutputLockedError, OutputWriter, OutputWriteError, locked_output, lock_path, open_output
from specllama.cli.main import main
from specllama.cli.paths import OutputPathError, check_writable

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def one_error_line(err: str, *fragments: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specllama: error: "), err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


# --- 2. one batch per output file --------------------------------------------------------------------------------


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
        assert main(argv) == 2
        one_error_line(capsys.readouterr().err, f"pid {pid}", str(out))
        assert not out.exists()
    # Once the holder is gone the same command goes on (to the missing model, which proves it).
    assert main(argv) != 0
    assert "never-loaded.gguf" in capsys.readouterr().err
    assert not lock_path(out).exists()


def test_the_lock_is_exclusive_within_one_process_too(tmp_path):
    out = tmp_path / "out.jsonl"
    with locked_output(out):
        assert lock_path(out).read_text().strip() == str(os.getpid())
        with pytest.raises(OutputLockedError, match=f"pid {os.getpid()}"):
            with locked_output(out):
                pass
    assert not lock_path(out).exists()
    with locked_output(out):  # released: taken again
        pass


def test_a_stale_lock_file_of_a_dead_process_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out = tmp_path / "out.jsonl"
    lock_path(out).write_text(f"{dead.pid}\n")
    with locked_output(out):
        assert lock_path(out).read_text().strip() == str(os.getpid())


# --- 4. output paths checked before any work; a full disk ------------------------------------------------------


def _batch_argv(tmp_path: Path, out: Path) -> list[str]:
    prompts = tmp_path / "p.txt"
    prompts.write_text("hello\n")
    return ["batch", str(prompts), "-o", str(out), "--target", str(tmp_path / "never-loaded.gguf"), "--no-draft"]


@pytest.mark.parametrize("where, fragment", [("missing/out.jsonl", "does not exist"), ("adir", "is a directory")])
def test_batch_output_in_a_missing_folder_or_a_directory(tmp_path, capsys, where, fragment):
    (tmp_path / "adir").mkdir()
    assert main(_batch_argv(tmp_path, tmp_path / where)) == 2
    one_error_line(capsys.readouterr().err, "-o", fragment)  # not the model's "not found": before loading


@pytest.mark.parametrize("flag", ["--json", "--markdown"])
@pytest.mark.parametrize("where, fragment", [("missing/r.out", "does not exist"), ("adir", "is a directory")])
def test_bench_outputs_are_checked_before_the_benchmark(tmp_path, capsys, flag, where, fragment):
    (tmp_path / "adir").mkdir()
    prompts = tmp_path / "p.txt"
    prompts.write_text("hello\n")
    code = main(["bench", "--prompts", str(prompts), "--configs", "none", flag, str(tmp_path / where),
                 "--target", str(tmp_path / "never-loaded.gguf")])
    assert code == 2
    one_error_line(capsys.readouterr().err, flag, fragment)


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
    assert limited.returncode == 2, limited.stderr
    assert "Traceback" not in limited.stderr
    assert limited.stderr.strip().splitlines()[-1].startswith("specllama: error: cannot write to")
    assert "file size limit" in limited.stderr
    rerun = subprocess.run(cmd, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "incomplete last line" in rerun.stderr  # the record cut at the limit is done again
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert sorted(ids) == [1, 2, 3]
