"""`specllama batch`: prompt files, the resumable output, and a real kill in the middle of a batch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specllama.batch.output import BatchOutputError, open_output
from specllama.batch.prompts_file import PromptFileError, read_prompts
from specllama.cli.main import main

REPO = Path(__file__).resolve().parents[2]


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows),
                    encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    assert text == "" or text.endswith("\n"), "OUT must end with a complete line"
    return [json.loads(line) for line in text.splitlines()]  # raises if any line is not JSON


# --- prompt files ------------------------------------------------------------------------------


def test_plain_text_prompts_are_numbered_by_line(tmp_path):
    path = tmp_path / "prompts.txt"
    path.write_text("first prompt\n\n{not json, just text}\nthird 🙂\n", encoding="utf-8")
    f = read_prompts(path)
    assert [(i.id, i.prompt) for i in f.items] == [(1, "first prompt"), (3, "{not json, just text}"), (4, "third 🙂")]
    assert f.bad == []


def test_malformed_jsonl_lines_are_reported_with_their_numbers(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [
        {"id": "a", "prompt": "ok"}, "{broken", ["a", "list"], {"id": "b"}, {"id": True, "prompt": "x"},
        {"prompt": "no id: the line number"}, {"id": "c", "prompt": "x", "system": 3},
    ])
    f = read_prompts(path)
    assert [i.id for i in f.items] == ["a", 6]
    assert [b.line for b in f.bad] == [2, 3, 4, 5, 7]
    assert "not valid JSON" in str(f.bad[0]) and str(f.bad[0]).startswith("line 2:")


def test_duplicate_ids_are_refused(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [{"id": "x", "prompt": "1"}, {"id": "y", "prompt": "2"},
                                              {"id": "x", "prompt": "3"}])
    with pytest.raises(PromptFileError, match="duplicate prompt ids: 'x' on lines 1 and 3"):
        read_prompts(path)


def test_duplicate_ids_stop_batch_before_any_generation(tmp_path, capsys, tiny_models):
    path = write_jsonl(tmp_path / "p.jsonl", [{"id": 7, "prompt": "1"}, {"id": "7", "prompt": "2"}])
    out = tmp_path / "out.jsonl"
    code = main(["batch", str(path), "-o", str(out), "--target", str(tiny_models["a"]), "--no-draft"])
    err = capsys.readouterr().err
    assert code == 1 and "duplicate prompt ids" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


# --- the output file ------------------------------------------------------------------------------


def ours(id_, text="x") -> str:
    """A line as specllama writes it (json.dumps of a record whose first key is "id")."""
    return json.dumps({"id": id_, "prompt": "p", "text": text, "finish_reason": "stop"}, ensure_ascii=False)


def test_an_interrupted_last_line_is_dropped(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_bytes((ours("a") + "\n" + ours("b")[:20]).encode())
    state = open_output(out)
    assert state.done == {"a"} and "incomplete last line" in state.repaired
    assert read_jsonl(out) == [json.loads(ours("a"))]


def test_a_complete_last_record_without_newline_is_kept(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_bytes((ours("a") + "\n" + ours(2)).encode())
    assert open_output(out).done == {"a", "2"}
    assert [r["id"] for r in read_jsonl(out)] == ["a", 2]


def test_a_damaged_middle_line_is_not_touched(tmp_path):
    out = tmp_path / "out.jsonl"
    data = (ours("a") + "\ngarbage\n" + ours("c") + "\n").encode()
    out.write_bytes(data)
    with pytest.raises(BatchOutputError, match="line 2"):
        open_output(out)
    assert out.read_bytes() == data


@pytest.mark.parametrize("content", [
    b"Write a haiku about caches.",  # a plain-text prompts file whose last line has no newline
    b"first prompt\nsecond prompt",
    b'{"id": 1, "prompt": "a JSONL prompts file"}\n{"id": 2, "prompt": "its last line"}',
    b'{"id": 1, "prompt": "one prompt, no newline"}',
    b'{"note": "somebody else\'s JSON"',
])
def test_a_file_specllama_did_not_write_is_never_cut(tmp_path, content):
    out = tmp_path / "not-ours.txt"
    out.write_bytes(content)
    with pytest.raises(BatchOutputError, match="left alone"):
        open_output(out)
    assert out.read_bytes() == content


def test_the_prompts_file_as_output_is_refused_and_kept(tmp_path, capsys):
    """The data-loss case: `batch q.txt -o q.txt` once emptied q.txt and wrote results over it."""
    prompts = tmp_path / "q.txt"
    prompts.write_bytes(b"Write a haiku about caches.")
    code = main(["batch", str(prompts), "-o", str(prompts), "--target", str(tmp_path / "never-loaded.gguf")])
    err = capsys.readouterr().err
    assert code == 1 and "is the prompts file" in err and len(err.strip().splitlines()) == 1
    assert prompts.read_bytes() == b"Write a haiku about caches."
    # The same file under another name (a symlink) is the same file.
    link = tmp_path / "link.txt"
    link.symlink_to(prompts)
    assert main(["batch", str(prompts), "-o", str(link), "--target", "x.gguf"]) == 1
    assert prompts.read_bytes() == b"Write a haiku about caches."


# --- end to end on tiny models ------------------------------------------------------------------


def test_batch_skips_malformed_lines_writes_the_rest_and_resumes(tmp_path, capsys, tiny_models):
    path = write_jsonl(tmp_path / "p.jsonl", [
        {"id": "one", "prompt": "Say hello"}, "not json", {"id": "two", "prompt": "Écris un haïku 🌸",
                                                          "system": "Be brief."}])
    out = tmp_path / "out.jsonl"
    argv = ["batch", str(path), "-o", str(out), "--target", str(tiny_models["a"]), "--draft",
            str(tiny_models["a"]), "--drafter", "model", "-k", "3", "--max-tokens", "8", "--ctx", "512"]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 1  # a malformed line counts as a failure
    assert "line 2: not valid JSON" in err
    records = read_jsonl(out)
    assert [r["id"] for r in records] == ["one", "two"]
    for r in records:
        assert {"id", "prompt", "text", "tokens", "tokens_per_s", "acceptance", "finish_reason"} <= r.keys()
        assert r["tokens"] == 8 and r["finish_reason"] == "length" and r["acceptance"] == 1.0
        assert r["drafted_by"] == r["accepted_by"] == {"model": r["drafted"]} and r["accepted"] == r["drafted"] > 0
    assert records[1]["prompt"] == "Écris un haïku 🌸"

    code = main(argv)  # nothing left to do: no model load, same file
    assert code == 1 and "already in" in capsys.readouterr().err
    assert read_jsonl(out) == records


def _batch_cmd(prompts: Path, out: Path, tiny_models) -> list[str]:
    return [sys.executable, "-m", "specllama", "batch", str(prompts), "-o", str(out),
            "--target", str(tiny_models["a"]), "--no-draft", "--max-tokens", "48", "--ctx", "512", "--parallel", "3"]


def _start_and_stop_midway(cmd, out: Path, sig: int, min_lines: int = 3) -> subprocess.Popen:
    # A child of a non-interactive shell may inherit SIGINT ignored; give it the default, as a terminal would.
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and out.read_bytes().count(b"\n") >= min_lines:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the batch finished before it could be stopped: " + proc.stderr.read().decode()
    proc.send_signal(sig)
    proc.wait(timeout=60)
    return proc


@pytest.fixture
def many_prompts(tmp_path) -> tuple[Path, list[str]]:
    ids = [f"p{i:02d}" for i in range(40)]
    path = write_jsonl(tmp_path / "prompts.jsonl", [{"id": i, "prompt": f"Prompt number {i}: tell me a fact."}
                                                     for i in ids])
    return path, ids


def test_a_killed_batch_resumes_and_each_id_appears_once(tmp_path, tiny_models, many_prompts):
    prompts, ids = many_prompts
    out = tmp_path / "out.jsonl"
    proc = _start_and_stop_midway(_batch_cmd(prompts, out, tiny_models), out, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    done_before = [r["id"] for r in read_jsonl(out)]
    assert 3 <= len(done_before) < len(ids)
    # A kill can also land in the middle of a write: leave half a record behind, as that would.
    with out.open("a", encoding="utf-8") as f:
        f.write('{"id": "' + ids[len(done_before)] + '", "prompt": "Prom')

    rerun = subprocess.run(_batch_cmd(prompts, out, tiny_models), cwd=REPO, capture_output=True, text=True,
                           timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert rerun.returncode == 0, rerun.stderr
    assert "incomplete last line" in rerun.stderr
    records = read_jsonl(out)
    assert sorted(r["id"] for r in records) == ids  # every id exactly once
    assert [r["id"] for r in records[:len(done_before)]] == done_before  # earlier work kept as it was
    assert f"{len(ids) - len(done_before)} written, {len(done_before)} already done" in rerun.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_stops_cleanly(tmp_path, tiny_models, many_prompts, sig):
    prompts, ids = many_prompts
    out = tmp_path / "out.jsonl"
    proc = _start_and_stop_midway(_batch_cmd(prompts, out, tiny_models), out, sig)
    stderr = proc.stderr.read().decode()
    assert proc.returncode == 130, stderr
    assert "rerun the same command" in stderr and "Traceback" not in stderr
    records = read_jsonl(out)
    assert 3 <= len(records) < len(ids) and len({r["id"] for r in records}) == len(records)


def test_prompts_decoded_together_give_the_texts_they_give_one_at_a_time(tmp_path, capsys, tiny_models, many_prompts):
    """--parallel 4 writes the same records as --parallel 1, in finishing order, each id once.
    (Not --exact: the tiny models' float weights are exact only one row at a time. Their batched
    rows differ from one-row decodes by ~1e-7 logits, far below any top-2 gap a 151,936-token
    random model shows in these few hundred choices.)"""
    prompts, ids = many_prompts
    outs = {}
    for n in ("1", "4"):
        out = tmp_path / f"out{n}.jsonl"
        argv = ["batch", str(prompts), "-o", str(out), "--target", str(tiny_models["a"]), "--draft",
                str(tiny_models["a"]), "-k", "2", "--max-tokens", "12", "--ctx", "256", "--parallel", n]
        assert main(argv) == 0, capsys.readouterr().err
        outs[n] = {r["id"]: r for r in read_jsonl(out)}
    assert sorted(outs["1"]) == sorted(outs["4"]) == ids
    for i in ids:
        assert outs["4"][i]["text"] == outs["1"][i]["text"] and outs["4"][i]["tokens"] == outs["1"][i]["tokens"]


def test_each_prompt_samples_from_a_seed_of_its_own():
    from specllama.batch.local import config_for
    from specllama.batch.prompts_file import PromptItem
    from specllama.decoding.engine import GenerationConfig
    from specllama.decoding.sampling import SamplingParams

    sampled = GenerationConfig(sampling=SamplingParams(temperature=0.8, seed=7))
    a, b = PromptItem(id="a", prompt="x", line=1), PromptItem(id="b", prompt="x", line=2)
    seeds = [config_for(sampled, item).sampling.seed for item in (a, b, a)]
    assert seeds[0] == seeds[2] != seeds[1]  # by id: the same whatever order or batch it runs in
    assert config_for(replace_seed(sampled, 8), a).sampling.seed != seeds[0]  # and by the run's seed
    greedy = GenerationConfig()
    assert config_for(greedy, a) is greedy


def replace_seed(config, seed):
    from dataclasses import replace
    return replace(config, sampling=replace(config.sampling, seed=seed))
