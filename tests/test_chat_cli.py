"""`specllama chat "first message"`, `--continue`, `--conversation ID`: what the command line
resolves before the app starts (the app's side is in test_tui_keys.py, the terminal's in
test_tui_tmux.py)."""

from __future__ import annotations

import pytest

from specllama.cli.cmd_chat import saved_conversation
from specllama.cli.main import build_parser
from specllama.errors import SpecllamaError
from specllama.tui.history import History


def chat_args(*argv: str):
    return build_parser().parse_args(["chat", *argv])


def saved(path, title: str, models: dict | None) -> int:
    history = History(path)
    settings = {"temperature": 0.4} | ({"models": models} if models else {})
    cid = history.new_conversation(title, "T", "D", settings)
    history.add_message(cid, "user", title)
    history.close()
    return cid


def test_a_first_message_and_the_reopen_options_parse():
    args = chat_args("explain this", "--continue")
    assert (args.message, args.continue_last, args.conversation) == ("explain this", True, None)
    assert chat_args("--conversation", "7").conversation == 7
    assert chat_args().message is None
    with pytest.raises(SystemExit):  # one or the other
        chat_args("--continue", "--conversation", "3")


def test_continue_reopens_the_newest_and_loads_its_models_first(tmp_path):
    path = tmp_path / "chats.sqlite3"
    saved(path, "older", {"target": "qwen2.5-coder-1.5b", "draft": None})
    newest = saved(path, "newest", {"target": "qwen2.5-coder-0.5b", "draft": "smollm2-135m"})
    args = chat_args("--continue")
    info = saved_conversation(args, path)
    assert info.id == newest and info.title == "newest"
    assert (args.target, args.draft, args.no_draft) == ("qwen2.5-coder-0.5b", "smollm2-135m", False)


def test_models_named_on_the_command_line_win_and_no_option_reopens_nothing(tmp_path):
    path = tmp_path / "chats.sqlite3"
    older = saved(path, "older", {"target": "qwen2.5-coder-1.5b", "draft": None})
    saved(path, "newest", None)
    args = chat_args("--conversation", str(older), "--pair", "qwen2.5-coder")
    assert saved_conversation(args, path).id == older and args.target is None
    args = chat_args("--conversation", str(older))
    saved_conversation(args, path)
    assert (args.target, args.draft, args.no_draft) == ("qwen2.5-coder-1.5b", None, True)
    assert saved_conversation(chat_args(), path) is None


def test_nothing_to_continue_or_an_unknown_id_is_one_clear_error(tmp_path):
    path = tmp_path / "chats.sqlite3"
    with pytest.raises(SpecllamaError, match="no saved conversation to continue"):
        saved_conversation(chat_args("--continue"), path)
    saved(path, "one", None)
    with pytest.raises(SpecllamaError, match="no saved conversation #99"):
        saved_conversation(chat_args("--conversation", "99"), path)
