"""The note that greedy text from several prompts per decode can differ (cli/stability_note.py)."""

from __future__ import annotations

import io

from specllama.cli.stability_note import parallel_text_note
from specllama.cli.status import StatusLines


def test_the_batch_note_says_specllama_once():
    # Issue 40.6: the note went through StatusLines, which adds the prefix itself.
    out = io.StringIO()
    StatusLines(stream=out).say(parallel_text_note(4, greedy=True, exact=False))
    assert out.getvalue().startswith("specllama: note: up to 4 prompts share each decode")
