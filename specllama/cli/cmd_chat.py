"""`specllama chat`: the Textual app, with models loaded inside it (so loading shows progress)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from specllama.cli.arguments import add_engine_options, add_model_options, add_status_options
from specllama.errors import SpecllamaError

if TYPE_CHECKING:
    from specllama.cli.resolve import Resolved
    from specllama.runtime.options import LoadOptions

HELP = "a multi-turn chat in the terminal that shows speculation live"
DESCRIPTION = ("A terminal chat that colours each token by origin and shows speed and acceptance live. The "
               "draft model is loaded whenever the pair or --draft names one, so the drafter, K, temperature "
               "and p_min change without reloading. ctrl+g in the app lists the keys; see docs/chat.md.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("message", nargs="?", help="a first message, sent as soon as the models are loaded")
    p.add_argument("--system", help="a system message (default: none, or your saved chat defaults)")
    saved = p.add_mutually_exclusive_group()
    saved.add_argument("--continue", action="store_true", dest="continue_last",
                       help="reopen the last conversation (its settings and models, except what this command "
                            "line sets: options typed here always win; default: a new one)")
    saved.add_argument("--conversation", type=int, metavar="ID",
                       help="reopen saved conversation ID (the history, ctrl+l, shows each one's #ID; default: a new one)")
    add_model_options(p)
    add_engine_options(p)
    add_status_options(p)


# Which ChatSettings field each option sets: a typed option pins its field over chat.toml's
# defaults and over a reopened conversation's settings (the command line always wins).
FIELD_OF_OPTION = {"drafter": "drafter", "no_draft": "drafter", "k": "k", "temp": "temperature", "p_min": "p_min",
                   "top_k": "top_k", "top_p": "top_p", "min_p": "min_p", "seed": "seed", "max_tokens": "max_tokens",
                   "stop": "stop", "verify": "verify", "system": "system"}


def settings_from(resolved: Resolved, system: str | None = None):
    """The chat's starting settings as the command line resolved them (--target alone: no model
    drafter; --seed -1: a random seed, chosen by resolve)."""
    from specllama.tui.settings import ChatSettings

    c, s = resolved.settings, resolved.settings.sampling
    return ChatSettings(drafter=c.drafter, k=c.k, temperature=s.temperature, p_min=c.p_min, top_k=s.top_k, top_p=s.top_p,
                        min_p=s.min_p, seed=s.seed, max_tokens=resolved.max_tokens, stop=c.stop, verify=c.verify,
                        system=system, policy=c.policy)


def pinned_fields(args: argparse.Namespace) -> frozenset[str]:
    """The settings the command line typed: neither chat.toml nor a reopened conversation changes them."""
    return frozenset(FIELD_OF_OPTION[name] for name in getattr(args, "_given", ()) if name in FIELD_OF_OPTION)


def chat_settings(args: argparse.Namespace, resolved: Resolved):
    """The command line's settings over the user's saved defaults (chat.toml)."""
    from specllama.tui import ChatSettings, user_defaults

    given = settings_from(resolved, getattr(args, "system", None))
    saved = user_defaults.load()
    if not saved:
        return given
    base = user_defaults.apply(saved, ChatSettings(policy=given.policy))
    pinned = pinned_fields(args)
    return ChatSettings.from_dict({name: value for name, value in given.as_dict().items() if name in pinned}, base)


def models_named(args: argparse.Namespace) -> bool:
    return bool(args.pair or args.target or args.draft)


def saved_conversation(args: argparse.Namespace, history_path):
    """The conversation --continue or --conversation ID asks for (a ConversationInfo), or None."""
    from specllama.tui.history import History, HistoryUnavailable

    if not args.continue_last and args.conversation is None:
        return None
    try:
        return _reopened(args, History(history_path), history_path)
    except HistoryUnavailable as e:  # the chat itself would go on without history; a continuation cannot
        what = "--continue" if args.continue_last else f"--conversation {args.conversation}"
        raise SpecllamaError(f"{what}: {e.reason}, so no conversation can be reopened; run `specllama chat` "
                             "without it to chat without history (move the file away to start a new one)") from None


def _reopened(args: argparse.Namespace, history, history_path):
    """The conversation asked for, read from `history` (closed here); its models become the ones
    to load unless the command line names some."""
    try:
        if args.continue_last:
            found = history.conversations()
            if not found:
                raise SpecllamaError(f"no saved conversation to continue ({history_path} holds none)")
            return found[0]
        try:
            return history.conversation(args.conversation)
        except KeyError:
            raise SpecllamaError(f"no saved conversation #{args.conversation}; ctrl+l in the chat lists them "
                                 "with their numbers") from None
    finally:
        history.close()


def saved_models(info) -> dict | None:
    """The models a saved conversation was held with ({"target": ..., "draft": ...}), or None."""
    models = info.settings.get("models") if info is not None else None
    return models if isinstance(models, dict) and isinstance(models.get("target"), str) else None


def chat_load_options(args: argparse.Namespace, resolved: Resolved, reopen=None) -> LoadOptions:
    """What to load. Models named on the command line win; otherwise a reopened conversation's
    models are the ones loaded first, so a continued chat starts on them rather than switching after
    a first load. Under auto (the default) the draft model is loaded only where it pays
    (runtime/draft_load.py); asking for the model drafter or naming --draft loads it, and the chat
    can then switch drafters freely."""
    from dataclasses import replace

    models = saved_models(reopen)
    if models is None or models_named(args):
        return resolved.load
    draft = models.get("draft")
    return replace(resolved.load, pair=None, target=models["target"], draft=draft, load_draft=draft is not None,
                   draft_if_pays=False)


def run(args: argparse.Namespace) -> int:
    from specllama.cli.options import resolved_for, status_lines
    from specllama.runtime.loaded import Runtime, open_runtime  # llama.cpp and Textual load only for this command
    from specllama.tui import ChatApp, user_defaults
    from specllama.tui.history import default_path

    require_terminal()
    status = status_lines(args)
    resolved = resolved_for(args, status)  # bad options fail before anything loads
    settings = chat_settings(args, resolved)
    reopen = saved_conversation(args, default_path())
    opts = chat_load_options(args, resolved, reopen)

    def build(load: LoadOptions, progress, show) -> Runtime:  # the first load, and any the model picker asks for
        said: set[str] = set()

        def notice(n) -> None:  # the loading panel shows each fact once
            if n.fact not in said and not status.quiet and (status.verbose or not n.verbose_only):
                said.add(n.fact)
                show(n.text)
        return open_runtime(load, resolved.registry, progress=progress, status=notice)

    pinned = pinned_fields(args) | ({"models"} if models_named(args) else set())
    app = ChatApp(lambda progress, show: build(opts, progress, show), settings, history_path=default_path(),
                  build_runtime=build, load_options=opts, first_message=args.message,
                  reopen=reopen.id if reopen is not None else None, pinned=pinned,
                  theme=user_defaults.theme(user_defaults.load()))
    try:
        app.run()
    finally:
        app.close_runtime()
    for trace in app.unexpected_errors:  # bugs were shown as notifications; keep their tracebacks
        print(trace, file=sys.stderr)
    if app.load_failed is not None:  # the app said why; the exit status says it to scripts too
        raise ModelsNotLoadedError(f"could not load the models: {app.load_failed}")
    # Textual ends the app on an exception it caught itself (it prints the traceback) with a
    # non-zero return code: a crash must not exit 0.
    crashed = getattr(app, "return_code", 0) not in (0, None)
    return 1 if app.unexpected_errors or crashed else 0


def require_terminal() -> None:
    """The chat reads keys from a terminal; with stdin a file or /dev/null, Textual waits forever."""
    if not sys.stdin.isatty():
        raise SpecllamaError("chat needs a terminal (stdin is not one); for scripts use `specllama run` or "
                             "`specllama batch`")


class ModelsNotLoadedError(SpecllamaError):
    """The chat ended without models: its one-line reason, exit status 1."""
