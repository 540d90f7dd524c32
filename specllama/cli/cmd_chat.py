"""`specllama chat`: the Textual app, with models loaded inside it (so loading shows progress)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from specllama.cli.arguments import HelpFormatter, add_engine_options, add_model_options
from specllama.decoding.request import DRAFTERS
from specllama.errors import SpecllamaError

if TYPE_CHECKING:
    from specllama.runtime import LoadOptions

HELP = "a multi-turn chat in the terminal that shows speculation live"
DESCRIPTION = ("A terminal chat that colours each token by origin and shows speed and acceptance live. The "
               "draft model is loaded whenever the pair or --draft names one, so the drafter, K, temperature "
               "and p_min change without reloading. ctrl+g in the app lists the keys; see docs/chat.md.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("message", nargs="?", help="a first message, sent as soon as the models are loaded")
    p.add_argument("--system", help="a system message (default: none, or your saved chat defaults)")
    saved = p.add_mutually_exclusive_group()
    saved.add_argument("--continue", action="store_true", dest="continue_last",
                       help="reopen the last conversation (its settings, and its models unless you name "
                            "others; default: a new one)")
    saved.add_argument("--conversation", type=int, metavar="ID",
                       help="reopen saved conversation ID (the history, ctrl+l, shows each one's #ID; default: a new one)")
    add_model_options(p)
    add_engine_options(p)


def settings_from_args(args: argparse.Namespace):
    """The chat's starting settings from the command line (--target alone: no model drafter;
    --seed -1: a random seed, chosen now)."""
    from specllama.cli.options import drafter_choice, resolve_seed
    from specllama.tui.settings import ChatSettings

    return ChatSettings(drafter=drafter_choice(args), k=args.k, temperature=args.temp, p_min=args.p_min,
                        top_k=args.top_k, top_p=args.top_p, min_p=args.min_p, seed=resolve_seed(args.seed),
                        max_tokens=args.max_tokens, stop=tuple(args.stop), verify=args.verify,
                        system=getattr(args, "system", None))


def default_args() -> argparse.Namespace:
    """What `specllama chat` with no options parses to."""
    parser = argparse.ArgumentParser(formatter_class=HelpFormatter)
    add_arguments(parser)
    return parser.parse_args([])


def chat_load_options(args: argparse.Namespace) -> LoadOptions:
    """What to load. The draft model is loaded whenever the pair or --draft names one, whatever
    drafter is chosen first, so the chat can switch to it later without reloading anything. Naming
    mistakes are found here, before the app starts, and print one line like `run`."""
    from specllama.cli.options import load_options
    from specllama.models.registry import load_registry
    from specllama.runtime import model_refs

    # Under auto (the default) the draft model is loaded only where it can pay (runtime.draft_decision);
    # asking for the model drafter or naming --draft loads it, and the chat can then switch freely.
    wants_model = args.drafter == "model" or bool(args.draft)
    drafters = DRAFTERS if wants_model else tuple(d for d in DRAFTERS if d != "model")
    opts = load_options(args, drafters=drafters)
    model_refs(opts, load_registry())
    return opts


def chat_settings(args: argparse.Namespace):
    """The command line's settings over the user's saved defaults (chat.toml): an option counts
    as given when it differs from the parser's default."""
    from specllama.tui import ChatSettings, user_defaults

    given = settings_from_args(args)
    saved = user_defaults.load()
    if not saved:
        return given
    parser_defaults = settings_from_args(default_args())
    base = user_defaults.apply(saved, parser_defaults)
    default_values = parser_defaults.as_dict()
    return ChatSettings.from_dict({name: value for name, value in given.as_dict().items()
                                   if value != default_values[name]}, base)


def saved_conversation(args: argparse.Namespace, history_path):
    """The conversation --continue or --conversation ID asks for (a ConversationInfo), or None.
    Naming a model on the command line wins; otherwise its models are the ones loaded first, so a
    continued chat starts on them rather than switching after a first load."""
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
            info = found[0]
        else:
            try:
                info = history.conversation(args.conversation)
            except KeyError:
                raise SpecllamaError(f"no saved conversation #{args.conversation}; ctrl+l in the chat lists them "
                                     "with their numbers") from None
    finally:
        history.close()
    models = info.settings.get("models")
    named = args.pair or args.target or args.draft
    if not named and isinstance(models, dict) and isinstance(models.get("target"), str):
        args.target, args.draft = models["target"], models.get("draft")
        args.no_draft = args.draft is None
    return info


def run(args: argparse.Namespace) -> int:
    from specllama.runtime import Runtime  # llama.cpp and Textual load only for this command
    from specllama.tui import ChatApp, user_defaults
    from specllama.tui.history import default_path

    require_terminal()
    settings = chat_settings(args)  # bad sampling options fail before anything loads
    reopen = saved_conversation(args, default_path())
    opts = chat_load_options(args)
    def build(load: LoadOptions, progress, status) -> Runtime:  # the first load, and any the model picker asks for
        return Runtime(load, progress=progress, status=status)

    app = ChatApp(lambda progress, status: build(opts, progress, status), settings, history_path=default_path(),
                  build_runtime=build, load_options=opts, first_message=args.message,
                  reopen=reopen.id if reopen is not None else None, theme=user_defaults.theme(user_defaults.load()))
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
