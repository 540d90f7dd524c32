"""A damaged cost-curve cache file is measured again (or ignored), never a failure of every run.

Issue 33, item 4: a file of arrays nested thousands deep in the curve cache made every `run` exit
1 with a RecursionError traceback until the file was removed (the learnt-cost reader beside it
already caught that). This writes such a file where `run` with the tiny model looks for its curve.
"""

from __future__ import annotations

from specllama.cli.main import main
from specllama.llama.context import DecodeContext
from specllama.llama.model import GGUFModel
from specllama.runtime.cost_store import MAX_N, MAX_N_PARALLEL, cache_key, entry_path, load_cached


def test_a_curve_file_nested_too_deep_is_ignored_by_run(tiny_models, capsys):
    model = GGUFModel(tiny_models["a"])
    ctx = DecodeContext(model, n_ctx=512)
    try:
        keys = [cache_key(ctx, None, max_n) for max_n in (MAX_N_PARALLEL, MAX_N)]
    finally:
        ctx.close()
        model.close()
    for key in keys:
        entry_path(key).parent.mkdir(parents=True, exist_ok=True)
        entry_path(key).write_text("[" * 100_000 + "]" * 100_000)
        assert load_cached(key) is None
    assert main(["run", "--target", str(tiny_models["a"]), "--no-draft", "-c", "512", "-n", "3", "hi"]) == 0
    assert "Traceback" not in capsys.readouterr().err
