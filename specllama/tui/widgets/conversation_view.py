"""The conversation on screen, and the answer streaming into it: this widget owns the generation
worker, the reply in flight and the cadence of its repaints.

The worker never touches a widget: it posts ReplyChunk / ReplyDone to this view (streaming.py says
why posted, not called). Chunks of a reply the user has since cleared or replaced are dropped by
their reply id. When an answer ends the view finishes painting it and posts `AnswerEnded` to the
app, which keeps the conversation, the history and the side panel's summary.

Messages can be selected with the keyboard (tab from the input, then up / down) to copy one
(enter or y); esc or tab goes back to the input.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from threading import Event
from typing import Callable

from textual import work
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message

from specllama.decoding.cancel import CancelHandle
from specllama.decoding.engine import Summary
from specllama.errors import SpecllamaError
from specllama.llama.decode_threads import on_decode_thread
from specllama.tui.cadence import Cadence
from specllama.tui.streaming import LiveStats, ReplyChunk, ReplyDone, stream_reply
from specllama.tui.widgets.chat_message import ChatMessage

ChunkSeen = Callable[[ChatMessage, LiveStats], None]  # a chunk arrived (save it, keep its step rates)
PaintPanel = Callable[[LiveStats], None]  # paint the panel's live numbers, in the answer's frame


class ConversationView(VerticalScroll):
    BINDINGS = [
        Binding("up", "select(-1)", "previous message", show=False),
        Binding("down", "select(1)", "next message", show=False),
        Binding("enter,y", "copy_selected", "copy message", show=False),
        Binding("escape,tab", "leave", "back to the input", show=False),
    ]

    @dataclass
    class AnswerEnded(Message):
        """An answer ended. `reply` is None when it belonged to a conversation since cleared."""

        reply: ChatMessage | None
        summary: Summary | None
        error: BaseException | None = None

    @dataclass
    class Leave(Message):
        """The user is done selecting messages: the app gives the input its focus back."""

    def __init__(self, *, flush_interval: float, live_interval: float, ui_budget: float | None,
                 idle: Event, errors: list[str], on_chunk: ChunkSeen, paint_panel: PaintPanel,
                 id: str | None = None):
        super().__init__(id=id)
        self.flush_interval = flush_interval  # see streaming.py for why 100 ms
        self.live = Cadence(self, live_interval, self._paint_live, ui_budget)  # repaints of a streaming answer
        self._idle = idle  # set whenever no generation thread is running: safe to close the runtime
        self._errors = errors  # tracebacks of bugs, printed by `specllama chat` on exit
        self._on_chunk, self._paint_panel = on_chunk, paint_panel
        self._live_stats = LiveStats()
        self._reply_id = 0
        self.reply: ChatMessage | None = None  # the answer streaming now
        self._cancel: CancelHandle | None = None  # stops the answer in flight (from this thread)

    # --- streaming -------------------------------------------------------------------------------

    def start_answer(self, runtime, prompt: list[int], config, show_origins: bool,
                     question: str | None, thinking=None, show_thinking: bool = False) -> ChatMessage:
        """Shows `question` (None: it is on screen already, as when regenerating) and an empty
        answer, and starts generating into it. `thinking`: the parser that takes a thinking model's
        thinking apart (shown dimmed, folded unless `show_thinking`)."""
        if question is not None:
            self.mount(ChatMessage("user", question))
        self.reply = ChatMessage("assistant", show_origins=show_origins, show_thinking=show_thinking)
        self.mount(self.reply)
        self._reply_id += 1
        # Made here, before the worker starts: an esc that comes before the engine does is not lost.
        self._cancel = CancelHandle()
        self._idle.clear()
        self._generate(self._reply_id, runtime, prompt, config, self._cancel, thinking)
        return self.reply

    @work(thread=True, exit_on_error=False, group="generate")
    def _generate(self, reply_id: int, runtime, prompt: list[int], config, cancel: CancelHandle, thinking=None) -> None:
        def answer() -> None:
            generation = runtime.generate(prompt, config, cancel)
            summary = stream_reply(reply_id, generation, self.post_message, self.flush_interval, thinking=thinking)
            self.post_message(ReplyDone(reply_id, summary))

        try:
            # On the process's one decoding thread, not this worker's (an executor thread of Textual's
            # that lives on): two threads that ever decoded leave OpenMP's threads asleep at every
            # barrier (llama/decode_threads.py).
            on_decode_thread(answer)
        except Exception as e:  # SpecllamaError or a bug: both become a notification, never a crash
            if not isinstance(e, SpecllamaError):
                self._errors.append(traceback.format_exc())
            self.post_message(ReplyDone(reply_id, None, e))
        finally:
            self._idle.set()

    async def on_reply_chunk(self, message: ReplyChunk) -> None:
        message.stop()
        if message.reply_id != self._reply_id or self.reply is None:
            return  # an answer from a conversation that has since been cleared
        self.reply.add(message.segments)
        self._live_stats = message.stats
        self._on_chunk(self.reply, message.stats)
        await self.live.changed()

    async def _paint_live(self) -> None:
        """The streaming answer and the panel's live numbers, in one frame (cadence.py says why)."""
        if self.reply is None:
            return
        with self.app.batch_update():
            await self.reply.show_new()
            self._paint_panel(self._live_stats)

    async def on_reply_done(self, message: ReplyDone) -> None:
        message.stop()
        reply = None
        if message.reply_id == self._reply_id and self.reply is not None:
            reply, self.reply = self.reply, None
            self.live.cancel()
            await reply.finish()
        self.post_message(self.AnswerEnded(reply, message.summary, message.error))

    def stop(self) -> None:
        """Stops the answer after the current step; the text so far stays."""
        if self._cancel is not None:
            self._cancel.cancel()

    def forget_reply(self) -> None:
        """The answer in flight no longer belongs here (new chat, regenerate): its last messages
        are ignored, no paint stays pending for it."""
        self.stop()
        self._reply_id += 1
        self.reply = None
        self.live.cancel()

    # --- the messages ----------------------------------------------------------------------------

    @property
    def messages(self) -> list[ChatMessage]:
        return list(self.query(ChatMessage))

    def withdraw_last(self, *, question_too: bool) -> None:
        """Removes the last answer (regenerate) or the last question and its answer (edit). A failed
        answer stays on screen, marked, after its turn left the conversation: it and its question
        go first, so the screen keeps matching what the model is sent."""
        messages = self.messages
        gone: list[ChatMessage] = []
        if messages and messages[-1].has_class("-failed"):
            gone += messages[-2:] if len(messages) > 1 and messages[-2].role == "user" else messages[-1:]
        rest = messages[:len(messages) - len(gone)]
        if rest and rest[-1].role == "assistant":
            gone.append(rest.pop())
        if question_too and rest and rest[-1].role == "user":
            gone.append(rest.pop())
        for message in gone:
            message.remove()

    # --- selecting a message with the keyboard ---------------------------------------------------

    @property
    def selected(self) -> ChatMessage | None:
        focused = self.app.focused
        return focused if isinstance(focused, ChatMessage) and focused.parent is self else None

    def select_last(self) -> bool:
        messages = self.messages
        if messages:
            # At once, not Widget.focus()'s call_later: a key typed right after tab (d, k, t...) is
            # already queued when that callback would run, and went to the input as text (seen in a
            # real terminal, tests/unit/test_tui_tmux.py, on a loaded machine).
            self.screen.set_focus(messages[-1])
        return bool(messages)

    def action_select(self, step: int) -> None:
        messages = self.messages
        if not messages:
            return
        current = self.selected
        at = messages.index(current) + step if current in messages else len(messages) - 1
        self.screen.set_focus(messages[max(0, min(len(messages) - 1, at))])

    def action_copy_selected(self) -> None:
        if self.selected is not None:
            self.selected.post_message(ChatMessage.CopyRequested(self.selected.text, f"{self.selected.role_label} message"))

    def action_leave(self) -> None:
        self.post_message(self.Leave())

