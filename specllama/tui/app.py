"""`specllama chat`: a multi-turn conversation where you can watch speculation happen.

The app never touches llama.cpp on its own thread: models load in one worker, each answer streams
from another (owned by the conversation view, widgets/conversation_view.py), and both report back
through posted messages. It is given a function that builds the runtime, so tests inject a
scripted fake exactly where the real one goes.

The app composes collaborators, each given what it needs when it is built: the settings' one owner
(live_settings.py, which the side panel subscribes to) and what the settings keys and screen do
to them (settings_controls.py), the model switcher (model_swap.py), the
recorder of the history (recorder.py), the conversation view; reopening a saved conversation is
planned by a pure function (reopen.py) and applied by history_actions.py, the copy keys are
copy_actions.py's (both mixed into ChatApp). Its keys are keys.py's.
"""

from __future__ import annotations

from pathlib import Path
from threading import Event
from typing import Any

from textual.app import App, ComposeResult, SystemCommand
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.widgets import Static

from specllama.decoding.engine import Summary
from specllama.errors import ContextOverflowError, SpecllamaError
from specllama.runtime.stats import headline, short_headline
from specllama.tui import user_defaults
from specllama.tui.cadence import spare_core
from specllama.tui.conversation import Conversation
from specllama.tui.copy_actions import CopyActions
from specllama.tui.explain import why_no_drafts
from specllama.tui.history import History
from specllama.tui.history_actions import HistoryActions
from specllama.tui.keys import CHAT_KEYS, FOOTER_HINTS
from specllama.tui.live_settings import LiveSettings
from specllama.tui.loading import LoadProgress, LoadStatus, RuntimeFactory, RuntimeFailed, RuntimeReady, load_runtime
from specllama.tui.model_swap import ModelSwitcher, RuntimeBuilder, SwapFailed, SwapProgress, SwapReady, SwapStatus, real_runtime
from specllama.tui.recorder import ConversationRecorder
from specllama.tui.screens import HelpScreen
from specllama.tui.settings import ChatSettings
from specllama.tui.settings_controls import SettingsControls
from specllama.tui.streaming import LiveStats
from specllama.tui.widgets import ChatMessage, ConversationView, KeyBar, LoadingPanel, PromptInput, StatsPanel, TitleBar
from specllama.tui.widgets.chat_message import warm_highlighter

# Repaints of a streaming answer and the panel: at most 4 a second and, when the UI shares its
# cores with llama.cpp's threads, fewer while the UI thread would use more than UI_BUDGET of a core;
# each costs two layouts and a compositor pass (cadence.py; docs/chat.md, "What the UI costs").
LIVE_INTERVAL = 0.25
UI_BUDGET = 0.05
CONTEXT_FULL = "context full: ctrl+n starts a new chat"
NARROW_WIDTH = 80  # below this many columns the side panel starts hidden (s or F9 shows it)
FINISH_NOTES = {"cancelled": "stopped", "length": "max tokens reached", "context": CONTEXT_FULL,
                "stop_string": "stop string"}


class ChatApp(CopyActions, HistoryActions, App[None]):
    # Layout only (each widget's look lives beside it). Kept inline rather than in app.tcss so a
    # wheel needs no package data and subclasses elsewhere (scripts/) find it.
    CSS = """
    #main { height: 1fr; }
    #chat { width: 1fr; }
    #conversation { height: 1fr; padding: 1 0 0 1; scrollbar-size-vertical: 1; }
    #hint { color: $text-muted; margin: 0 0 1 1; }
    #prompt { margin: 0 1 0 1; }
    """
    TITLE = "specllama chat"
    BINDINGS = CHAT_KEYS

    # Rendered Markdown by default, origin colours one key away: see widgets/chat_message.py for why.
    show_origins: reactive[bool] = reactive(False, init=False)
    show_thinking = False  # a thinking model's thinking: folded to one line by default (h shows it)

    def __init__(self, load_runtime: RuntimeFactory, settings: ChatSettings | None = None,
                 flush_interval: float = 0.1,  # see streaming.py for why 100 ms
                 live_interval: float = LIVE_INTERVAL, ui_budget: float | None = UI_BUDGET,
                 history_path: Path | None = None,  # None: no history (tests); `specllama chat` passes one
                 build_runtime: RuntimeBuilder = real_runtime,  # for the model picker: tests pass a fake
                 load_options=None,  # the LoadOptions of the first load, kept by a switch (context, threads, K auto)
                 registry=None,  # None: models.toml, read when the picker first opens
                 first_message: str | None = None,  # `specllama chat "..."`: sent once the models are in
                 reopen: int | None = None,  # a saved conversation to open at the start (--continue)
                 pinned: frozenset[str] = frozenset(),  # settings the command line set: a reopen keeps them
                 theme: str | None = None,  # the user's saved theme (chat.toml)
                 defaults_path: Path | None = None):  # chat.toml; None: the config folder's
        super().__init__()
        self._load_runtime = load_runtime
        self._ui_budget = ui_budget
        self.runtime: Any = None
        self.busy = False  # an answer is being generated (the engine runs one at a time)
        self.last_summary: Summary | None = None
        self.unexpected_errors: list[str] = []  # tracebacks of bugs, printed by `specllama chat` on exit
        self.load_failed: str | None = None  # why the models did not load: `specllama chat` exits 1
        self._idle = Event()  # set whenever no generation thread is running: safe to close the runtime
        self._idle.set()
        self._panel_wanted: bool | None = None  # the panel key's choice; None: follow the terminal's width
        self._first_message, self._reopen_at_start, self._pinned = first_message, reopen, frozenset(pinned)
        self._said: set[str] = set()  # facts a notice already told this session
        self._saved_theme, self._defaults_path = theme, defaults_path
        self.live_settings = LiveSettings(self, settings or ChatSettings())
        self.conversation = Conversation(system=self.settings.system)
        self.recorder = ConversationRecorder(history_path, self._history_off)
        self.panel = StatsPanel()
        self.view = ConversationView(flush_interval=flush_interval, live_interval=live_interval, ui_budget=ui_budget,
                                     idle=self._idle, errors=self.unexpected_errors, on_chunk=self._chunk_seen,
                                     paint_panel=self._paint_panel, id="conversation")
        self.controls = SettingsControls(self, self.live_settings, runtime=lambda: self.runtime, busy=lambda: self.busy,
                                         conversation=self.conversation, defaults_path=defaults_path)
        self.models = ModelSwitcher(self, build_runtime=build_runtime, load_options=load_options, registry=registry,
                                    settings=self.live_settings, runtime=lambda: self.runtime,
                                    first_load_running=lambda: self.runtime is None and self.load_failed is None,
                                    busy=lambda: self.busy, idle=self._idle, install=self._use_runtime,
                                    errors=self.unexpected_errors)

    @property
    def settings(self) -> ChatSettings:
        return self.live_settings.value

    @property
    def history(self) -> History | None:
        return self.recorder.history

    @property
    def prompt(self) -> PromptInput:
        return self.query_one("#prompt", PromptInput)

    def compose(self) -> ComposeResult:
        yield TitleBar()
        with Horizontal(id="main"):
            with Vertical(id="chat"):
                with self.view:
                    yield Static("Type a message and press enter · ctrl+g lists every key", id="hint")
                    yield LoadingPanel()
                yield PromptInput(placeholder="Ask something… (enter sends, ctrl+j new line, ↑ earlier prompts)",
                                  id="prompt")
            yield self.panel
        yield KeyBar(self.BINDINGS, FOOTER_HINTS)

    async def on_mount(self) -> None:
        if self._saved_theme and self._saved_theme in self.available_themes:
            self.theme = self._saved_theme
        self.theme_changed_signal.subscribe(self, self._save_theme)
        self.query_one(TitleBar).show(self.TITLE, "loading the models…")
        self.live_settings.changed.subscribe(self.panel, self.panel.show_settings, immediate=True)
        self.panel.show_settings(self.settings)
        self.panel.show_legend(self.show_origins)
        self._fit_panel(self.size.width)
        self.view.anchor()  # follow the answer until the user scrolls up
        self.prompt.focus()
        self.recorder.open()
        if self._first_message:
            self.query_one(LoadingPanel).show_waiting(self._first_message)
        self._load()
        if self._reopen_at_start is not None:
            await self.reopen(self._reopen_at_start, pinned=self._pinned)  # --continue: the flags typed win

    # --- loading -------------------------------------------------------------------------------

    def _load(self) -> None:
        def load() -> None:
            warm_highlighter()  # ~0.15 s before the load rather than during the first answer
            load_runtime(self._load_runtime, self.post_message)
        self.run_worker(load, thread=True, exit_on_error=False, group="load")

    def on_load_progress(self, message: LoadProgress) -> None:
        self.query_one(LoadingPanel).show_progress(message.done, message.total, message.what)

    def on_load_status(self, message: LoadStatus) -> None:
        self.query_one(LoadingPanel).show_loading(message.text)

    def on_runtime_failed(self, message: RuntimeFailed) -> None:
        if message.trace:
            self.unexpected_errors.append(message.trace)
        self.load_failed = message.reason
        waiting, self._first_message = self._first_message, None
        if waiting and not self.prompt.value:  # never sent: back where it was typed
            self.prompt.value = waiting
        self.query_one(TitleBar).show(self.TITLE, "could not load the models (ctrl+q quits)", failed=True)
        self.query_one(LoadingPanel).show_failure(message.reason)
        self.notify(message.reason, title="could not load the models", severity="error", timeout=30)

    def on_runtime_ready(self, message: RuntimeReady) -> None:
        self._use_runtime(message.runtime)
        first, self._first_message = self._first_message, None
        if first and first.strip():
            self.ask(first.strip())

    def _use_runtime(self, runtime) -> None:
        """The first models loaded, or the ones a switch brought in (model_swap.py)."""
        self.runtime = runtime
        self.load_failed = None
        self.query("#conversation LoadingPanel").remove()
        draft = runtime.draft_name
        self.query_one(TitleBar).show(self.TITLE, runtime.target_name + (f" ← {draft}" if draft else ""))
        self.panel.show_models(runtime.target_name, draft, runtime.threads)
        self.view.live.budget = None if spare_core(runtime.threads) else self._ui_budget
        self._show_context()
        self.controls.fit_drafter()

    # the model switcher's worker posts these to the app
    def on_swap_progress(self, message: SwapProgress) -> None:
        self.models.progress(message)

    def on_swap_status(self, message: SwapStatus) -> None:
        self.models.status(message)

    def on_swap_failed(self, message: SwapFailed) -> None:
        self.models.failed(message)

    def on_swap_ready(self, message: SwapReady) -> None:
        self.models.ready(message)

    # --- asking and answering ------------------------------------------------------------------

    def on_prompt_input_submitted(self, event: PromptInput.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        if self.runtime is None and self.load_failed is None and self._first_message is None:
            self._wait_for_models(text)  # sent by on_runtime_ready, like `specllama chat "..."`
            event.input.value = ""
            return
        if not self._can_generate():
            return
        event.input.value = ""
        self.ask(text)

    def _wait_for_models(self, text: str) -> None:
        """A message sent while the models load waits for them, and says so where it was typed."""
        self._first_message = text
        self.query_one(LoadingPanel).show_waiting(text)
        self.notify("your message is sent as soon as the models are loaded", title="waiting for the models")

    def _can_generate(self) -> bool:
        if self.runtime is None:
            self.notify("the models are not loaded yet", severity="warning")
            return False
        if self.busy:
            self.notify("still answering: esc stops the answer", severity="warning")
            return False
        return True

    def ask(self, text: str) -> None:
        """Sends one user message and starts streaming the answer."""
        self.prompt.remember(text)  # typed, given on the command line, or resent: one ↑ away
        self.conversation.ask(text)
        if self._start_answer(question=text):
            self.recorder.save_question(text, self.runtime.target_name, self.runtime.draft_name, self._history_settings())
        else:
            self.conversation.withdraw_question()

    def _start_answer(self, question: str | None) -> bool:
        """Generates an answer to the conversation as it stands (its last message is the question)."""
        try:
            prompt = self.runtime.chat_tokens(self.conversation.for_template())
        except SpecllamaError as e:
            self.notify(str(e), title="could not build the prompt", severity="error")
            return False
        self.busy = True
        # A blinking cursor is a frame every 0.5 s; while the answer streams it stays solid.
        self.prompt.cursor_blink = False
        self.view.start_answer(self.runtime, prompt, self.settings.generation_config(), self.show_origins, question,
                               thinking=self._thinking_parser(), show_thinking=self.show_thinking)
        return True

    def _thinking_parser(self):
        """The model's dialect parser for this answer where its template thinks (dialects/), else None."""
        chat_dialect = getattr(self.runtime, "chat_dialect", None)  # a test's stand-in runtime may have none
        dialect, thinks = chat_dialect() if chat_dialect is not None else (None, False)
        if dialect is None or not thinks:
            return None
        from specllama.dialects import ToolSet
        from specllama.dialects.answer import AnswerParser

        opened = dialect.starts_thinking(self.runtime.render_chat(self.conversation.for_template()))
        return AnswerParser(dialect, ToolSet(), thinking=opened, parses_tools=False)

    def action_toggle_thinking(self) -> None:
        self.show_thinking = not self.show_thinking
        for message in self.view.messages:
            message.thinking.show(self.show_thinking)

    def _chunk_seen(self, reply: ChatMessage, stats: LiveStats) -> None:
        # A kill loses at most this flush; the origins go with the text so a reopened answer keeps its colours.
        self.recorder.save_answer(reply.text, complete=False, segments=reply.segments)
        self.panel.add_rates(stats.step_rates)

    def _paint_panel(self, stats: LiveStats) -> None:
        self.panel.show_live(stats, self.runtime.context_use())

    async def on_conversation_view_answer_ended(self, message: ConversationView.AnswerEnded) -> None:
        self.busy = False
        self.prompt.cursor_blink = True
        self.controls.answer_ended()
        if message.reply is not None:
            if message.error is not None:
                self._answer_failed(message.reply, message.error)
            else:
                self._answer_done(message.reply, message.summary)
        self.models.install_pending()  # models chosen while this answer streamed take over now

    def _answer_done(self, reply: ChatMessage, summary: Summary) -> None:
        self.last_summary = summary
        # A thinking model's answer without its thinking (Qwen3's template, for one, drops earlier thinking)
        text = reply.text if reply.thinking.text else summary.text
        self.conversation.answer(text)
        self.recorder.save_answer(text, complete=True, segments=reply.segments)
        note = FINISH_NOTES.get(summary.finish_reason)
        # The headline of `run --stats` and serve's log line (runtime/stats.py), narrow enough for a border.
        reply.set_status(short_headline(summary, self.runtime.costs) + (f" · {note}" if note else ""))
        why = None
        if summary.steps and not summary.k_total and self.settings.drafter != "none":
            why = why_no_drafts(self.runtime.costs, self.settings.drafter)
        self.panel.show_summary(summary, why, headline=headline(summary, self.runtime.costs))
        note = self.runtime.drafter_note(summary)
        if note is not None and note.fact not in self._said:  # once per session: not after every answer
            self._said.add(note.fact)
            self.notify(note.text, title="the drafter you chose is not paying", severity="warning", timeout=20)
        self._show_context()

    def _answer_failed(self, reply: ChatMessage, error: BaseException) -> None:
        # The turn leaves the history (it has no answer) and goes back to the input box.
        question = self.conversation.withdraw_question()
        self.recorder.forget_turn()
        if question and not self.prompt.value:
            self.prompt.value = question
        if isinstance(error, SpecllamaError):
            reason = str(error)
            if isinstance(error, ContextOverflowError):
                reason += f"\n{CONTEXT_FULL}"
        else:
            reason = f"unexpected {type(error).__name__}: {error}"
        reply.set_status("failed", failed=True)
        self.notify(reason, title="the answer failed", severity="error", timeout=15)

    def _show_context(self) -> None:
        if self.runtime is not None:
            self.panel.show_context(*self.runtime.context_use())

    # --- the last turn again -------------------------------------------------------------------

    def action_regenerate(self) -> None:
        """A new answer to the last question, in place of the last answer (docs/chat.md says why
        replaced rather than kept beside it)."""
        if not self._can_generate():
            return
        if self.conversation.last_role != "assistant":
            self.notify("no answer to regenerate yet", severity="warning")
            return
        if self.view.selected is not None:  # a message about to go may hold the focus
            self.prompt.focus()
        self.conversation.withdraw_answer()
        self.view.withdraw_last(question_too=False)
        self.recorder.redo_answer(self.runtime.target_name, self.runtime.draft_name, self._history_settings())
        if not self._start_answer(question=None):
            return
        if self.settings.temperature == 0:
            self.notify("temperature 0 (greedy): the same answer comes back; F6 / T raises it")

    def action_edit_last(self) -> None:
        """The last question back in the input box, its turn withdrawn: enter sends it edited."""
        if self.busy:
            self.notify("still answering: esc stops the answer", severity="warning")
            return
        question = self.conversation.withdraw_turn()
        if question is None:
            self.notify("no question to edit yet", severity="warning")
            return
        self.view.withdraw_last(question_too=True)
        self.recorder.forget_last_turn()
        prompt = self.prompt
        if prompt.value.strip():
            prompt.remember(prompt.value)  # what was typed is one ↑ away, not lost
        prompt.value = question
        prompt.focus()
        self._show_context()

    # --- controls ------------------------------------------------------------------------------

    def action_stop(self) -> None:
        if self.busy:
            self.view.stop()  # honoured after the current step; the text so far stays

    def action_new_conversation(self, quiet: bool = False) -> None:
        self.view.forget_reply()
        self.live_settings.wait_for_drafter(None)
        self.recorder.start()
        self.conversation.clear()
        if self.view.selected is not None:
            self.prompt.focus()
        self.view.query(ChatMessage).remove()
        self.panel.reset()
        if self.runtime is not None:  # the new chat starts empty, whatever the old one's cache holds
            self.panel.show_context(0, self.runtime.context_use()[1])
        if not quiet:
            self.notify("new conversation")

    def action_toggle_panel(self) -> None:
        self._panel_wanted = not self.panel.display
        self.panel.display = self._panel_wanted

    def on_resize(self, event) -> None:
        # A narrow terminal gives the chat all of its width; the user's panel key wins over that.
        self._fit_panel(event.size.width)

    def _fit_panel(self, width: int) -> None:
        if self._panel_wanted is None and self.panel.is_mounted:  # not yet when the first resize arrives
            self.panel.display = width >= NARROW_WIDTH

    def action_toggle_origins(self) -> None:
        self.show_origins = not self.show_origins

    async def watch_show_origins(self, show: bool) -> None:
        for message in self.view.messages:
            await message.set_show_origins(show)
        self.panel.show_legend(show)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.BINDINGS))

    def get_system_commands(self, screen):
        """ctrl+p lists every chat action besides Textual's own (theme, quit...): each is one
        search away on a key every terminal passes."""
        yield from super().get_system_commands(screen)
        for b in self.BINDINGS:
            if b.action not in ("quit", "command_palette"):
                yield SystemCommand(b.description, b.tooltip or b.description, lambda action=b.action: self.run_action(action))

    def _save_theme(self, theme) -> None:
        """A theme picked from the palette is kept with the user's chat defaults (chat.toml)."""
        try:
            user_defaults.save_theme(theme.name, self._defaults_path)
        except SpecllamaError as e:
            self.notify(str(e), title="theme not saved", severity="warning")

    # --- settings ------------------------------------------------------------------------------

    def action_settings(self) -> None:
        self.controls.open_screen()

    def action_next_drafter(self) -> None:
        self.controls.next_drafter()

    def action_step_k(self, delta: int) -> None:
        self.controls.apply(self.settings.step_k(delta))

    def action_step_temperature(self, steps: int) -> None:
        self.controls.apply(self.settings.step_temperature(steps))

    def action_step_p_min(self, steps: int) -> None:
        self.controls.apply(self.settings.step_p_min(steps))

    # --- shutting down -------------------------------------------------------------------------

    def on_unmount(self) -> None:
        self.recorder.close()

    def close_runtime(self, timeout: float = 30.0) -> None:
        """Stops a running answer and frees the models; call after `run()` returns."""
        self.models.close_pending()
        if self.runtime is None:
            return
        self.view.stop()
        self._idle.wait(timeout)  # llama.cpp must not free a context another thread is decoding with
        self.runtime.close()
        self.runtime = None
