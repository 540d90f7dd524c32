"""Issue 37's done-when, on the hybrid toy with an MTP layer (qwen35): `specllama run`, the chat
(its app and session, driven by Textual's Pilot) and `serve`, with `--drafter suffix`, `mtp` and
`auto` (which loads the MTP head where the GGUF has one and its cost here is unknown or can pay, and
weighs it as a source), give
`--drafter none`'s greedy text in exact mode, over 3 turns where the interface has turns. Random
weights: drafts are mostly rejected, so every turn rolls the hybrid cache (and the MTP cache beside
it) back many times."""

from __future__ import annotations

import asyncio
import json

import pytest

from specllama.cli.main import main
from specllama.runtime import LoadOptions, open_runtime
from specllama.tui.app import ChatApp
from specllama.tui.settings import ChatSettings
from specllama.tui.widgets import ChatMessage
from tests.support.chat_app import SIZE, wait_until
from tests.support.live_serve import LiveServer

DRAFTERS = ("suffix", "mtp", "auto")
TURNS = 3


def test_run_prints_plain_decodings_text_with_every_drafter(toy_models, capsys):
    common = ["the quick brown fox", "--target", str(toy_models["qwen35"]), "--max-tokens", "32", "--ctx", "512",
              "--exact", "--json", "-t", "1"]
    assert main(["run", *common, "--drafter", "none"]) == 0
    plain = json.loads(capsys.readouterr().out)
    for drafter in DRAFTERS:
        assert main(["run", *common, "--drafter", drafter, "-k", "3" if drafter != "auto" else "auto"]) == 0
        out, err = capsys.readouterr()
        spec = json.loads(out)
        assert spec["text"] == plain["text"], drafter
        assert "Traceback" not in err
        if drafter == "mtp":
            assert spec["drafted_by"].get("mtp", 0) > 0


def chat_answers(path, drafter: str) -> list[str]:
    """Three turns typed into the chat app over a real runtime; the replies as shown."""
    opts = LoadOptions(target=str(path), load_draft=False, load_mtp=drafter == "mtp", mtp_if_present=True,
                       n_ctx=1024, exact=True, threads=1)
    app = ChatApp(lambda progress, show: open_runtime(opts, progress=progress, status=lambda n: show(n.text)),
                  ChatSettings(max_tokens=12, k=3 if drafter != "auto" else "auto", drafter=drafter), flush_interval=0)

    answers: list[str] = []

    async def scenario():
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.runtime is not None, timeout=300)
            assert "mtp" in app.runtime.drafters  # auto's session loaded the head too
            for turn in range(TURNS):
                app.query_one("#prompt").value = f"Turn {turn}: tell me more."
                await pilot.press("enter")
                await wait_until(pilot, lambda: not app.busy, timeout=300)
            answers.extend(m.text for m in list(app.query(ChatMessage))[1::2])
    try:
        asyncio.run(scenario())
        return answers
    finally:
        app.close_runtime()


def test_the_chat_answers_as_plain_decoding_does_with_every_drafter(toy_models, monkeypatch, tmp_path):
    plain = chat_answers(toy_models["qwen35"], "none")
    assert len(plain) == TURNS and all(plain)
    for drafter in DRAFTERS:
        # Each session on a machine that knows no costs: an earlier session's head costs would let
        # auto leave the head unloaded on the toy, where it cannot pay (tests/integration/test_mtp_load.py).
        monkeypatch.setenv("SPECLLAMA_COSTS", str(tmp_path / drafter))
        assert chat_answers(toy_models["qwen35"], drafter) == plain, drafter


@pytest.fixture(scope="module")
def auto_server(toy_models, tmp_path_factory):
    """serve's defaults (--drafter auto): the head is loaded because the GGUF has one."""
    log = tmp_path_factory.mktemp("serve-auto") / "serve.log"
    live = LiveServer(["--target", str(toy_models["qwen35"]), "--ctx", "1024", "--parallel", "2",
                       "--max-tokens", "16", "--exact"], log)
    yield live
    assert live.stop() == 0, live.stderr()[-3000:]
    assert "Traceback" not in live.stderr()


def test_serve_answers_as_plain_decoding_does_with_every_drafter(auto_server):
    client = auto_server.client()
    messages = [{"role": "user", "content": "Say something, then say it again."}]
    for turn in range(TURNS):
        plain = client.chat.completions.create(model="toy", messages=messages, max_tokens=16, temperature=0,
                                               extra_body={"drafter": "none"})
        for drafter in DRAFTERS:
            spec = client.chat.completions.create(model="toy", messages=messages, max_tokens=16, temperature=0,
                                                  extra_body={"drafter": drafter, "k": 3 if drafter != "auto" else "auto"})
            assert spec.choices[0].message.content == plain.choices[0].message.content, (turn, drafter)
            if drafter == "mtp":  # its drafts are counted as the head's own
                assert spec.model_extra["speculation"]["drafted_by"].get("mtp", 0) > 0
        messages += [{"role": "assistant", "content": plain.choices[0].message.content},
                     {"role": "user", "content": f"More, turn {turn}."}]
