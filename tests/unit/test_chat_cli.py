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


def load_options(args, info):
    from specllama.cli.cmd_chat import chat_load_options
    from specllama.cli.options import resolved_for

    return chat_load_options(args, resolved_for(args), info)


def test_continue_reopens_the_newest_and_loads_its_models_first(tmp_path):
    path = tmp_path / "chats.sqlite3"
    saved(path, "older", {"target": "qwen2.5-coder-1.5b", "draft": None})
    newest = saved(path, "newest", {"target": "qwen2.5-coder-0.5b", "draft": "smollm2-135m"})
    args = chat_args("--continue")
    info = saved_conversation(args, path)
    assert info.id == newest and info.title == "newest"
    opts = load_options(args, info)
    assert (opts.target, opts.draft, opts.load_draft) == ("qwen2.5-coder-0.5b", "smollm2-135m", True)
    assert args.target is None  # the namespace is not written to


def test_models_named_on_the_command_line_win_and_no_option_reopens_nothing(tmp_path):
    path = tmp_path / "chats.sqlite3"
    older = saved(path, "older", {"target": "qwen2.5-coder-1.5b", "draft": None})
    saved(path, "newest", None)
    args = chat_args("--conversation", str(older), "--pair", "qwen2.5-coder")
    info = saved_conversation(args, path)
    assert info.id == older and load_options(args, info).target is None  # the pair's, as typed
    args = chat_args("--conversation", str(older))
    opts = load_options(args, saved_conversation(args, path))
    assert (opts.target, opts.draft, opts.load_draft) == ("qwen2.5-coder-1.5b", None, False)
    assert saved_conversation(chat_args(), path) is None


def test_flags_typed_with_continue_win_over_the_conversations_settings(tmp_path):
    """Issue 32: `chat --continue` ignored --drafter, -k and -n given on the same command line."""
    from specllama.cli.cmd_chat import pinned_fields, settings_from
    from specllama.cli.options import resolved_for
    from specllama.tui.reopen import plan_reopen

    path = tmp_path / "chats.sqlite3"
    history = History(path)
    cid = history.new_conversation("t", "T", None, {"drafter": "model", "k": 5, "max_tokens": 400, "temperature": 0.4,
                                                    "models": {"target": "qwen2.5-coder-1.5b", "draft": None}})
    history.close()
    args = chat_args("--continue", "--drafter", "auto", "-k", "2", "-n", "50", "-m", "qwen2.5-coder-0.5b")
    pinned = pinned_fields(args) | {"models"}
    assert pinned == {"drafter", "k", "max_tokens", "models"}  # --drafter auto typed: pinned though the default
    info = saved_conversation(args, path)
    plan = plan_reopen(info, [], settings_from(resolved_for(args)), ("qwen2.5-coder-0.5b", None), "T", pinned)
    s = plan.settings
    assert (s.drafter, s.k, s.max_tokens, s.temperature) == ("auto", 2, 50, 0.4)  # the rest: the conversation's
    assert plan.models is None and cid == info.id  # the models typed stay loaded


def test_the_app_reopened_at_the_start_keeps_the_pinned_settings(tmp_path):
    from specllama.tui import ChatApp, ChatSettings
    from tests.support.chat_app import SIZE, FakeRuntime, run, wait_until

    path = tmp_path / "chats.sqlite3"
    history = History(path)
    cid = history.new_conversation("kept", "Fake-Coder 1.5B", None, {"drafter": "suffix", "k": 5, "temperature": 0.5})
    history.add_message(cid, "user", "old question")
    history.add_message(cid, "assistant", "old answer")
    history.close()

    async def scenario():
        runtime = FakeRuntime()
        app = ChatApp(lambda progress, status: runtime, ChatSettings(drafter="none", k=2), flush_interval=0,
                      history_path=path, reopen=cid, pinned=frozenset({"drafter", "k"}))
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.runtime is not None and app.settings.temperature == 0.5)
            assert (app.settings.drafter, app.settings.k) == ("none", 2)
    run(scenario)


def test_nothing_to_continue_or_an_unknown_id_is_one_clear_error(tmp_path):
    path = tmp_path / "chats.sqlite3"
    with pytest.raises(SpecllamaError, match="no saved conversation to continue"):
        saved_conversation(chat_args("--continue"), path)
    saved(path, "one", None)
    with pytest.raises(SpecllamaError, match="no saved conversation #99"):
        saved_conversation(chat_args("--conversation", "99"), path)


def test_chat_policy_reaches_every_answers_config(monkeypatch, tmp_path):
    # `chat --policy NAME` was parsed, checked, and then dropped: ChatSettings had no policy.
    from specllama.cli.cmd_chat import chat_settings
    from specllama.cli.main import build_parser
    from specllama.cli.options import resolved_for
    from specllama.decoding.policy import POLICIES
    from specllama.tui import ChatSettings, user_defaults

    monkeypatch.setitem(POLICIES, "demo-policy", object())
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))

    def settings(*argv):
        args = build_parser().parse_args(["chat", *argv])
        return chat_settings(args, resolved_for(args))

    assert settings("--policy", "demo-policy").generation_config().policy == "demo-policy"
    user_defaults.save(ChatSettings(temperature=0.5))  # with saved defaults too (another path)
    assert settings("--policy", "demo-policy").generation_config().policy == "demo-policy"
    assert settings().generation_config().policy == ""
