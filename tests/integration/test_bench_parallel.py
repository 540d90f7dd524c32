"""`specllama bench --parallel`: the list parsed before any model loads; a run on the tiny models
writes a record per N with the measured throughput and the cost model's predictions."""

from __future__ import annotations

import json

import pytest

from specllama.cli.cmd_bench_parallel import ParallelListError, parse_levels
from specllama.cli.main import main


def test_levels_put_the_baseline_first_and_refuse_nonsense():
    assert parse_levels("4,auto") == [1, 4, "auto"]
    assert parse_levels("2, 1, 2") == [1, 2]
    for bad in ("", "0", "x", "65", "1.5"):
        with pytest.raises(ParallelListError):
            parse_levels(bad)


def test_a_parallel_bench_measures_each_n_against_one_at_a_time(tmp_path, capsys, tiny_models):
    prompts = tmp_path / "p.txt"
    prompts.write_text("\n".join(f"Prompt {i}: say something." for i in range(6)) + "\n")
    out = tmp_path / "r.json"
    code = main(["bench", "--prompts", str(prompts), "--parallel", "1,3", "--target", str(tiny_models["a"]),
                 "--max-tokens", "8", "--ctx", "128", "--repeat", "2", "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    doc = json.loads(out.read_text())
    rows = {s["parallel"]: s for s in doc["summaries"]}
    assert sorted(rows) == [1, 3] and rows[1]["median_ratio"] == pytest.approx(1.0)
    assert all(r["tokens"] > 0 and r["failed"] == 0 for r in doc["runs"]) and len(doc["runs"]) == 4
    assert rows[3]["predicted_ratio"] is not None and rows[3]["decode_vs_predicted"] is not None
    assert doc["machine"]["placement"] == "CPU" and "| 3 |" in text
