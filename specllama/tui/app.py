"""`specllama chat`: a multi-turn conversation where you can watch speculation happen.

The app never touches llama.cpp on its own thread: models load in one worker, each answer streams
from another (see streaming.py), and both report back through posted messages. It is given a
function that builds the runtime, so tests inject a scripted fake exactly where the real one goes.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from threading import Event
from typing import Any

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import reactive
from textual.widgets import Static

from specllama.decoding.engine import Summary
from specllama.errors import ContextOverflowError, SpecllamaError
from specllama.tui.cadence import Cadence, spare_core
from specllama.tui.clipboard import copy_text
from specllama.tui.conversation import Conversation
from specllama.tui.explain import why_no_drafts
from specllama.tui.history_actions import SavedConversations
from specllama.tui.loading import LoadProgress, LoadStatus, RuntimeFactory, RuntimeFailed, RuntimeReady, load_runtime
from specllama.tui.model_swap import ModelSwitching, RuntimeBuilder, real_runtime
from specllama.tui.recorder import ConversationRecorder
from specllama.tui.screens import HelpScreen
from specllama.tui.settings import ChatSettings
from specllama.tui.settings_actions import SettingsControls
from specllama.tui.streaming import LiveStats, ReplyChunk, ReplyDone, stream_reply
from specllama.tui.widgets import ChatMessage, KeyBar, LoadingPanel, PromptInput, StatsPanel, TitleBar
from specllama.tui.widgets.chat_message import warm_highlighter

# Repaints of a streaming answer and the panel: at most 4 a second and, when the UI shares its
# cores with llama.cpp's threads, fewer while the UI thread would use more than UI_BUDGET of a core;
# each costs two layouts and a compositor pass (cadence.py; docs/chat.md, "What the UI costs").
LIVE_INTERVAL = 0.25
UI_BUDGET = 0.05
CONTEXT_FULL = "context full: ctrl+n starts a new chat"
NARROW_WIDTH = 80  # below this many columns the side panel starts hidden (F9 shows it)
FINISH_NOTES = {"cancelled": "stopped", "length": "max tokens reached", "context": CONTEXT_FULL,
                "stop_string": "stop string"}


class ChatApp(SettingsControls, SavedConversations, ModelSwitching, App[None]):
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
    BINDINGS = [
        Binding("f1", "help", "help", tooltip="this screen"),
        Binding("escape", "stop", "stop", tooltip="stop the answer; what it wrote so far stays"),
        Binding("ctrl+n", "new_conversation", "new chat", tooltip="new conversation (models stay loaded)"),
        Binding("ctrl+y", "copy_answer", "copy", tooltip="copy the last answer to the clipboard"),
        Binding("ctrl+b", "copy_code", "copy code", show=False, tooltip="copy the last code block of the last answer"),
        Binding("ctrl+o", "toggle_origins", "view", tooltip="answers: rendered Markdown / coloured by origin"),
        Binding("ctrl+l,f10", "history", "history", tooltip="saved conversations: reopen, search, export"),
        Binding("f12", "models", "models", tooltip="pick models; they load while these answer"),
        Binding("f11,ctrl+t", "settings", "settings", tooltip="settings: prompt, sampling, K; save defaults"),
        Binding("f9", "toggle_panel", "panel", show=False, tooltip="side panel on / off (off below 80 columns)"),
        Binding("f2", "next_drafter", "drafter", tooltip="drafter: auto → suffix → model → none"),
        Binding("f3", "step_k(-1)", "K −", show=False, tooltip="K − 1: fewer drafts per step (below 1: auto)"),
        Binding("f4", "step_k(1)", "K +", show=False, tooltip="K + 1: more drafts per step"),
        Binding("f5", "step_temperature(-1)", "temp −", show=False, tooltip="temperature − 0.1 (0 = greedy)"),
        Binding("f6", "step_temperature(1)", "temp +", show=False, tooltip="temperature + 0.1"),
        Binding("f7", "step_p_min(-1)", "p_min −", show=False, tooltip="p_min − 0.05 (0 = always draft K)"),
        Binding("f8", "step_p_min(1)", "p_min +", show=False, tooltip="p_min + 0.05: stop drafts less sure than this"),
        Binding("ctrl+q", "quit", "quit", show=False, priority=True, tooltip="quit"),
    ]

    # Rendered Markdown by default, origin colours one key away: see widgets/chat_message.py for why.
    show_origins: reactive[bool] = reactive(False, init=False)

    def __init__(self, load_runtime: RuntimeFactory, settings: ChatSettings | None = None,
                 flush_interval: float = 0.1,  # see streaming.py for why 100 ms
                 live_interval: float = LIVE_INTERVAL, ui_budget: float | None = UI_BUDGET,
                 history_path: Path | None = None,  # None: no history (tests); `specllama chat` passes one
                 build_runtime: RuntimeBuilder = real_runtime,  # for the model picker (F12): tests pass a fake
                 load_options=None,  # the LoadOptions of the first load, kept by a switch (context, threads, K auto)
                 registry=None):  # None: models.toml, read when the picker first opens
        super().__init__()
        self._load_runtime = load_runtime
        self._build_runtime = build_runtime
        self.load_options = load_options
        self._model_registry = registry
        self.settings = settings or ChatSettings()
        self.flush_interval = flush_interval
        self._live = Cadence(self, live_interval, self._paint_live, ui_budget)  # repaints of a streaming answer
        self._ui_budget = ui_budget
        self._live_stats = LiveStats()
        self.runtime: Any = None
        self.conversation = Conversation(system=self.settings.system)
        self.busy = False  # an answer is being generated (the engine runs one at a time)
        self.last_summary: Summary | None = None
        self.unexpected_errors: list[str] = []  # tracebacks of bugs, printed by `specllama chat` on exit
        self._idle = Event()  # set whenever no generation thread is running: safe to close the runtime
        self._idle.set()
        self._reply_id = 0
        self._reply: ChatMessage | None = None
        self._told_pending = False  # "applies from the next answer" said once per answer
        self._stop_requested = False
        self.load_failed: str | None = None  # why the models did not load: `specllama chat` exits 1
        self._panel_wanted: bool | None = None  # F9's choice; None: follow the terminal's width
        # A reopened conversation's drafter, kept while the models that offer it load (model_swap.py).
        self._wanted_drafter: str | None = None
        self.recorder = ConversationRecorder(history_path, self._history_off)

    def compose(self) -> ComposeResult:
        yield TitleBar()
        with Horizontal(id="main"):
            with Vertical(id="chat"):
                with VerticalScroll(id="conversation"):
                    yield Static("Type a message and press enter · F1 lists every key", id="hint")
                    yield LoadingPanel()
                yield PromptInput(placeholder="Ask something… (enter sends, ctrl+j new line)", id="prompt")
            yield StatsPanel()
        yield KeyBar(self.BINDINGS)

    def on_mount(self) -> None:
        self.query_one(TitleBar).show(self.TITLE, "loading the models…")
        self.query_one(StatsPanel).show_settings(self.settings)
        self.query_one(StatsPanel).show_legend(self.show_origins)
        self._fit_panel(self.size.width)
        self.query_one("#conversation").anchor()  # follow the answer until the user scrolls up
        self.query_one("#prompt").focus()
        self.recorder.open()
        self._load()

    # --- loading -------------------------------------------------------------------------------

    @work(thread=True, exit_on_error=False, group="load")
    def _load(self) -> None:
        warm_highlighter()  # ~0.15 s before the load rather than during the first answer
        load_runtime(self._load_runtime, self.post_message)

    def on_load_progress(self, message: LoadProgress) -> None:
        self.query_one(LoadingPanel).show_progress(message.done, message.total, message.what)

    def on_load_status(self, message: LoadStatus) -> None:
        self.query_one(LoadingPanel).show_loading(message.text)

    def on_runtime_failed(self, message: RuntimeFailed) -> None:
        if message.trace:
            self.unexpected_errors.append(message.trace)
        self.load_failed = message.reason
        self.query_one(TitleBar).show(self.TITLE, "could not load the models (ctrl+q quits)", failed=True)
        self.query_one(LoadingPanel).show_failure(message.reason)
        self.notify(message.reason, title="could not load the models", severity="error", timeout=30)

    def on_runtime_ready(self, message: RuntimeReady) -> None:
        self._use_runtime(message.runtime)

    def _use_runtime(self, runtime) -> None:
        """The first models loaded, or the ones a switch brought in (model_swap.py)."""
        self.runtime = runtime
        self.load_failed = None
        self.query("#conversation LoadingPanel").remove()
        draft = runtime.draft_name
        self.query_one(TitleBar).show(self.TITLE, runtime.target_name + (f" ← {draft}" if draft else ""))
        self.query_one(StatsPanel).show_models(runtime.target_name, draft, runtime.threads)
        self._live.budget = None if spare_core(runtime.threads) else self._ui_budget
        self._show_context()
        self._sync_drafter()

    # --- asking and answering ------------------------------------------------------------------

    @on(PromptInput.Submitted, "#prompt")
    def _submitted(self, event: PromptInput.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        if self.runtime is None:
            self.notify("the models are not loaded yet", severity="warning")
            return
        if self.busy:
            self.notify("still answering: esc stops the answer", severity="warning")
            return
        event.input.value = ""
        self.ask(text)

    def ask(self, text: str) -> None:
        """Sends one user message and starts streaming the answer."""
        self.conversation.ask(text)
        try:
            prompt = self.runtime.chat_tokens(self.conversation.for_template())
        except SpecllamaError as e:
            self.conversation.withdraw_question()
            self.notify(str(e), title="could not build the prompt", severity="error")
            return
        self.recorder.save_question(text, self.runtime.target_name, self.runtime.draft_name, self._history_settings())
        conversation = self.query_one("#conversation")
        conversation.mount(ChatMessage("user", text))
        self._reply = ChatMessage("assistant", show_origins=self.show_origins)
        conversation.mount(self._reply)
        self._reply_id += 1
        self._stop_requested = False
        self.busy = True
        # A blinking cursor is a frame every 0.5 s; while the answer streams it stays solid.
        self.query_one("#prompt", PromptInput).cursor_blink = False
        self._idle.clear()
        self._generate(self._reply_id, prompt, self.settings.generation_config())

    @work(thread=True, exit_on_error=False, group="generate")
    def _generate(self, reply_id: int, prompt: list[int], config) -> None:
        try:
            generation = self.runtime.generate(prompt, config)
            summary = stream_reply(reply_id, generation, self.post_message, self.flush_interval)
            self.post_message(ReplyDone(reply_id, summary))
        except Exception as e:  # SpecllamaError or a bug: both become a notification, never a crash
            if not isinstance(e, SpecllamaError):
                self.unexpected_errors.append(traceback.format_exc())
            self.post_message(ReplyDone(reply_id, None, e))
        finally:
            self._idle.set()

    async def on_reply_chunk(self, message: ReplyChunk) -> None:
        if message.reply_id != self._reply_id or self._reply is None:
            return  # an answer from a conversation that has since been cleared
        if self._stop_requested:
            self.runtime.cancel()  # esc came before the engine started (it clears the flag)
        self._reply.add(message.segments)
        # A kill loses at most this flush; the origins go with the text so a reopened answer keeps its colours.
        self.recorder.save_answer(self._reply.text, complete=False, segments=self._reply.segments)
        self.query_one(StatsPanel).add_rates(message.stats.step_rates)
        self._live_stats = message.stats
        await self._live.changed()

    async def _paint_live(self) -> None:
        """The streaming answer and the panel's live numbers, in one frame (cadence.py says why)."""
        if self._reply is None:
            return
        with self.batch_update():
            await self._reply.show_new()
            self.query_one(StatsPanel).show_live(self._live_stats, self.runtime.context_use())

    async def on_reply_done(self, message: ReplyDone) -> None:
        await self._reply_done(message)
        self.install_pending_runtime()  # models chosen while this answer streamed take over now

    async def _reply_done(self, message: ReplyDone) -> None:
        self.busy = False
        self.query_one("#prompt", PromptInput).cursor_blink = True
        self._told_pending = False
        self._sync_drafter()  # changes made while it ran
        if message.reply_id != self._reply_id or self._reply is None:
            return
        reply, self._reply = self._reply, None
        self._live.cancel()
        await reply.finish()
        if message.error is not None:
            self._answer_failed(reply, message.error)
            return
        summary = self.last_summary = message.summary
        self.conversation.answer(summary.text)
        self.recorder.save_answer(summary.text, complete=True, segments=reply.segments)
        note = FINISH_NOTES.get(summary.finish_reason)
        reply.set_status(f"{summary.tokens} tokens · {summary.tokens_per_s:.1f} tokens/s" + (f" · {note}" if note else ""))
        why = None
        if summary.steps and not summary.k_total and self.settings.drafter != "none":
            why = why_no_drafts(getattr(self.runtime, "costs", None), self.settings.drafter)
        self.query_one(StatsPanel).show_summary(summary, why)
        self._show_context()

    def _answer_failed(self, reply: ChatMessage, error: BaseException) -> None:
        # The question leaves the history (it has no answer) and goes back to the input box.
        question = self.conversation.withdraw_question()
        self.recorder.forget_turn()
        prompt = self.query_one("#prompt", PromptInput)
        if question and not prompt.value:
            prompt.value = question
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
            self.query_one(StatsPanel).show_context(*self.runtime.context_use())

    # --- controls ------------------------------------------------------------------------------

    def action_stop(self) -> None:
        if self.busy and self.runtime is not None:
            self._stop_requested = True
            self.runtime.cancel()  # honoured after the current step; the text so far stays

    def action_new_conversation(self, quiet: bool = False) -> None:
        if self.busy:
            self.runtime.cancel()
            self._reply_id += 1  # its last messages will be ignored
        self._reply = None
        self._live.cancel()
        self._wanted_drafter = None
        self.recorder.start()
        self.conversation.clear()
        self.query("#conversation ChatMessage").remove()
        self.query_one(StatsPanel).reset()
        if self.runtime is not None:  # the new chat starts empty, whatever the old one's cache holds
            self.query_one(StatsPanel).show_context(0, self.runtime.context_use()[1])
        if not quiet:
            self.notify("new conversation")

    def action_copy_answer(self) -> None:
        answer = self.conversation.last_answer
        if not answer:
            self.notify("no answer to copy yet", severity="warning")
            return
        how = copy_text(answer, self.copy_to_clipboard)
        self.notify(f"last answer ({len(answer)} characters) {how}")

    def action_copy_code(self) -> None:
        answers = [m for m in self.query("#conversation ChatMessage") if m.role == "assistant" and m.text]
        blocks = answers[-1].code_blocks() if answers else []
        if not blocks:
            self.notify("the last answer has no code block", severity="warning")
            return
        self._copy(blocks[-1], "code block")

    def on_chat_message_copy_requested(self, message: ChatMessage.CopyRequested) -> None:
        self._copy(message.text, message.what)

    def _copy(self, text: str, what: str) -> None:
        how = copy_text(text, self.copy_to_clipboard)
        lines = text.rstrip("\n").count("\n") + 1
        self.notify(f"{what} ({lines} line{'s' * (lines != 1)}) {how}")

    def action_toggle_panel(self) -> None:
        panel = self.query_one(StatsPanel)
        self._panel_wanted = not panel.display
        panel.display = self._panel_wanted

    def on_resize(self, event) -> None:
        # A narrow terminal gives the chat all of its width; the user's F9 choice wins over that.
        self._fit_panel(event.size.width)

    def _fit_panel(self, width: int) -> None:
        if self._panel_wanted is None:
            for panel in self.query(StatsPanel):  # none yet when the first resize arrives
                panel.display = width >= NARROW_WIDTH

    def action_toggle_origins(self) -> None:
        self.show_origins = not self.show_origins

    async def watch_show_origins(self, show: bool) -> None:
        for message in self.query(ChatMessage):
            await message.set_show_origins(show)
        self.query_one(StatsPanel).show_legend(show)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen([b for b in self.BINDINGS if isinstance(b, Binding)]))

    # --- shutting down -------------------------------------------------------------------------

    def on_unmount(self) -> None:
        self.recorder.close()

    def close_runtime(self, timeout: float = 30.0) -> None:
        """Stops a running answer and frees the models; call after `run()` returns."""
        self.close_pending_runtime()
        if self.runtime is None:
            return
        self.runtime.cancel()
        self._idle.wait(timeout)  # llama.cpp must not free a context another thread is decoding with
        self.runtime.close()
        self.runtime = None

