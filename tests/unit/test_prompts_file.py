"""Reading a prompts file: a BOM, lines that end at \\n only (CRLF too), text that is not text and
JSON that no reader survives are bad lines, never a traceback."""

from __future__ import annotations

import json

import pytest

from specllama.batch.prompts_file import read_prompts


def test_a_jsonl_file_with_a_bom_and_no_suffix_is_read_as_jsonl(tmp_path):
    path = tmp_path / "prompts.data"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"id": "a", "prompt": "one"}\n{"id": "b", "prompt": "two"}\n')
    file = read_prompts(path)
    assert [(i.id, i.prompt) for i in file.items] == [("a", "one"), ("b", "two")] and not file.bad
    suffixed = tmp_path / "p.jsonl"
    suffixed.write_bytes(path.read_bytes())
    assert len(read_prompts(suffixed).items) == 2  # line 1 was "malformed" with the suffix


@pytest.mark.parametrize("inside", ["\x0c", "\x85", "\u2028", "\x1c", "\r"])
def test_only_newlines_split_prompts(tmp_path, inside):
    plain = tmp_path / "p.txt"
    plain.write_text(f"a{inside}b\nc\n", encoding="utf-8")
    assert [(i.id, i.prompt) for i in read_prompts(plain).items] == [(1, f"a{inside}b"), (2, "c")]
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text(json.dumps({"id": 1, "prompt": f"x{inside}y"}, ensure_ascii=False) + "\n", encoding="utf-8")
    file = read_prompts(jsonl)
    assert [i.prompt for i in file.items] == [f"x{inside}y"] and not file.bad


def test_crlf_line_ends_are_still_line_ends(tmp_path):  # a regression guard for the change above: passed before
    plain = tmp_path / "p.txt"
    plain.write_bytes(b"a\r\nb\r\n")
    assert [i.prompt for i in read_prompts(plain).items] == ["a", "b"]


def test_prompt_lines_with_lone_surrogates_or_hostile_json_are_bad_lines(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": 1, "prompt": "\\ud800"}\n'
                    + '{"id": ' + "9" * 5000 + ', "prompt": "big id"}\n'
                    + "[" * 100_000 + "]" * 100_000 + "\n"
                    + '{"id": 4, "prompt": "fine"}\n')
    file = read_prompts(path)
    assert [i.id for i in file.items] == [4]
    assert [b.line for b in file.bad] == [1, 2, 3]
    assert "surrogate" in file.bad[0].reason
