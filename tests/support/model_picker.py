"""The model picker's world without llama.cpp: header-only GGUF files (enough for the compatibility
check), a registry fixture over them, and a fake runtime that records being closed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFWriter
from textual.widgets import Select

from specllama.models.registry import load_registry
from specllama.tui.screens import ModelPickerScreen
from tests.support.chat_app import FakeRuntime, wait_until

SIZE = (120, 40)
QWEN_LIKE = [f"tok{i}" for i in range(300)]


def write_header_only_gguf(path: Path, tokens: list[str], vocab: str = "gpt2", eos: int = 2) -> Path:
    """Just enough of a GGUF for the compatibility check (architecture, tokenizer), one tiny tensor."""
    writer = GGUFWriter(path, "llama")
    writer.add_tokenizer_model(vocab)
    writer.add_token_list(tokens)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(eos)
    writer.add_tensor("token_embd.weight", np.zeros((2, 2), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture
def registry(tmp_path, monkeypatch):
    """Local target and draft (compatible), a draft with another tokenizer, a hub-only target."""
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path / "cache"))  # nothing cached: the hub model is not
    target = write_header_only_gguf(tmp_path / "target.gguf", QWEN_LIKE)
    draft = write_header_only_gguf(tmp_path / "draft.gguf", QWEN_LIKE)
    other = write_header_only_gguf(tmp_path / "other.gguf", [f"sp{i}" for i in range(300)], vocab="llama", eos=0)
    toml = tmp_path / "models.toml"
    toml.write_text(f"""
[defaults]
pair = "small"
[pairs.small]
target = "t"
draft = "d"
[pairs.bad]
target = "t"
draft = "x"
[pairs.big]
target = "big"
draft = "d"
[models.t]
role = "target"
path = "{target}"
[models.d]
role = "draft"
path = "{draft}"
[models.x]
role = "draft"
path = "{other}"
[models.big]
role = "target"
file = "big.gguf"
hub = {{ repo = "Example/Big-GGUF", file = "big.gguf" }}
""")
    return load_registry(toml, tmp_path / "no-user.toml")


class ClosingRuntime(FakeRuntime):
    def __init__(self, name: str, **kw):
        super().__init__(**kw)
        self.target_name = name
        self.closed = False

    def close(self) -> None:
        self.closed = True


async def open_picker(pilot, target: str, draft: str | None) -> ModelPickerScreen:
    await wait_until(pilot, lambda: pilot.app.runtime is not None)
    await pilot.press("f12")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ModelPickerScreen))
    screen = pilot.app.screen
    screen.query_one("#target", Select).value = target
    screen.query_one("#draft", Select).value = draft or "-"
    await pilot.pause()
    return screen
